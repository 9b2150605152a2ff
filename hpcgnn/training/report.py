"""The end of every run: summary lines, metrics JSON (``--metrics``) and trace (``--trace``).

:func:`finish_run` is the one report builder of every mode: the mode's trainer supplies
its cost prediction and its own section (``exchange`` for partitioned models,
``sampling`` for minibatch), this module the rest (see ``docs/metrics.md``).
"""

from __future__ import annotations

import datetime as dt
import operator
import os
import platform
import socket
import statistics
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from hpcgnn.comm.collective import collective
from hpcgnn.comm.communicator import Comm
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphMeta
from hpcgnn.training.loop import TrainResult
from hpcgnn.training.trace import gather_trace, write_trace
from hpcgnn.utils.files import atomic_write
from hpcgnn.utils.json_text import dumps


def summed_over_ranks(comm: Comm, per_rank: dict[str, float]) -> dict[str, float]:
    """Sum a ``{category: value}`` dict over ranks (categories may differ between ranks)."""
    return _over_ranks(comm, per_rank, operator.add)


def max_over_ranks(comm: Comm, per_rank: dict[str, float]) -> dict[str, float]:
    """The largest value of each category over ranks: the busiest rank's, category by category."""
    return _over_ranks(comm, per_rank, max)


def _over_ranks(
    comm: Comm, per_rank: dict[str, float], combine: Callable[[float, float], float]
) -> dict[str, float]:
    merged: dict[str, float] = {}
    for d in comm.mpi.allgather(per_rank):
        for k, v in d.items():
            merged[k] = combine(merged[k], v) if k in merged else float(v)
    return dict(sorted(merged.items()))


