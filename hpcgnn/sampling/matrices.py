"""The matrices of one sampling hop: selections, compressed row blocks and SpGEMM.

Shared by :mod:`hpcgnn.sampling.sage` and :mod:`hpcgnn.sampling.ladies`. A matrix is a
:class:`Csr` of NumPy arrays (the host) or of tensors on the sampling device; its
products are SciPy's on the host and :func:`esc_spgemm` on a device, which sums every
output entry in SciPy's order, so both give the same values bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hpcgnn.kernels.csr import gather_ranges
from hpcgnn.sampling.arrays import HOST, Array, ops
from hpcgnn.sampling.rows import RowStore
from hpcgnn.sampling.samplers import Sampler
from hpcgnn.sampling.setops import run_starts, unique_inverse


@dataclass
class StackedHop:
    """A hop of a stack of batches: batch ``b`` owns rows ``row_ptr[b]:row_ptr[b+1]``.

    ``indices`` are batch-local column positions into ``cols[col_ptr[b]:col_ptr[b+1]]``.
    """

    row_ptr: Array
    rows: Array
    col_ptr: Array
    cols: Array
    indptr: Array
    indices: Array
    values: Array


@dataclass
class Csr:
    """A CSR matrix of NumPy arrays or device tensors (int64 ``indptr`` and ``indices``)."""

    indptr: Array
    indices: Array
    data: Array
    shape: tuple[int, int]

    def squared(self) -> Csr:
        """The elementwise square ``A .* A`` (same pattern)."""
        return Csr(self.indptr, self.indices, self.data * self.data, self.shape)

    def row_slice(self, lo: int, hi: int) -> Csr:
        """Rows ``lo .. hi-1``."""
        a, b = self.indptr[lo], self.indptr[hi]
        return Csr(self.indptr[lo : hi + 1] - a, self.indices[a:b], self.data[a:b],
                   (hi - lo, self.shape[1]))

    def scipy(self) -> sp.csr_matrix:
        """The host matrix (NumPy arrays only)."""
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)

    @classmethod
    def of_scipy(cls, m: sp.csr_matrix) -> Csr:
        """A SciPy matrix's arrays (int64 indices)."""
        return cls(m.indptr.astype(np.int64, copy=False), m.indices.astype(np.int64, copy=False),
                   m.data, m.shape)


def selection(q_ptr: Array, cols: Array, num_cols: int) -> Csr:
    """0/1 matrix whose row ``i`` has ones at ``cols[q_ptr[i]:q_ptr[i+1]]`` (sorted per row)."""
    xp = ops(cols)
    nrows = len(q_ptr) - 1
    row = xp.rows_of(q_ptr)
    keys = xp.sort(row * num_cols + cols, stable=False)  # distinct: any sort
    return Csr(q_ptr, keys - row * num_cols, xp.ones(len(cols)),
               (nrows, num_cols))


def compressed_rows(ids: Array, store: RowStore, sampler: Sampler) -> tuple[Csr, Array]:
    """``S_U`` (the rows of ``S`` at the distinct vertices ``U`` of ``ids``), and ``ids`` in ``U``.

    ``Q S = Q_U S_U`` exactly when ``Q``'s columns are compressed to ``U``; each output
    row accumulates its ``Q`` row's entries in sorted vertex order whatever the bulk, so
    the values of a batch's rows do not depend on the other batches stacked with it.
    """
    uniq, inv = unique_inverse(ids)
    return store.matrix(uniq, sampler), inv


def spgemm(q: Csr, s: Csr) -> Csr:
    """Sparse x sparse product with sorted column indices (SciPy's, or :func:`esc_spgemm`)."""
    if ops(s.indices) is not HOST:
        return esc_spgemm(q, s)
    p = (q.scipy() @ s.scipy()).tocsr()
    p.sort_indices()
    return Csr.of_scipy(p)


def sum_duplicates(keys: Array, values: Array) -> tuple[Array, Array]:
    """The distinct ``keys`` (sorted) and the sums of their ``values``, in their given order.

    A stable sort keeps each key's values in the order given, and each sum is their
    sequential sum (:func:`hpcgnn.kernels.sampling.segment_cumsum`), on the host and on a
    device alike.
    """
    xp = ops(keys)
    order = xp.argsort(keys)
    keys, values = keys[order], values[order]
    first = run_starts(xp, keys)
    # the groups are numbered 0, 1, ... in order: their count needs no separate read
    group_ptr = xp.ptr(xp.bincount(xp.cumsum(first) - 1, 0))
    return keys[first], xp.segment_cumsum(group_ptr, values)[group_ptr[1:] - 1]


def esc_spgemm(q: Csr, s: Csr) -> Csr:
    """``Q S`` by expansion, sort and compression (the GPU SpGEMM), summed as SciPy sums.

    Every entry ``(i, k)`` of ``Q`` expands to the products ``Q_ik S_kj`` of row ``k`` of
    ``S``; a stable sort by ``(i, j)`` keeps each output entry's products in the order of
    ``Q``'s row, and each entry is their sequential sum
    (:func:`hpcgnn.kernels.sampling.segment_cumsum`): SciPy's ``csr_matmat`` order, so the
    values are SciPy's bit for bit. Zero sums are dropped, as SciPy drops them.
    """
    xp = ops(s.indices)
    nrows, ncols = q.shape[0], s.shape[1]
    q_row = xp.rows_of(q.indptr)
    ptr, entry = gather_ranges(s.indptr, xp.arange(len(s.indices)), q.indices)
    lens = xp.diff(ptr)
    key = xp.repeat(q_row, lens) * ncols + s.indices[entry]
    prod = xp.repeat(q.data, lens) * s.data[entry]
    key, sums = sum_duplicates(key, prod)
    keep = sums != 0.0
    key, sums = key[keep], sums[keep]
    indptr = xp.ptr(xp.bincount(key // ncols, nrows))
    return Csr(indptr, key % ncols, sums, (nrows, ncols))
