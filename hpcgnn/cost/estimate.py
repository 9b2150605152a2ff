"""What the cost models take and return: :class:`Problem` (sizes) and :class:`Estimate`.

Each ``predict_*`` function of :mod:`hpcgnn.cost` returns, for one training epoch
(forward with dropout, backward, gradient all-reduce; no evaluation pass), the bytes
received per category *summed over all ranks*, in exactly the accounting of
:class:`hpcgnn.comm.stats.CommStats`, together with the largest per-rank volume and the
number of messages on the critical path. Training compares these predictions with what it
measured; ``hpcgnn model`` ranks algorithms and grids with them using only a file's
statistics.

Notation (CAGNET): ``n`` vertices, ``nnz`` nonzeros of ``Â`` (self loops included),
``f_0 .. f_L`` layer widths, ``P`` ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Problem:
    """Sizes that determine communication volume.

    Attributes
    ----------
    n
        Number of vertices.
    nnz
        Nonzeros of ``Â = norm(A + I)`` (edges plus ``n`` self loops).
    widths
        Layer widths ``[f_0, ..., f_L]``.
    itemsize
        Bytes per value (4 for float32, 8 for float64).
    row_offsets
        Vertex block offsets when the file's partition is used; ``None`` = even split.

    """

    n: int
    nnz: int
    widths: tuple[int, ...]
    itemsize: int = 4
    row_offsets: tuple[int, ...] | None = None


@dataclass
class Estimate:
    """Predicted communication of one epoch."""

    bytes_total: dict[str, float] = field(default_factory=dict)  # summed over ranks
    bytes_max_rank: dict[str, float] = field(default_factory=dict)  # busiest rank
    messages: int = 0  # latency terms on the critical path

    def add(self, category: str, total: float, max_rank: float, messages: int) -> None:
        """Accumulate one communication step."""
        self.bytes_total[category] = self.bytes_total.get(category, 0.0) + total
        self.bytes_max_rank[category] = self.bytes_max_rank.get(category, 0.0) + max_rank
        self.messages += messages

    def time(self, alpha: float, beta: float) -> float:
        """``alpha * messages + beta * bytes`` on the busiest rank (seconds)."""
        return alpha * self.messages + beta * sum(self.bytes_max_rank.values())


def allreduce_groups(est: Estimate, category: str, m: float, p: int, groups: int) -> None:
    """``groups`` independent all-reduces of ``m`` bytes, each over ``p`` ranks."""
    if p > 1:
        log = 2 * int(np.ceil(np.log2(p)))
        est.add(category, groups * 2 * m * (p - 1), 2 * m * (p - 1) / p, log)


def allreduce_exact(est: Estimate, category: str, m: int, p: int) -> None:
    """One all-reduce of ``m`` bytes over ``p`` ranks, as :class:`CommStats` records it.

    Like :func:`allreduce_groups` (``2 m (P - 1) / P`` per rank), but each rank's share
    rounded to whole bytes as :meth:`hpcgnn.comm.stats.CommStats.record` does, so the
    prediction is exact when ``P`` does not divide ``2 m``.
    """
    if p > 1:
        per_rank = float(round(2 * m * (p - 1) / p))
        est.add(category, p * per_rank, per_rank, 2 * int(np.ceil(np.log2(p))))