def build_metrics(
    result: TrainResult, *, world_size: int, config: dict[str, Any],
    measured_bytes: dict[str, float], predicted_bytes: dict[str, float] | None = None,
    phases: dict[str, float] | None = None, extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the metrics document (see ``docs/metrics.md``)."""
    times = [e.time_s for e in result.epochs]
    doc: dict[str, Any] = {
        "world_size": world_size,
        "config": config,
        "epochs": [e.as_dict() for e in result.epochs],
        "final": result.final,
        "time": {
            "epoch_median_s": statistics.median(times) if times else 0.0,
            "total_s": sum(times),
            "phases": phases or {},
        },
        "comm": {
            "measured_bytes": measured_bytes,
            "predicted_bytes": predicted_bytes or {},
        },
        "params_sha256": result.params_sha256,
    }
    for key, value in (extra or {}).items():  # sections; nested dicts are merged one level
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    return doc


#: Version of the metrics document's layout (``run.schema_version``); raised when a key
#: changes meaning or goes away, not when one is added. 2: ``epochs[].epoch``,
#: ``best.epoch`` and ``gist.per_round[].round`` count from 1 (0-based in 1).
METRICS_SCHEMA = 2


def run_section() -> dict[str, Any]:
    """The ``run`` section: what wrote the file, where and when (schema, versions, host)."""
    import mpi4py
    import torch

    from hpcgnn import __version__
    from hpcgnn.comm.wire import library_version

    return {
        "schema_version": METRICS_SCHEMA,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "command": " ".join(sys.argv),  # the process's command line
        "hpcgnn": __version__, "python": platform.python_version(), "torch": torch.__version__,
        "numpy": np.__version__, "mpi4py": mpi4py.__version__,
        "mpi": library_version(),
    }


def write_json(path: str | os.PathLike, doc: dict[str, Any]) -> None:
    """Write ``doc`` as strict JSON (NaN and infinities become ``null``), atomically."""
    text = dumps(doc, indent=2, sort_keys=False)
    atomic_write(path, text + "\n", "--metrics")


def graph_section(meta: GraphMeta, content: str | None = None) -> dict[str, Any]:
    """The ``graph`` section: the input's name, sizes, direction and content fingerprint.

    ``content``: :func:`hpcgnn.graph.check.check_graph`'s fingerprint of the edges,
    features, labels, masks, node ids and partition (the same for any number of ranks), so
    two runs can be told to be on the same data.
    """
    return {
        "name": meta.name, "num_nodes": meta.num_nodes, "num_edges": meta.num_edges,
        "num_features": meta.num_features, "num_classes": meta.num_classes,
        "directed": meta.directed, "feature_normalization": meta.feature_normalization or None,
        "content_fingerprint": content,
    }


def finish_run(
    grid: ProcessGrid, result: TrainResult, *, config: dict[str, Any], meta: GraphMeta,
    measured: dict[str, float], phases: dict[str, float], predicted: dict[str, float],
    sections: dict[str, Any], lines: list[str], metrics: str | None, trace: str | None,
    step_name: str = "epoch", content: str | None = None, share: bool = False,
    summary: bool = True,
) -> dict[str, Any] | None:
    """Print the summary on rank 0, write the metrics and the trace (collective).

    Returns the metrics document, rank 0's, on every rank with ``share`` (else ``None``).

    Parameters
    ----------
    grid
        The run's process grid.
    result
        The loop's result.
    config
        The ``config`` section.
    meta
        The graph's sizes (``graph`` section).
    measured, phases
        Bytes per category and seconds per phase of one epoch, summed (bytes) or averaged
        (seconds) over ranks.
    predicted
        The model's predicted bytes per category (empty: no cost model).
    sections
        The mode's own metrics sections.
    lines
        The mode's own summary lines.
    metrics, trace
        Output paths (rank 0 writes them), or ``None``.
    step_name
        What a step of the loop is called (GIST: ``round``).
    content
        The graph's content fingerprint (``graph`` section).
    share
        Build the metrics document even without ``metrics`` and give it to every rank
        (``hpcgnn.train``'s result).
    summary
        Print the summary lines (``hpcgnn.train(quiet=True)``: none).
    """
    events = gather_trace(grid.world, grid.stats) if trace else None
    doc = None
    with collective(grid.world):  # a full disk on rank 0 is the same line on every rank
        if grid.rank == 0:
            doc = _report(result, config=config, meta=meta, world_size=grid.size,
                          measured=measured, phases=phases, predicted=predicted,
                          sections=sections, lines=lines, metrics=metrics, trace=trace,
                          events=events, step_name=step_name, content=content, share=share,
                          summary=summary)
    return grid.world.mpi.bcast(doc, root=0) if share else None


def validation_lines(result: TrainResult, step_name: str = "epoch") -> list[str]:
    """The best-validation step (1-based, as the progress lines) and where training stopped."""
    out = []
    best = result.validation.best
    if best is not None:
        selected = " | selected (--select-model best)" if result.selected_epoch is not None else ""
        out.append(
            f"best validation | {step_name} {best.epoch} | val loss {best.val_loss:.4f}"
            f" acc {best.val_acc:.4f} | test {best.test_acc:.4f}{selected}"
        )
    if result.stopped_after is not None:
        out.append(
            f"early stopping | stopped after {step_name} {result.stopped_after}: no lower"
            f" validation loss in {result.validation.patience} evaluations"
        )
    return out


def _report(
    result: TrainResult, *, config: dict[str, Any], meta: GraphMeta, world_size: int,
    measured: dict[str, float], phases: dict[str, float], predicted: dict[str, float],
    sections: dict[str, Any], lines: list[str], metrics: str | None, trace: str | None,
    events: list[dict] | None, step_name: str = "epoch", content: str | None = None,
    share: bool = False, summary: bool = True,
) -> dict[str, Any] | None:
    """Rank 0's part of :func:`finish_run`: the summary lines and the files.

    Returns the metrics document when it was written or ``share`` asks for it.
    """
    f = result.final
    out = [
        f"final (no dropout) | loss {f['loss']:.4f} | train {f['train_acc']:.4f}"
        f" val {f['val_acc']:.4f} test {f['test_acc']:.4f}"
        f" | params sha256 {result.params_sha256[:16]}"
    ]
    out += validation_lines(result, step_name)
    if result.epochs:
        med = float(np.median([e.time_s for e in result.epochs]))
        comm = f"{sum(measured.values()) / 1e6:.3f} MB measured"
        if predicted:
            comm += f", {sum(predicted.values()) / 1e6:.3f} MB predicted"
        out.append(f"{step_name} median {med * 1e3:.1f} ms | comm per {step_name} {comm}")
    if summary:
        print("\n".join(out + lines), flush=True)
    doc = None
    if metrics or share:
        best = result.validation.as_dict()
        doc = build_metrics(
            result, world_size=world_size, config=config, measured_bytes=measured,
            predicted_bytes=predicted, phases=phases,
            extra={**sections, "graph": graph_section(meta, content), "run": run_section(),
                   "best": None if best is None else {
                       **best, "selected": result.selected_epoch is not None},
                   "early_stopping": {"patience": result.validation.patience,
                                      "stopped_after_epochs": result.stopped_after}},
        )
    if metrics:
        assert doc is not None
        write_json(metrics, doc)
        print(f"metrics written to {metrics}", file=sys.stderr)
    if trace and events is not None:
        write_trace(trace, events)
        print(f"trace written to {trace}", file=sys.stderr)
    return doc
