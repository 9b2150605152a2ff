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
