"""Reading this rank's normalised blocks of ``Â^T`` and ``Â`` from a graph file."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hpcgnn.graph.normalize import operator_block
from hpcgnn.io.memory import GraphReader
from hpcgnn.kinds import GCN, Layer


def normalized_rows(
    gf: GraphReader, lo: int, hi: int, transpose: bool, dtype: np.dtype | type,
    kind: Layer = GCN,
) -> sp.csr_matrix:
    """Rows ``[lo, hi)`` of ``Â^T`` (``transpose=True``) or of ``Â``, all ``n`` columns.

    A ``kind`` with the mean operator (GraphSAGE): of the mean ``D_in^-1 A^T`` or of
    ``A D_in^-1`` instead (:func:`~hpcgnn.graph.normalize.operator_block`). Reads the
    block's rows and the full degree vector of the other side (``O(n)``).
    """
    n = gf.meta.num_nodes
    block = gf.read_csr(lo, hi, transpose=transpose, weights=kind.operator.weighted)
    row_indptr = gf.read_indptr(lo, hi, transpose=transpose)
    col_indptr = gf.read_indptr(0, n, transpose=not transpose)
    return operator_block(block, lo, transpose, row_indptr, col_indptr, kind, dtype)
