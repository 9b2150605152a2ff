"""``hpcgnn report``: plots and an ``index.md`` from metrics files and model scaling studies.

Inputs are JSON documents of two kinds, told apart by their keys: the metrics of a run
(``hpcgnn train --metrics``, see ``docs/metrics.md``) and a scaling study
(``hpcgnn model --out``). Each figure is written as PNG and SVG; a figure is left out
when no input has what it shows:

- ``curves``: loss and accuracy per epoch of every run (epochs counted from 1, in the
  files of every schema: :func:`epoch_numbers`);
- ``phases``: seconds per epoch of each phase, stacked, one bar per run (CAGNET's figures);
- ``bytes``: measured and predicted bytes per epoch of every run, with their ratio;
- ``exchange``: ``V_ori``, ``V_p2p``, ``V_ru`` of the runs of partitioned models;
- ``scaling``: modelled time and busiest-rank bytes of each algorithm's fastest grid vs P.

Figures are drawn with :class:`matplotlib.figure.Figure` (no pyplot state, no display).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcgnn.cost.ranking import fastest_per_algo
from hpcgnn.errors import ConfigError
from hpcgnn.utils.files import atomic_path, atomic_write, check_directory, output_directory
from hpcgnn.utils.json_text import read_json
from hpcgnn.utils.text import printable

FORMATS = ("png", "svg")


@dataclass(frozen=True)
class Run:
    """One metrics document and the label it is shown under."""

    label: str
    doc: dict[str, Any]


@dataclass(frozen=True)
class Study:
    """One ``hpcgnn model --out`` document and its label."""

    label: str
    doc: dict[str, Any]


#: The HongTu volumes of the exchange figure.
EXCHANGE_VOLUMES = ("V_ori", "V_p2p", "V_ru")
#: The metrics ``run.schema_version`` from which ``epochs[].epoch`` counts from 1; files
#: of earlier schemas (or without a ``run`` section) counted from 0.
ONE_BASED_SCHEMA = 2


def load_inputs(paths: list[str]) -> tuple[list[Run], list[Study]]:
    """Read every input and sort it into runs and scaling studies.

    Raises
    ------
    ConfigError
        One line naming the file: unreadable, not JSON, or neither kind of document.
    """
    runs, studies = [], []
    for path in paths:
        try:
            doc = read_json(path)
        except ValueError as err:
            raise ConfigError(f"{path}: {err}") from None
        label = _stem(path, paths)
        if isinstance(doc, dict) and isinstance(doc.get("results"), list) and "machine" in doc:
            studies.append(_checked(path, Study(label, doc)))
        elif isinstance(doc, dict) and isinstance(doc.get("epochs"), list) and "comm" in doc:
            runs.append(_checked(path, Run(_run_label(label, doc), doc)))
        else:
            raise ConfigError(
                f"{path}: neither a metrics file (train --metrics) nor a scaling study "
                "(model --out)"
            )
    return runs, studies


#: The largest magnitude a figure takes: a plotted range must stay finite (matplotlib's
#: tick arithmetic overflows on a span of about 1e308).
PLOTTABLE = 1e150


def _too_large(doc: Any, where: str = "") -> tuple[str, float] | None:
    """The first number of ``doc`` (nested) beyond :data:`PLOTTABLE`, with where it is."""
    if isinstance(doc, dict):
        items: Any = ((f"{where}.{k}" if where else str(k), v) for k, v in doc.items())
    elif isinstance(doc, list):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(doc))
    else:
        ok = isinstance(doc, bool) or not isinstance(doc, (int, float))
        return None if ok or not math.isfinite(doc) or abs(doc) <= PLOTTABLE else (where, doc)
    for key, value in items:
        found = _too_large(value, key)
        if found is not None:
            return found
    return None


def _checked(path: str, item: Any) -> Any:
    """``item`` (a run or a study) once every value the report reads has its type.

    Reads them as the figures and the index do, so a section of the wrong type (a number
    where a table is, text where a number is) is one line naming the file.
    """
    try:
        if isinstance(item, Study):
            item.doc["machine"]
            for points in fastest(item).values():
                for procs, row in points:  # numbers, and a grid to print
                    float(procs), float(row["time_s"]), float(row["max_rank_bytes"]), row["grid"]
        else:
            doc = item.doc
            for key in ("measured_bytes", "predicted_bytes"):
                _total(item, key)
            epoch_numbers(doc)
            for e in doc["epochs"]:
                for key in ("loss", "train_acc", "val_acc"):
                    _fmt(e.get(key))
            time = doc.get("time", {})
            printed = [*time.get("phases", {}).values(), time.get("epoch_median_s"),
                       *(doc.get("exchange", {}).get(key) for key in EXCHANGE_VOLUMES),
                       doc.get("final", {}).get("test_acc"), peak_memory(doc)]
            for value in printed:  # numbers or None
                _fmt(value)
            doc.get("config", {}).get("mode")
    except (TypeError, AttributeError, KeyError, ValueError) as err:
        raise ConfigError(
            f"{path}: a value the report reads has the wrong type or is missing "
            f"({type(err).__name__}: {err})"
        ) from None
    found = _too_large(item.doc)
    if found is not None:
        raise ConfigError(printable(f"{path}: {found[0]} = {found[1]:g} is beyond what a figure"
                                    f" can draw (|value| <= {PLOTTABLE:g})"))
    return item


def _stem(path: str, paths: list[str]) -> str:
    """The file's name without ``.json``, with its directory where another input shares it.

    Job scripts write ``metrics.json`` in one directory per run.
    """
    p = Path(path)
    if sum(Path(q).stem == p.stem for q in paths) > 1:
        return f"{p.parent.name}/{p.stem}"
    return p.stem


def _run_label(stem: str, doc: dict[str, Any]) -> str:
    cfg = doc.get("config", {})
    return f"{stem}: {cfg.get('algo', '?')} {cfg.get('grid', '')} P={doc.get('world_size', '?')}"


def write_report(paths: list[str], out: str) -> list[Path]:
    """Draw every figure the inputs allow into ``out`` and write ``out/index.md``.

    Returns
    -------
    list of Path
        The files written, ``index.md`` last.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(
            "hpcgnn report needs matplotlib: pip install 'hpcgnn[plot]'"
        ) from None
    runs, studies = load_inputs(paths)
    check_directory(out, "report directory")
    with output_directory(out) as outdir:
        drawn: dict[str, list[Path]] = {}
        panels: tuple[tuple[str, Callable[[Any, list[Any]], None], list[Any]], ...] = (
            ("curves", _curves, runs),
            ("phases", _phases, runs),
            ("bytes", _bytes, [r for r in runs if _total(r, "measured_bytes")]),
            ("exchange", _exchange, [r for r in runs if "V_ori" in r.doc.get("exchange", {})]),
            ("scaling", _scaling, studies),
        )
        for name, draw, items in panels:
            if not items:
                continue
            fig = Figure(figsize=(10, 4.8), layout="constrained")
            draw(fig, items)
            for fmt in FORMATS:
                with atomic_path(outdir / f"{name}.{fmt}", "report figure") as tmp:
                    fig.savefig(tmp, format=fmt, dpi=110)
                fig.set_layout_engine("none")  # keep the first layout: it costs a draw each time
            drawn[name] = [outdir / f"{name}.{fmt}" for fmt in FORMATS]
        text = _index(runs, studies, list(drawn))
        index = atomic_write(outdir / "index.md", text, "report index")
    return [p for files in drawn.values() for p in files] + [index]


