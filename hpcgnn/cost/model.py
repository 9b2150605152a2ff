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

from hpcgnn.layout.blocks import even_offsets, stage_chunks
from hpcgnn.layout.order import aggregation_widths
from hpcgnn.layout.shapes import GridShape


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


def _allreduce(est: Estimate, category: str, m: float, p: int, groups: int) -> None:
    """``groups`` independent all-reduces of ``m`` bytes, each over ``p`` ranks."""
    if p > 1:
        est.add(category, groups * 2 * m * (p - 1), 2 * m * (p - 1) / p, 2 * int(np.ceil(np.log2(p))))


def predict_block_row(problem: Problem, shape: GridShape) -> Estimate:
    """CAGNET 1D (``c = 1``) and 1.5D on a ``(P/c) x c`` grid.

    Per layer with SpMM width ``f`` (forward, and backward unless the layer aggregates the
    input features, which need no gradient; see
    :func:`hpcgnn.layout.order.aggregation_widths`): in process column ``j`` the roots of the stages of
    chunk ``j`` broadcast their block rows, so each process row ``i`` receives
    ``sum_{k in chunk_j, k != i} n_k f`` words; summed over ranks this is
    ``(P/c - 1) n f``. With ``c > 1`` the row all-reduce of the ``n_i x f`` partial sums
    adds ``2 n_i f (c-1)/c`` per rank, ``2 n f (c - 1)`` in total. Weight gradients are
    all-reduced over the process column (``P/c`` ranks), once per process column.
    """
    q, c = (shape.dims[0], 1) if shape.kind == "1d" else shape.dims
    off = _offsets(problem, q)
    sizes = np.diff(off)
    chunks = stage_chunks(q, c)
    s = problem.itemsize
    est = Estimate()
    widths = problem.widths
    for f, backward in aggregation_widths(widths):
        for _ in range(2 if backward else 1):
            worst = 0.0
            for j in range(c):
                chunk = sizes[chunks[j] : chunks[j + 1]]
                worst = max(worst, float(chunk.sum()))
            est.add("dense_bcast", float((q - 1) * problem.n * f * s), worst * f * s,
                    int(np.diff(chunks).max()))
            if c > 1:
                est.add("allreduce", float(2 * problem.n * f * (c - 1) * s),
                        float(2 * sizes.max() * f * (c - 1) / c * s), 2 * int(np.ceil(np.log2(c))))
    for fin, fout in zip(widths[:-1], widths[1:], strict=True):
        _allreduce(est, "allreduce", fin * fout * s, q, c)
    return est


def predict_2d(problem: Problem, shape: GridShape) -> Estimate:
    """CAGNET 2D (SUMMA); see :mod:`hpcgnn.cost.summa`."""
    from hpcgnn.cost.summa import predict_2d as predict

    return predict(problem, shape)


def predict_3d(problem: Problem, shape: GridShape) -> Estimate:
    """CAGNET 3D (Split-3D); see :mod:`hpcgnn.cost.summa`."""
    from hpcgnn.cost.summa import predict_3d as predict

    return predict(problem, shape)


PREDICTORS = {
    "1d": predict_block_row,
    "1.5d": predict_block_row,
    "2d": predict_2d,
    "3d": predict_3d,
}


def predict(algo: str, problem: Problem, shape: GridShape) -> Estimate:
    """Predicted communication of one epoch of ``algo`` on ``shape``."""
    return PREDICTORS[algo](problem, shape)
