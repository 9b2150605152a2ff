"""LADIES layer-wise sampling of one hop, for a stack of minibatches at once.

With ``S = D^{-1} (A^T + I)`` (see :mod:`hpcgnn.sampling.rows`) and the batches' current
vertex sets ``F_b`` (the seeds at hop 0):

1. ``Q`` has one row per batch with ones at ``F_b``; ``P = Q (S .* S)`` (SpGEMM) gives
   ``P[b, j] = sum_{i in F_b} S_ij^2``, the squared column norms of ``S[F_b, :]``, which
   normalised per row is LADIES' layer-dependent importance distribution ``p_b``;
2. ITS without replacement draws ``min(s, |supp p_b|)`` distinct vertices per row;
3. the next vertex set is ``after_b = sorted(sampled_b | seeds_b)`` (LADIES keeps the
   output vertices in every layer), then row extraction ``R S`` (``R`` stacks one
   selection row per vertex of every ``F_b``) and column extraction by the block-
   diagonal selection ``diag(C_1, ..., C_K)``, ``C_b[j, col(j)] = 1 / p_b(j)`` for ``j``
   in ``after_b``. The ``K n`` rows of the block-diagonal matrix are compressed to its
   nonzero rows (keys ``b n + j``), so it costs ``O(sum |after_b|)`` memory, not
   ``O(K n)``;
4. each row of the extracted block is normalised to sum 1 (LADIES'
   ``row_normalize(S[F, after] / p[after])``).

Random numbers of batch ``b`` are keyed by ``(seed, epoch, batch id, hop)``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hpcgnn.rng import chain
from hpcgnn.sampling.its import row_totals, sample_rows, segment_cumsum
from hpcgnn.sampling.matrices import StackedHop, compressed_rows, selection, spgemm
from hpcgnn.sampling.rows import RowStore
from hpcgnn.sampling.samplers import LAYER_WISE
from hpcgnn.sampling.setops import contains, unique


def probabilities(p: sp.csr_matrix) -> np.ndarray:
    """Each entry of ``P`` divided by its row sum (exact per-row sums)."""
    totals = row_totals(p.indptr, segment_cumsum(p.indptr, p.data))
    entry_row = np.repeat(np.arange(p.shape[0], dtype=np.int64), np.diff(p.indptr))
    return p.data / totals[entry_row]


def normalize_rows(m: sp.csr_matrix) -> np.ndarray:
    """Values of ``m`` divided by their row sums (rows of zeros stay zero)."""
    totals = row_totals(m.indptr, segment_cumsum(m.indptr, m.data))
    entry_row = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
    denom = totals[entry_row]
    return np.divide(m.data, denom, out=np.zeros_like(m.data), where=denom > 0)


def sample_hop(
    fr_ptr: np.ndarray, fr_ids: np.ndarray, seed_ptr: np.ndarray, seed_ids: np.ndarray,
    batch_ids: np.ndarray, hop: int, size: int, store: RowStore, key: np.uint64,
) -> StackedHop:
    """Sample hop ``hop`` of every batch of the stack (see the module docstring).

    Parameters
    ----------
    fr_ptr, fr_ids
        Stacked current vertex sets ``F_b`` (distinct per batch).
    seed_ptr, seed_ids
        Stacked seed vertices of each batch (kept in every ``after_b``).
    batch_ids
        Global batch id of each stacked batch.
    hop
        Hop index (0 = sampling from the seeds).
    size
        Vertices sampled per batch and hop (LADIES' ``s``).
    store
        Holds every row of ``S`` in ``F_b``.
    key
        Epoch key of the sampler.

    """
    n = np.int64(store.num_nodes)
    nb = len(batch_ids)
    nfr = len(fr_ids)
    s_u, inv = compressed_rows(fr_ids, store, LAYER_WISE)
    p = spgemm(selection(fr_ptr, inv, s_u.shape[0]), s_u.multiply(s_u).tocsr())
    sel = sample_rows(p.indptr, p.data, size, chain(key, np.asarray(batch_ids, np.int64), hop))
    prob = probabilities(p)
    p_key = np.repeat(np.arange(nb, dtype=np.int64), np.diff(p.indptr)) * n + p.indices
    seed_batch = np.repeat(np.arange(nb, dtype=np.int64), np.diff(seed_ptr))
    after_key = unique(np.concatenate([p_key[sel], seed_batch * n + seed_ids]))
    after_batch = after_key // n
    col_ptr = np.concatenate([[0], np.cumsum(np.bincount(after_batch, minlength=nb))])
    p_after = prob[np.searchsorted(p_key, after_key)]
    # row extraction: R S, one selection row per vertex of every F_b
    x = spgemm(selection(np.arange(nfr + 1, dtype=np.int64), inv, s_u.shape[0]), s_u)
    # column extraction: block-diagonal selection, compressed to its nonzero rows
    row_batch = np.repeat(np.arange(nb, dtype=np.int64), np.diff(fr_ptr))
    x_row = np.repeat(np.arange(nfr, dtype=np.int64), np.diff(x.indptr))
    x_key = row_batch[x_row] * n + x.indices
    hit = contains(after_key, x_key)
    pos = np.searchsorted(after_key, x_key)
    x_ptr = np.concatenate([[0], np.cumsum(np.bincount(x_row[hit], minlength=nfr))])
    xc = sp.csr_matrix((x.data[hit], pos[hit], x_ptr), shape=(nfr, len(after_key)))
    m = len(after_key)
    c = sp.csr_matrix((1.0 / p_after, np.arange(m), np.arange(m + 1)), shape=(m, m))
    y = spgemm(xc, c)
    y_row = np.repeat(np.arange(nfr, dtype=np.int64), np.diff(y.indptr))
    local = y.indices.astype(np.int64) - col_ptr[row_batch[y_row]]
    return StackedHop(
        fr_ptr, fr_ids, col_ptr.astype(np.int64), after_key % n, y.indptr.astype(np.int64),
        local, normalize_rows(y),
    )
