"""The metrics JSON written by ``hpcgnn train --metrics``."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

from hpcgnn.comm.communicator import Comm
from hpcgnn.train.loop import TrainResult


def summed_over_ranks(comm: Comm, per_rank: dict[str, float]) -> dict[str, float]:
    """Sum a ``{category: value}`` dict over ranks (categories may differ between ranks)."""
    merged: dict[str, float] = {}
    for d in comm.mpi.allgather(per_rank):
        for k, v in d.items():
            merged[k] = merged.get(k, 0.0) + v
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
    if extra:
        doc.update(extra)
    return doc


def write_json(path: str | os.PathLike, doc: dict[str, Any]) -> None:
    """Write ``doc`` atomically (write to a temporary name, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)
