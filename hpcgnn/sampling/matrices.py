"""The matrices of one sampling hop: selections, compressed row blocks and SpGEMM.

Shared by :mod:`hpcgnn.sampling.sage` and :mod:`hpcgnn.sampling.ladies`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hpcgnn.sampling.rows import RowStore
from hpcgnn.sampling.samplers import Sampler
from hpcgnn.sampling.setops import unique_inverse


@dataclass
class StackedHop:
    """A hop of a stack of batches: batch ``b`` owns rows ``row_ptr[b]:row_ptr[b+1]``.

    ``indices`` are batch-local column positions into ``cols[col_ptr[b]:col_ptr[b+1]]``.
    """

    row_ptr: np.ndarray
    rows: np.ndarray
    col_ptr: np.ndarray
    cols: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray


def selection(q_ptr: np.ndarray, cols: np.ndarray, num_cols: int) -> sp.csr_matrix:
    """0/1 matrix whose row ``i`` has ones at ``cols[q_ptr[i]:q_ptr[i+1]]`` (sorted per row)."""
    nrows = len(q_ptr) - 1
    q = sp.csr_matrix(
        (np.ones(len(cols)), np.asarray(cols, dtype=np.int64), np.asarray(q_ptr, dtype=np.int64)),
        shape=(nrows, num_cols),
    )
    q.sort_indices()
    return q


def compressed_rows(
    ids: np.ndarray, store: RowStore, sampler: Sampler
) -> tuple[sp.csr_matrix, np.ndarray]:
    """``S_U`` (the rows of ``S`` at the distinct vertices ``U`` of ``ids``), and ``ids`` in ``U``.

    ``Q S = Q_U S_U`` exactly when ``Q``'s columns are compressed to ``U``; each output
    row accumulates its ``Q`` row's entries in sorted vertex order whatever the bulk, so
    the values of a batch's rows do not depend on the other batches stacked with it.
    """
    uniq, inv = unique_inverse(ids)
    return store.matrix(uniq, sampler), inv


def spgemm(q: sp.csr_matrix, s: sp.csr_matrix) -> sp.csr_matrix:
    """Sparse x sparse product with sorted column indices."""
    p = (q @ s).tocsr()
    p.sort_indices()
    return p
