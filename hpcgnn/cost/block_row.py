"""Communication cost of CAGNET 1D (Algorithm 1) and 1.5D (Algorithm 2), exact."""

from __future__ import annotations

import numpy as np

from hpcgnn.cost.estimate import Estimate, Problem, allreduce_groups
from hpcgnn.layout.blocks import even_offsets, stage_chunks
from hpcgnn.layout.order import aggregation_widths
from hpcgnn.layout.shapes import GridShape


def _offsets(problem: Problem, parts: int) -> np.ndarray:
    if problem.row_offsets is not None and len(problem.row_offsets) == parts + 1:
        return np.asarray(problem.row_offsets, dtype=np.int64)
    return even_offsets(problem.n, parts)


def predict_block_row(problem: Problem, shape: GridShape) -> Estimate:
    """CAGNET 1D (``c = 1``) and 1.5D on a ``(P/c) x c`` grid.

    Per layer with SpMM width ``f`` (forward, and backward unless the layer aggregates the
    input features, which need no gradient; see
    :func:`hpcgnn.layout.order.aggregation_widths`): in process column ``j`` the roots of
    the stages of chunk ``j`` broadcast their block rows, so each process row ``i`` receives
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
    worst = float(np.diff(off[chunks]).max())  # rows broadcast in the busiest process column
    for f, backward in aggregation_widths(widths):
        for _ in range(2 if backward else 1):
            est.add("dense_bcast", float((q - 1) * problem.n * f * s), worst * f * s,
                    int(np.diff(chunks).max()))
            if c > 1:
                est.add("allreduce", float(2 * problem.n * f * (c - 1) * s),
                        float(2 * sizes.max() * f * (c - 1) / c * s), 2 * int(np.ceil(np.log2(c))))
    for fin, fout in zip(widths[:-1], widths[1:], strict=True):
        allreduce_groups(est, "allreduce", fin * fout * s, q, c)
    return est