def _total(run: Run, key: str) -> float:
    return float(sum(v or 0.0 for v in run.doc.get("comm", {}).get(key, {}).values()))


def epoch_numbers(doc: dict[str, Any]) -> list[float]:
    """The 1-based number of each of a metrics document's ``epochs``, whatever its schema."""
    run = doc.get("run")
    schema = run.get("schema_version") if isinstance(run, dict) else None
    shift = 0 if isinstance(schema, int) and schema >= ONE_BASED_SCHEMA else 1
    return [float(e["epoch"]) + shift for e in doc["epochs"]]


#: Markers that tell runs apart where their curves coincide (the same losses at 1 and 4
#: ranks are the point of a check): each run also draws a thinner line than the one before.
MARKERS = ("o", "s", "^", "v", "D", "x", "+", "*")


def _curves(fig: Any, runs: list[Run]) -> None:
    loss, acc = fig.subplots(1, 2)
    for i, run in enumerate(runs):
        epochs, numbers = run.doc["epochs"], epoch_numbers(run.doc)
        kw = dict(color=f"C{i % 10}", marker=MARKERS[i % len(MARKERS)], markersize=4,
                  markevery=max(1, len(epochs) // 12), linewidth=1 + 2.0 * (len(runs) - 1 - i)
                  / max(1, len(runs) - 1), markerfacecolor="none")
        for ax, key, style, what in ((loss, "loss", "-", "train"),
                                     (loss, "val_loss", "--", "val"),
                                     (acc, "train_acc", "-", "train"),
                                     (acc, "val_acc", "--", "val"),
                                     (acc, "test_acc", ":", "test")):
            points = [(n, e[key]) for n, e in zip(numbers, epochs, strict=True)
                      if e.get(key) is not None]
            if points:
                ax.plot(*zip(*points, strict=True), style, label=f"{run.label} ({what})", **kw)
    from matplotlib.ticker import MaxNLocator

    for ax in (loss, acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    loss.set(xlabel="epoch", ylabel="loss", title="Loss (solid: train, dashed: val)")
    acc.set(xlabel="epoch", ylabel="accuracy",
            title="Accuracy (solid: train, dashed: val, dotted: test)", ylim=(0, 1))
    handles, labels = acc.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize="x-small", loc="outside right upper",
               ncol=1 + len(labels) // 24)


def phase_bars(doc: dict[str, Any]) -> dict[str, float]:
    """Seconds per epoch of a run's phases that do not overlap, as the bars stack them.

    Minibatch runs time their pipeline (``sample``, ``fetch``, ``propagate``), which holds
    the communication categories and compute phases: those stages alone are drawn, so no
    second is counted twice. Other runs' phases (communication categories, compute)
    do not nest.
    """
    time = doc.get("time", {})
    return dict(time.get("minibatch_phases") or time.get("phases", {}))


def _phases(fig: Any, runs: list[Run]) -> None:
    ax = fig.subplots()
    bars = [phase_bars(r.doc) for r in runs]
    phases = sorted({p for b in bars for p in b})
    bottom = [0.0] * len(runs)
    x = range(len(runs))
    colours = _colours(len(phases))
    for phase, colour in zip(phases, colours, strict=True):
        ms = [1e3 * (b.get(phase) or 0.0) for b in bars]
        ax.bar(x, ms, bottom=bottom, label=phase, color=colour)
        bottom = [b + v for b, v in zip(bottom, ms, strict=True)]
    ax.set_xticks(list(x), [r.label for r in runs], rotation=20, ha="right", fontsize="small")
    minibatch = any(r.doc.get("time", {}).get("minibatch_phases") for r in runs)
    ax.set(ylabel="milliseconds per epoch (mean over ranks)",
           title="Time per epoch by phase" + (" (minibatch runs: their pipeline stages)"
                                              if minibatch else ""))
    shared = [r.label for r in runs if r.doc.get("device", {}).get("oversubscribed")]
    if shared:
        fig.supxlabel(f"{', '.join(shared)}: more ranks than cores on a host, so a"
                      " communication phase includes waiting for a core", fontsize="small")
    fig.legend(fontsize="small", loc="outside right upper")


def _bytes(fig: Any, runs: list[Run]) -> None:
    ax = fig.subplots()
    width = 0.4
    measured = [_total(r, "measured_bytes") / 1e6 for r in runs]
    predicted = [_total(r, "predicted_bytes") / 1e6 for r in runs]
    x = list(range(len(runs)))
    ax.bar([i - width / 2 for i in x], measured, width, label="measured", color="C0")
    ax.bar([i + width / 2 for i in x], predicted, width, label="predicted", color="C1")
    for i, (m, p) in enumerate(zip(measured, predicted, strict=True)):
        text = f"{m / p:.3f}x" if p > 0 else "no model"
        ax.annotate(text, (i, max(m, p)), ha="center", va="bottom", fontsize="small")
    ax.set_xticks(x, [r.label for r in runs], rotation=20, ha="right", fontsize="small")
    ax.set(ylabel="MB per epoch (summed over ranks)",
           title="Communication per epoch: measured vs predicted (label: measured / predicted)")
    ax.legend()


def _exchange(fig: Any, runs: list[Run]) -> None:
    ax = fig.subplots()
    keys = EXCHANGE_VOLUMES
    width = 0.8 / len(keys)
    for k, key in enumerate(keys):
        x = [i + (k - 1) * width for i in range(len(runs))]
        ax.bar(x, [r.doc["exchange"].get(key, 0) for r in runs], width, label=key)
    ax.set_xticks(range(len(runs)), [r.label for r in runs], rotation=20, ha="right",
                  fontsize="small")
    ax.set(ylabel="neighbour vertices loaded per layer sweep",
           title="Neighbour loads: without dedup (V_ori), deduplicated across ranks (V_p2p), "
                 "with reuse across batches (V_ru)")
    ax.legend()


def fastest(study: Study) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """Each algorithm's fastest choice at every P of a study: ``{algo: [(P, row), ...]}``."""
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for result in study.doc["results"]:
        for algo, row in fastest_per_algo(result["choices"]).items():
            out.setdefault(algo, []).append((result["procs"], row))
    return out


def _scaling(fig: Any, studies: list[Study]) -> None:
    times, volumes = fig.subplots(1, 2)
    styles = ("-", "--", ":", "-.")
    for s, study in enumerate(studies):
        for a, (algo, points) in enumerate(sorted(fastest(study).items())):
            procs = [p for p, _ in points]
            label = f"{algo} ({study.label}, {study.doc['machine']})"
            kw = dict(color=f"C{a % 10}", linestyle=styles[s % len(styles)], marker="o")
            times.plot(procs, [1e3 * r["time_s"] for _, r in points], label=label, **kw)
            volumes.plot(procs, [r["max_rank_bytes"] / 1e6 for _, r in points], **kw)
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    procs = sorted({r["procs"] for study in studies for r in study.doc["results"]})
    for ax in (times, volumes):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(procs, [str(p) for p in procs])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("ranks P")
        ax.grid(True, which="major", alpha=0.3)
    for ax in (times, volumes):  # a narrow range: a log axis shows one or two labels
        low, high = ax.get_ylim()
        if high < 10 * low:
            ax.set_yscale("linear")
            ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    times.set(ylabel="modelled communication, ms per epoch",
              title="Fastest grid of each algorithm (modelled, not measured)")
    volumes.set(ylabel="MB received by the busiest rank per epoch (modelled)",
                title="Busiest-rank volume of that grid")
    times.legend(fontsize="small")


def peak_memory(doc: dict[str, Any]) -> int | None:
    """The largest rank's peak host memory of a run (``memory.peak_bytes``), bytes.

    ``None`` for a file without the ``memory`` section (written before it).
    """
    peaks = (doc.get("memory") or {}).get("peak_bytes") or []
    return max(peaks) if peaks else None


def _colours(n: int) -> list[Any]:
    """``n`` colours, distinct up to 60 (tab20, then tab20b and tab20c), then repeating."""
    from matplotlib import colormaps

    palette = [colormaps[name](i) for name in ("tab20", "tab20b", "tab20c") for i in range(20)]
    return [palette[i % len(palette)] for i in range(n)]


def _fmt(value: Any, scale: float = 1.0, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value * scale:.{digits}g}"


def _index(runs: list[Run], studies: list[Study], figures: list[str]) -> str:
    lines = ["# hpcgnn report", ""]
    if runs:
        lines += [
            "## Runs", "",
            "| run | mode | P | test acc | epoch median ms | MB/epoch measured"
            " | MB/epoch predicted | measured / predicted | peak host MiB |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in runs:
            m, p = _total(r, "measured_bytes"), _total(r, "predicted_bytes")
            lines.append(
                f"| {r.label} | {r.doc.get('config', {}).get('mode', '-')}"
                f" | {r.doc.get('world_size', '-')}"
                f" | {_fmt(r.doc.get('final', {}).get('test_acc'))}"
                f" | {_fmt(r.doc.get('time', {}).get('epoch_median_s'), 1e3)}"
                f" | {_fmt(m, 1e-6)} | {_fmt(p, 1e-6) if p else '-'}"
                f" | {_fmt(m / p) if p else '-'} | {_fmt(peak_memory(r.doc), 2.0**-20)} |"
            )
        lines.append("")
    for study in studies:
        best = fastest(study)
        algos = sorted(best)
        lines += [
            f"## Scaling study: {study.label} on {study.doc['machine']}", "",
            f"{study.doc.get('graph', '')}: fastest grid of each algorithm, modelled"
            " communication in ms per epoch.", "",
            "| P | " + " | ".join(algos) + " |",
            "| ---: |" + " --- |" * len(algos),
        ]
        for result in study.doc["results"]:
            cells = []
            for algo in algos:
                row = next((r for p, r in best[algo] if p == result["procs"]), None)
                cells.append("-" if row is None else f"{row['time_s'] * 1e3:.4g} ({row['grid']})")
            lines.append(f"| {result['procs']} | " + " | ".join(cells) + " |")
        lines.append("")
    if figures:
        lines += ["## Figures", ""]
        lines += [f"![{name}]({name}.png) ([svg]({name}.svg))\n" for name in figures]
    return "\n".join(lines) + "\n"
