"""Communication cost models of the distributed SpMM algorithms, in code.

Each ``predict_*`` function returns, for one training epoch (forward with dropout,
backward, gradient all-reduce; no evaluation pass), the bytes received per category
*summed over all ranks*, in exactly the accounting of :class:`hpcgnn.comm.stats.CommStats`,
together with the largest per-rank volume and the number of messages on the critical
path. Training compares these predictions with what it measured; ``hpcgnn model`` ranks
algorithms and grids with them using only a file's statistics.

Notation (CAGNET): ``n`` vertices, ``nnz`` nonzeros of ``Â`` (self loops included),
``f_0 .. f_L`` layer widths, ``P`` ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpcgnn.dist.blocks import even_offsets
from hpcgnn.grid.shapes import GridShape


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


def _offsets(problem: Problem, parts: int) -> np.ndarray:
    if problem.row_offsets is not None and len(problem.row_offsets) == parts + 1:
        return np.asarray(problem.row_offsets, dtype=np.int64)
    return even_offsets(problem.n, parts)


def _grad_allreduce(est: Estimate, problem: Problem, p: int) -> None:
    """All-reduce of every weight gradient over ``p`` ranks (replicated weights)."""
    w = problem.widths
    for fin, fout in zip(w[:-1], w[1:], strict=True):
        m = fin * fout * problem.itemsize
        est.add("allreduce", 2 * m * (p - 1), 2 * m * (p - 1) / p, 2 * int(np.ceil(np.log2(max(p, 1)))))


def predict_1d(problem: Problem, shape: GridShape) -> Estimate:
    """CAGNET 1D: one dense broadcast stage per rank, forward and backward.

    Forward layer ``l``: every rank receives all blocks ``H_j`` but its own,
    ``(n - n_i) f_{l-1}`` words. Backward: the same for ``G`` on layers ``2..L``
    (the input features need no gradient). Then the weight gradients are all-reduced.
    """
    p = shape.size
    off = _offsets(problem, p)
    sizes = np.diff(off)
    est = Estimate()
    s = problem.itemsize
    for layer, f in enumerate(problem.widths[:-1]):
        passes = 1 if layer == 0 else 2  # forward; backward too except for the input layer
        for _ in range(passes):
            est.add("dense_bcast", float((problem.n * p - problem.n) * f * s),
                    float((problem.n - sizes.min()) * f * s), p)
    _grad_allreduce(est, problem, p)
    return est


PREDICTORS = {"1d": predict_1d}


def predict(algo: str, problem: Problem, shape: GridShape) -> Estimate:
    """Predicted communication of one epoch of ``algo`` on ``shape``."""
    return PREDICTORS[algo](problem, shape)
