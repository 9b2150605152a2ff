"""GraphSAGE node-wise sampling of one hop, for a stack of minibatches at once.

For the frontier rows of all batches stacked vertically (row ``r`` = vertex ``v`` of
batch ``b``):

1. ``Q`` has one nonzero per row, ``Q[r, v] = 1``, and ``P = Q S`` (SpGEMM; ``S = A^T``)
   holds row ``v`` of ``A^T``: ``v``'s in-neighbours, each with weight 1 (row
   normalisation makes them uniform);
2. ITS without replacement keeps ``min(fanout, deg(v))`` of them per row (uniform
   weights: the prefix sums are implicit, see :func:`hpcgnn.sampling.its.
   sample_uniform_rows`);
3. extraction drops empty columns per batch: the batch's next frontier is its current
   frontier followed by the newly sampled vertices (sorted by id), so a vertex's own
   features stay available to the next layer (GraphSAGE's self term) and the hop matrix
   is ``len(frontier) x len(next frontier)``.

Random numbers of row ``r`` are keyed by ``(seed, epoch, batch id, hop, v)``.
"""

from __future__ import annotations

import numpy as np

from hpcgnn.sampling.arrays import Array, ops
from hpcgnn.sampling.its import sample_uniform_rows
from hpcgnn.sampling.matrices import StackedHop, compressed_rows, selection, spgemm
from hpcgnn.sampling.rows import RowStore
from hpcgnn.sampling.samplers import NODE_WISE
from hpcgnn.sampling.setops import run_starts


def next_frontier(
    fr_ptr: Array, fr_ids: Array, sel_batch: Array, sel_ids: Array, num_nodes: int,
) -> tuple[Array, Array, Array]:
    """Per batch, the current frontier followed by the new sampled vertices (sorted).

    Returns ``(col_ptr, cols, sel_local)``: the stacked next frontier and the batch-local
    column position of every selection ``(sel_batch, sel_ids)``. One sort of the frontier
    and selection keys ``batch * n + vertex`` together (``2 key + is_selection``, so a
    vertex's frontier entry leads its group) gives the distinct sampled vertices, which
    of them are new, and each selection's column: linear work besides that sort.
    """
    xp = ops(fr_ids)
    nb = len(fr_ptr) - 1
    n = int(num_nodes)
    nfr = len(fr_ids)
    fr_len = xp.diff(fr_ptr)
    fr_batch = xp.owners(fr_len)
    fr_local = xp.arange(nfr) - fr_ptr[fr_batch]
    keys = xp.concat([(fr_batch * n + fr_ids) * 2, (sel_batch * n + sel_ids) * 2 + 1])
    order = xp.argsort(keys, stable=False)  # equal keys are one vertex: any order will do
    head = run_starts(xp, keys[order] >> 1)  # first entry of each vertex of a batch
    group = xp.cumsum(head) - 1
    first = order[head]  # a frontier entry (< nfr) whenever the vertex is in the frontier
    new = first >= nfr
    new_key = keys[first[new]] >> 1
    new_batch = new_key // n
    new_count = xp.bincount(new_batch, nb)
    col_ptr = xp.ptr(fr_len + new_count)
    new_first = xp.cumsum(new_count) - new_count
    local = xp.zeros(len(first))
    local[~new] = fr_local[first[~new]]
    local[new] = fr_len[new_batch] + xp.arange(len(new_key)) - new_first[new_batch]
    cols = xp.zeros(int(col_ptr[-1]))
    cols[col_ptr[fr_batch] + fr_local] = fr_ids
    cols[col_ptr[new_batch] + local[new]] = new_key % n
    entry_local = xp.zeros(len(keys))
    entry_local[order] = local[group]
    return col_ptr, cols, entry_local[nfr:]


def sample_hop(
    fr_ptr: Array, fr_ids: Array, batch_ids: Array, hop: int, fanout: int,
    store: RowStore, key: np.uint64,
) -> StackedHop:
    """Sample hop ``hop`` for every batch of the stack (see the module docstring).

    Parameters
    ----------
    fr_ptr, fr_ids
        Stacked frontiers: batch ``i`` (global id ``batch_ids[i]``) has rows
        ``fr_ids[fr_ptr[i]:fr_ptr[i+1]]`` (distinct vertices).
    batch_ids
        Global batch id of each stacked batch (keys its random numbers).
    hop
        Hop index (0 = the seeds' neighbours).
    fanout
        Neighbours per row.
    store
        Holds every frontier row of ``S = A^T``.
    key
        Epoch key of the sampler (:func:`hpcgnn.sampling.shuffle.epoch_key`).

    The arrays are NumPy arrays, or tensors on the store's device; so is the result.
    """
    xp = ops(fr_ids)
    n = store.num_nodes
    nrows = len(fr_ids)
    row_batch = xp.rows_of(fr_ptr)
    s_u, inv = compressed_rows(fr_ids, store, NODE_WISE)
    q = selection(xp.arange(nrows + 1), inv, s_u.shape[0])
    p = spgemm(q, s_u)
    row_keys = xp.row_keys(key, batch_ids[row_batch], hop, fr_ids)
    sel = sample_uniform_rows(p.indptr, fanout, row_keys)
    taken = xp.ptr(sel)
    per_row = taken[p.indptr[1:]] - taken[p.indptr[:-1]]
    sel_rows = xp.owners(per_row)
    sel_ids = p.indices[sel]
    col_ptr, cols, sel_local = next_frontier(fr_ptr, fr_ids, row_batch[sel_rows], sel_ids, n)
    # each row's columns in ascending order: one sort of (row, column) keys
    width = max(int(xp.diff(col_ptr).max()) if nrows else 0, 1)
    sel_local = xp.sort(sel_rows * width + sel_local, stable=False) - sel_rows * width
    values = 1.0 / xp.float64(xp.repeat(xp.maximum(per_row, 1), per_row))
    return StackedHop(fr_ptr, fr_ids, col_ptr, cols, xp.ptr(per_row), sel_local, values)
