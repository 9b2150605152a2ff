"""LADIES layer-wise sampling of one hop, for a stack of minibatches at once.

With ``S = D^{-1} (A^T + I)`` (see :mod:`hpcgnn.sampling.rows`) and the batches' current
vertex sets ``F_b`` (the seeds at hop 0):

1. ``Q`` has one row per batch with ones at ``F_b``; ``P = Q (S .* S)`` (SpGEMM) gives
   ``P[b, j] = sum_{i in F_b} S_ij^2``, the squared column norms of ``S[F_b, :]``, which
   normalised per row is LADIES' layer-dependent importance distribution ``p_b``;
2. ITS without replacement draws ``min(s, |supp p_b|)`` distinct vertices per row;
3. the next vertex set is ``after_b = sorted(sampled_b | seeds_b)`` (LADIES keeps the
   output vertices in every layer; with ``self_rows`` ``sorted(sampled_b | F_b)``, every
   row's own vertex: GIN's and GAT's self term), then row extraction ``R S`` (``R`` stacks one
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

from hpcgnn.sampling.arrays import Array, ops
from hpcgnn.sampling.its import row_totals, sample_rows, segment_cumsum
from hpcgnn.sampling.matrices import Csr, StackedHop, compressed_rows, selection, spgemm
from hpcgnn.sampling.rows import RowStore
from hpcgnn.sampling.samplers import LAYER_WISE
from hpcgnn.sampling.setops import contains, unique


def _row_sums(m: Csr) -> Array:
    """Each row's sum (exact per row), repeated over the row's entries."""
    xp = ops(m.data)
    totals = row_totals(m.indptr, segment_cumsum(m.indptr, m.data))
    return totals[xp.rows_of(m.indptr)]


def probabilities(p: Csr) -> Array:
    """Each entry of ``P`` divided by its row sum (exact per-row sums)."""
    return p.data / _row_sums(p)


def normalize_rows(m: Csr) -> Array:
    """Values of ``m`` divided by their row sums (rows of zeros stay zero)."""
    return ops(m.data).ratio(m.data, _row_sums(m))


def sample_hop(
    fr_ptr: Array, fr_ids: Array, seed_ptr: Array, seed_ids: Array,
    batch_ids: Array, hop: int, size: int, store: RowStore, key: np.uint64,
    self_rows: bool = False, p: Csr | None = None,
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
    self_rows
        Keep every vertex of ``F_b`` in ``after_b`` too, not only the seeds (GIN's and
        GAT's self term; :attr:`hpcgnn.sampling.spec.SamplerSpec.self_rows`).
    p
        ``P = Q (S .* S)`` of the stack if it is already known (the paper's reduction of
        partial products, :meth:`hpcgnn.sampling.spgemm_1p5d.SparsityAwareRows.
        distributions`); else computed here from ``store``.

    The arrays are NumPy arrays, or tensors on the store's device; so is the result.
    """
    xp = ops(fr_ids)
    n = int(store.num_nodes)
    nb = len(batch_ids)
    nfr = len(fr_ids)
    s_u, inv = compressed_rows(fr_ids, store, LAYER_WISE)
    if p is None:
        p = spgemm(selection(fr_ptr, inv, s_u.shape[0]), s_u.squared())
    sel = sample_rows(p.indptr, p.data, size, xp.row_keys(key, batch_ids, hop, None))
    prob = probabilities(p)
    p_key = xp.rows_of(p.indptr) * n + p.indices
    kept_ptr, kept_ids = (fr_ptr, fr_ids) if self_rows else (seed_ptr, seed_ids)
    after_key = unique(xp.concat([p_key[sel], xp.rows_of(kept_ptr) * n + kept_ids]))
    after_batch = after_key // n
    col_ptr = xp.ptr(xp.bincount(after_batch, nb))
    p_after = prob[xp.searchsorted(p_key, after_key)]
    # row extraction: R S, one selection row per vertex of every F_b
    x = spgemm(selection(xp.arange(nfr + 1), inv, s_u.shape[0]), s_u)
    # column extraction: block-diagonal selection, compressed to its nonzero rows
    row_batch = xp.rows_of(fr_ptr)
    x_row = xp.rows_of(x.indptr)
    x_key = row_batch[x_row] * n + x.indices
    hit = contains(after_key, x_key)
    pos = xp.searchsorted(after_key, x_key)
    x_ptr = xp.ptr(xp.bincount(x_row[hit], nfr))
    m = len(after_key)
    xc = Csr(x_ptr, pos[hit], x.data[hit], (nfr, m))
    c = Csr(xp.arange(m + 1), xp.arange(m), 1.0 / p_after, (m, m))
    y = spgemm(xc, c)
    y_row = xp.rows_of(y.indptr)
    local = y.indices - col_ptr[row_batch[y_row]]
    return StackedHop(fr_ptr, fr_ids, col_ptr, after_key % n, y.indptr, local, normalize_rows(y))
