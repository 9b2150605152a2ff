"""Chrome trace-event files (open in https://ui.perfetto.dev or chrome://tracing)."""

from __future__ import annotations

import json
import os

from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.stats import CommStats
from hpcgnn.utils.files import atomic_write


def gather_trace(comm: Comm, stats: CommStats) -> list[dict] | None:
    """Collect every rank's spans on rank 0 as trace events (``None`` elsewhere).

    One track (``tid``) per rank; timestamps are aligned on the barrier-synchronised
    clock of each rank's ``stats.origin``.
    """
    stats.settle()
    events = [
        {
            "name": s.name,
            "cat": s.kind,
            "ph": "X",
            "pid": 0,
            "tid": comm.rank,
            "ts": round(s.start * 1e6, 3),
            "dur": round((s.end - s.start) * 1e6, 3),
            **({"args": s.args} if s.args else {}),
        }
        for s in stats.spans
    ]
    gathered = comm.gather_obj(events, root=0, category="trace")
    if gathered is None:
        return None
    out: list[dict] = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "hpcgnn"}}]
    for r, evs in enumerate(gathered):
        out.append(
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": r, "args": {"name": f"rank {r}"}}
        )
        out.append(
            {"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": r, "args": {"sort_index": r}}
        )
        out.extend(evs)
    return out


def write_trace(path: str | os.PathLike, events: list[dict]) -> None:
    """Write a Chrome trace-event JSON file."""
    atomic_write(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}), "--trace")
