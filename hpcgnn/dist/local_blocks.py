"""Reading this rank's normalised blocks of ``Â^T`` and ``Â`` from a graph file."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hpcgnn.graph.normalize import degrees_from_indptr, normalize_block
from hpcgnn.io.reader import GraphFile


def degrees(gf: GraphFile, lo: int, hi: int, transpose: bool) -> np.ndarray:
    """Degrees of ``A + I`` for vertices ``[lo, hi)``: out-degree (``A``) or in-degree (``A^T``)."""
    return degrees_from_indptr(gf.read_indptr(lo, hi, transpose=transpose))


def normalized_rows(
    gf: GraphFile, lo: int, hi: int, transpose: bool, dtype: np.dtype | type
) -> sp.csr_matrix:
    """Rows ``[lo, hi)`` of ``Â^T`` (``transpose=True``) or of ``Â``, all ``n`` columns.

    Reads the block's rows and the full degree vector of the other side (``O(n)``).
    """
    n = gf.meta.num_nodes
    block = gf.read_csr(lo, hi, transpose=transpose)
    row_deg = degrees(gf, lo, hi, transpose)
    col_deg = degrees(gf, 0, n, not transpose)
    return normalize_block(block, lo, row_deg, col_deg, dtype)


def split_columns(a: sp.csr_matrix, offsets: np.ndarray) -> list[sp.csr_matrix]:
    """Split a CSR matrix into column blocks ``[offsets[k], offsets[k+1])`` (local column ids).

    Linear in ``nnz`` plus ``blocks x rows``: nonzeros are bucketed by block with a stable
    sort, which keeps them in row order (and sorted within rows) inside every block.
    """
    rows = a.shape[0]
    offsets = np.asarray(offsets, dtype=np.int64)
    if len(offsets) == 2:
        return [sp.csr_matrix((a.data, a.indices - offsets[0], a.indptr), shape=(rows, offsets[1] - offsets[0]))]
    block_of = np.searchsorted(offsets, a.indices, side="right") - 1
    order = np.argsort(block_of, kind="stable")
    bounds = np.searchsorted(block_of[order], np.arange(len(offsets)))
    row_of = np.repeat(np.arange(rows, dtype=np.int64), np.diff(a.indptr))
    out = []
    for k in range(len(offsets) - 1):
        sel = order[bounds[k] : bounds[k + 1]]
        counts = np.bincount(row_of[sel], minlength=rows)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        width = int(offsets[k + 1] - offsets[k])
        out.append(sp.csr_matrix((a.data[sel], a.indices[sel] - offsets[k], indptr), shape=(rows, width)))
    return out
