"""Collective memory checks before large allocations, and the peaks a run reached.

:func:`check_memory` refuses a run that a node cannot hold; :class:`MemoryPeaks` records
this rank's peak memory by the end of each phase of a run and :func:`memory_section`
gathers every rank's on rank 0 (the metrics' ``memory`` section, ``docs/metrics.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpcgnn.backend.device import DEVICE_PEAK_SOURCE, Device
from hpcgnn.comm.collective import check
from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.node import node_rank
from hpcgnn.errors import ConfigError
from hpcgnn.utils.memory import (
    GIB,
    PEAK_RSS_SOURCE,
    address_space_left,
    available_bytes,
    peak_rss_bytes,
)


def check_memory(comm: Comm, need_bytes: float, what: str) -> None:
    """Fail on every rank if any node lacks ``need_bytes`` per rank for ``what``.

    The node's available memory is shared by the ranks placed on it.
    """
    _, ranks_here = node_rank(comm.mpi)
    need = f"not enough memory for {what}: about {need_bytes / GIB:.2f} GiB per rank needed"
    avail, left = available_bytes(), address_space_left()
    problem = None
    if avail is not None and need_bytes * ranks_here > avail:
        problem = (
            f"{need}, {avail / ranks_here / GIB:.2f} GiB available per rank ({ranks_here} "
            "ranks on a node); use more nodes or ranks, or a smaller model"
        )
    elif left is not None and need_bytes > left:
        problem = (
            f"{need}, {left / GIB:.2f} GiB more may be mapped under this process's "
            "address-space limit (ulimit -v); raise the limit, or use more ranks or a "
            "smaller model"
        )
    check(comm, problem is None, problem or "", ConfigError)  # one message for both limits


@dataclass
class MemoryPeaks:
    """This rank's peak memory by the end of each phase of a run, in the order marked.

    Both are high-water marks since the process started, so they never fall from one
    phase to the next: ``host`` the peak resident set (:func:`peak_rss_bytes`), ``device``
    the GPU's peak of allocated bytes (:meth:`Device.peak_bytes`; ``None`` on the CPU and
    the emulated GPU).
    """

    host: dict[str, int] = field(default_factory=dict)
    device: dict[str, int | None] = field(default_factory=dict)

    def mark(self, phase: str, device: Device) -> None:
        """Record the peaks reached by the end of ``phase`` (this rank's; no message)."""
        self.host[phase] = peak_rss_bytes()
        self.device[phase] = device.peak_bytes()


def memory_section(
    comm: Comm, peaks: MemoryPeaks, predicted: float | None = None
) -> dict[str, Any] | None:
    """The metrics' ``memory`` section on rank 0 of ``comm``, ``None`` elsewhere (collective).

    One gather of every rank's peaks and estimate (category ``"control"``): lists with one
    entry per rank.

    Parameters
    ----------
    comm
        The run's world.
    peaks
        This rank's peaks by phase (the same phases on every rank).
    predicted
        The mode's estimate of the bytes this rank needs (what the memory check before the
        run used), or ``None`` where it has none.

    Returns
    -------
    dict or None
        ``peak_bytes`` (each rank's host peak by the end of the run), ``phases`` (phase:
        each rank's host peak by its end), ``source``, ``predicted_bytes`` (with an
        estimate), and ``device``: the same of the GPU's allocated bytes, ``None`` where
        the device has no count of its own (the CPU, the emulated GPU).
    """
    mine = (peaks.host, peaks.device, None if predicted is None else int(predicted))
    ranks = comm.gather_obj(mine, root=0)
    if ranks is None:
        return None
    phases = list(peaks.host)

    def by_phase(which: int) -> dict[str, list[Any]]:
        return {p: [r[which][p] for r in ranks] for p in phases}

    host, device = by_phase(0), by_phase(1)
    section: dict[str, Any] = {
        "peak_bytes": host[phases[-1]] if phases else [], "phases": host,
        "source": PEAK_RSS_SOURCE,
    }
    estimates = [r[2] for r in ranks]
    if all(e is not None for e in estimates):
        section["predicted_bytes"] = estimates
    counted = phases and all(v is not None for values in device.values() for v in values)
    section["device"] = {
        "peak_bytes": device[phases[-1]], "phases": device, "source": DEVICE_PEAK_SOURCE,
    } if counted else None
    return section
