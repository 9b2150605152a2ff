"""Communication cost of CAGNET 1D (Algorithm 1) and 1.5D (Algorithm 2), exact per rank."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from hpcgnn.cost.estimate import Estimate, Problem, allreduce_share
from hpcgnn.layout.blocks import stage_chunks, vertex_offsets
from hpcgnn.layout.shapes import GridShape
from hpcgnn.layout.trace import ATTENTION, exchanges

#: The category of 1.5D GAT's gradient reductions onto the blocks' owners
#: (:data:`hpcgnn.spmm.block_row.DENSE_REDUCE`).
DENSE_REDUCE = "dense_reduce"


def predict_block_row(problem: Problem, shape: GridShape) -> Estimate:
    """CAGNET 1D (``c = 1``) and 1.5D on a ``(P/c) x c`` grid, every rank exactly.

    Per layer with SpMM width ``f`` (forward, and backward unless the layer aggregates the
    input features, which need no gradient; see
    :func:`hpcgnn.layout.trace.aggregation_widths`; CAGNET's ``(Â^T H) W`` of
    ``--product-order paper`` runs its backward on ``G^l``, the layer's output width,
    :func:`~hpcgnn.layout.trace.row_exchange_widths`): in process column ``j`` the roots of
    the stages of chunk ``j`` broadcast their block rows, so P(i, j) receives
    ``sum_{k in chunk_j, k != i} n_k f`` words (a root does not receive its own block);
    summed over ranks this is ``(P/c - 1) n f``. With ``c > 1`` the row all-reduce of the
    ``n_i x f`` partial sums adds ``2 n_i f (c-1)/c`` per rank, ``2 n f (c - 1)`` in
    total. Weight gradients are all-reduced over the process column (``P/c`` ranks), one
    all-reduce per weight. ``bytes_max_rank`` is the largest of these per-rank sums.

    GAT (an attention kind) moves the rows of ``[z | s_src]`` of every layer, ``w = K f' +
    K`` columns: in 1D all-gathered (category ``dense_allgather``: ``(n - n_i) w`` words on
    rank ``i``, the words of the broadcasts) and their gradients reduce-scattered
    (``reduce_scatter``, the same); in 1.5D broadcast by stage as GCN's rows and their
    gradients reduced onto the owners (``dense_reduce``, the same words), plus row
    all-reduces of the block row's ``n_i`` rows: the score maximum and sum (``K`` each),
    the partial outputs (``K f'``), in the backward the score gradient (``K``) and the
    owners' gradients (``w``).
    """
    q, c = (shape.dims[0], 1) if shape.kind == "1d" else shape.dims
    off = vertex_offsets(problem.n, q, problem.row_offsets)  # as the model splits them
    sizes = np.diff(off)  # rows of block row i, held by process row i
    chunks = stage_chunks(q, c)
    chunk_of = np.searchsorted(chunks, np.arange(q), side="right") - 1  # chunk of block i
    own = np.where(chunk_of[:, None] == np.arange(c)[None, :], sizes[:, None], 0)
    bcast_rows = np.diff(off[chunks])[None, :] - own  # (q, c): rows P(i, j) receives
    s = problem.itemsize
    per: dict[tuple[str, str], np.ndarray] = defaultdict(lambda: np.zeros((q, c)))
    messages = 0
    for call in exchanges(problem.widths, problem.kind):
        f, backward, attention = call.width, call.backward, call.primitive == ATTENTION
        if attention and c == 1:
            per["dense_allgather", "col"] += bcast_rows * f * s
            per["reduce_scatter", "col"] += bcast_rows * f * s
            messages += 2
            continue
        if attention:
            heads = call.heads
            per["dense_bcast", "col"] += bcast_rows * f * s
            per[DENSE_REDUCE, "col"] += bcast_rows * f * s
            messages += 2 * int(np.diff(chunks).max())
            for width in (heads, heads, f - heads, heads, f):  # max, sum, out; d s_dst, rows
                per["allreduce", "row"] += allreduce_share(sizes * width * s, c)[:, None]
                messages += 2 * math.ceil(math.log2(c))
            continue
        for width in (f, call.row_backward) if backward else (f,):
            per["dense_bcast", "col"] += bcast_rows * width * s
            messages += int(np.diff(chunks).max())
            if c > 1:
                per["allreduce", "row"] += allreduce_share(sizes * width * s, c)[:, None]
                messages += 2 * math.ceil(math.log2(c))
    if q > 1:
        for size in problem.param_sizes:
            per["allreduce", "col"] += allreduce_share(size * s, q)
            messages += 2 * math.ceil(math.log2(q))
    return Estimate.from_per_rank(per, messages)


def replication_note(problem: Problem, shape: GridShape) -> str:
    """What to know about a 1.5D replication ``c`` on ``P/c x c`` ('' when nothing).

    CAGNET's Algorithm 2 gives each process column ``s = P / c^2`` stages, so it assumes
    ``c <= sqrt(P)``. With ``c > P/c`` the ``P/c`` stages fill only ``P/c`` of the ``c``
    process columns; the others idle until the row all-reduce, which moves
    ``2 n f (c-1) / P`` per rank, more than the broadcasts save. The transposed grid
    ``c x P/c`` broadcasts as much and all-reduces fewer rows, so the note names the
    factor by which the busiest rank's bytes exceed it (for ``1 x P``: 1D, about 2x).
    The run is still correct; it is a note, not an error.
    """
    if shape.kind != "1.5d":
        return ""
    q, c = shape.dims
    if c > q:
        mine = predict_block_row(problem, shape).bytes_max_rank
        alt = predict_block_row(problem, GridShape("1.5d", (c, q))).bytes_max_rank
        ratio = sum(mine.values()) / max(1.0, sum(alt.values()))
        return (
            f"c={c} > sqrt(P): {c - q} of {c} process columns have no stage; the busiest rank"
            f" moves {ratio:.2f}x the bytes of grid {c}x{q}"
        )
    if q % c:
        return f"c={c} does not divide P/c={q}; stage chunks differ by one"
    return ""
