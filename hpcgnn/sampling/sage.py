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

from hpcgnn.rng import chain
from hpcgnn.sampling.its import sample_uniform_rows
from hpcgnn.sampling.matrices import StackedHop, compressed_rows, selection, spgemm
from hpcgnn.sampling.rows import RowStore
from hpcgnn.sampling.samplers import NODE_WISE


def next_frontier(
    fr_ptr: np.ndarray, fr_ids: np.ndarray, sel_batch: np.ndarray, sel_ids: np.ndarray,
    num_nodes: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per batch, the current frontier followed by the new sampled vertices (sorted).

    Returns ``(col_ptr, cols, sel_local)``: the stacked next frontier and the batch-local
    column position of every selection ``(sel_batch, sel_ids)``. One sort of the frontier
    and selection keys ``batch * n + vertex`` together (``2 key + is_selection``, so a
    vertex's frontier entry leads its group) gives the distinct sampled vertices, which
    of them are new, and each selection's column: linear work besides that sort.
    """
    nb = len(fr_ptr) - 1
    n = np.int64(num_nodes)
    nfr = len(fr_ids)
    fr_len = np.diff(fr_ptr)
    fr_batch = np.repeat(np.arange(nb, dtype=np.int64), fr_len)
    fr_local = np.arange(nfr, dtype=np.int64) - fr_ptr[fr_batch]
    keys = np.concatenate([(fr_batch * n + fr_ids) * 2, (sel_batch * n + sel_ids) * 2 + 1])
    order = np.argsort(keys)
    head = np.empty(len(keys), dtype=bool)  # first entry of each distinct vertex of a batch
    if len(keys):
        s = keys[order] >> 1
        head[0] = True
        np.not_equal(s[1:], s[:-1], out=head[1:])
    group = np.cumsum(head) - 1
    first = order[head]  # a frontier entry (< nfr) whenever the vertex is in the frontier
    new = first >= nfr
    new_key = keys[first[new]] >> 1
    new_batch = new_key // n
    new_count = np.bincount(new_batch, minlength=nb)
    col_ptr = np.concatenate([[0], np.cumsum(fr_len + new_count)]).astype(np.int64)
    new_first = np.concatenate([[0], np.cumsum(new_count)])[:-1]
    local = np.empty(len(first), dtype=np.int64)
    local[~new] = fr_local[first[~new]]
    local[new] = fr_len[new_batch] + np.arange(len(new_key), dtype=np.int64) - new_first[new_batch]
    cols = np.empty(int(col_ptr[-1]), dtype=np.int64)
    cols[col_ptr[fr_batch] + fr_local] = fr_ids
    cols[col_ptr[new_batch] + local[new]] = new_key % n
    entry_local = np.empty(len(keys), dtype=np.int64)
    entry_local[order] = local[group]
    return col_ptr, cols, entry_local[nfr:]


def sample_hop(
    fr_ptr: np.ndarray, fr_ids: np.ndarray, batch_ids: np.ndarray, hop: int, fanout: int,
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

    """
    n = store.num_nodes
    nrows = len(fr_ids)
    row_batch = np.repeat(np.arange(len(batch_ids), dtype=np.int64), np.diff(fr_ptr))
    s_u, inv = compressed_rows(fr_ids, store, NODE_WISE)
    q = selection(np.arange(nrows + 1, dtype=np.int64), inv, s_u.shape[0])
    p = spgemm(q, s_u)
    row_keys = chain(key, np.asarray(batch_ids, dtype=np.int64)[row_batch], hop, fr_ids)
    sel = sample_uniform_rows(p.indptr, fanout, row_keys)
    taken = np.concatenate([[0], np.cumsum(sel)])
    per_row = taken[p.indptr[1:]] - taken[p.indptr[:-1]]
    sel_rows = np.repeat(np.arange(nrows, dtype=np.int64), per_row)
    sel_ids = p.indices[sel].astype(np.int64)
    col_ptr, cols, sel_local = next_frontier(fr_ptr, fr_ids, row_batch[sel_rows], sel_ids, n)
    # each row's columns in ascending order: one sort of (row, column) keys
    width = np.int64(max(int(np.diff(col_ptr).max(initial=0)), 1))
    sel_local = np.sort(sel_rows * width + sel_local) - sel_rows * width
    indptr = np.concatenate([[0], np.cumsum(per_row)]).astype(np.int64)
    values = 1.0 / np.repeat(np.maximum(per_row, 1), per_row).astype(np.float64)
    return StackedHop(fr_ptr, fr_ids, col_ptr, cols, indptr, sel_local, values)
