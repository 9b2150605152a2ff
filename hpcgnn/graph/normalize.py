"""GCN normalisation of the adjacency matrix, computable block by block.

We use ``Â = D_r^{-1/2} (A + I) D_c^{-1/2}`` with ``D_r`` the row sums (out-degree + 1)
and ``D_c`` the column sums (in-degree + 1) of ``A + I``. For an undirected graph both
equal the usual ``D^{-1/2} (A + I) D^{-1/2}``. Forward propagation multiplies by ``Â^T``
(aggregating over in-neighbours), backward by ``Â``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hpcgnn.io.memory import GraphReader
from hpcgnn.kinds import GCN, Layer


def degrees_from_indptr(indptr: np.ndarray) -> np.ndarray:
    """Degrees of ``A + I`` for the rows described by a CSR ``indptr`` slice."""
    return np.diff(indptr).astype(np.float64) + 1.0


def normalize_block(
    block: sp.csr_matrix,
    row_offset: int,
    row_deg: np.ndarray,
    col_deg: np.ndarray,
    dtype: np.dtype | type = np.float32,
) -> sp.csr_matrix:
    """Normalise rows ``[row_offset, row_offset + block.shape[0])`` of a matrix like ``A``.

    Parameters
    ----------
    block
        Unweighted CSR rows of ``A`` (or of ``A^T``), all ``n`` columns, no self loops.
    row_offset
        Global id of the block's first row (its diagonal entries get the self loop).
    row_deg
        ``A + I`` degrees of the block's rows (length ``block.shape[0]``) as seen from the
        row side of this matrix: out-degree + 1 for ``A``, in-degree + 1 for ``A^T``.
    col_deg
        The other-side degrees of *all* ``n`` columns.
    dtype
        Value dtype of the result.

    Returns
    -------
    scipy.sparse.csr_matrix
        ``diag(row_deg)^{-1/2} (block + I_block) diag(col_deg)^{-1/2}``, columns sorted.
    """
    rows = block.shape[0]
    eye = sp.csr_matrix(
        (
            np.ones(rows, dtype=np.float32),
            np.arange(row_offset, row_offset + rows),
            np.arange(rows + 1),
        ),
        shape=block.shape,
    )
    a = (block + eye).tocsr()  # sorted, duplicate-free output for canonical inputs
    a.sum_duplicates()  # no-op when canonical; otherwise makes it so
    r = 1.0 / np.sqrt(np.asarray(row_deg, dtype=np.float64))
    c = 1.0 / np.sqrt(np.asarray(col_deg, dtype=np.float64))
    data = np.repeat(r.astype(dtype), np.diff(a.indptr))
    data *= c.astype(dtype)[a.indices]
    a.data = data
    return a


def sum_block(
    block: sp.csr_matrix, row_offset: int, self_weight: float,
    dtype: np.dtype | type = np.float32, replace_diagonal: bool = False,
) -> sp.csr_matrix:
    """``block + self_weight I_block``, unnormalised: GIN's ``A^T + (1 + eps) I`` (and ``A + ..``).

    Every edge counts 1 (a repeated edge as often as it appears, as PyG's sum over
    ``edge_index``); the block's diagonal entries (global ids ``row_offset + r``) get
    ``self_weight``. Columns sorted, duplicates summed. ``replace_diagonal``: the block's
    own diagonal entries are an ``+ I`` already (LADIES' ``S``): they count
    ``self_weight`` alone.
    """
    rows = block.shape[0]
    coo = block.tocoo()
    diag = np.arange(rows)
    ones = np.ones(coo.nnz)
    if replace_diagonal:
        ones[coo.col == coo.row + row_offset] = 0.0
    a = sp.csr_matrix(  # built from triplets: an explicit 0 diagonal (eps = -1) is kept
        (np.concatenate([ones, np.full(rows, self_weight)]),
         (np.concatenate([coo.row, diag]), np.concatenate([coo.col, diag + row_offset]))),
        shape=block.shape,
    )
    a.sum_duplicates()
    a.sort_indices()
    a.data = a.data.astype(dtype)
    return a


def _canonical(block: sp.csr_matrix) -> sp.csr_matrix:
    """A copy of ``block`` as CSR with its duplicates summed and its columns sorted."""
    a = block.tocsr(copy=True)
    a.sum_duplicates()
    a.sort_indices()
    return a


def _inverse(deg: np.ndarray | None, size: int) -> np.ndarray:
    """``1 / deg`` with ``1 / 0`` read as 0 (``None``: ones of length ``size``)."""
    if deg is None:
        return np.ones(size)
    deg = np.asarray(deg, dtype=np.float64)
    return np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)


def mean_block(
    block: sp.csr_matrix,
    row_deg: np.ndarray | None,
    col_deg: np.ndarray | None,
    dtype: np.dtype | type = np.float32,
) -> sp.csr_matrix:
    """``diag(row_deg)^-1 block diag(col_deg)^-1`` without self loops (``1/0`` read as 0).

    The GraphSAGE mean ``D_in^-1 A^T`` is a block of ``A^T`` with ``row_deg`` its rows'
    in-degrees; its adjoint ``A D_in^-1`` a block of ``A`` with ``col_deg`` every vertex's
    in-degree (``None``: no scaling on that side). A vertex without in-neighbours has an
    empty row, so its mean is 0.
    """
    a = _canonical(block)
    r = _inverse(row_deg, a.shape[0])
    c = _inverse(col_deg, a.shape[1])
    a.data = (np.repeat(r, np.diff(a.indptr)) * c[a.indices]).astype(dtype)
    return a


def weighted_block(block: sp.csr_matrix, dtype: np.dtype | type = np.float32) -> sp.csr_matrix:
    """The weighted operator's rows: ``block`` with its values (the edge weights) as they are.

    Unnormalised and without self loops (GraphConv's ``A_w^T``); columns sorted, duplicates
    summed, values of ``dtype``.
    """
    a = _canonical(block)
    a.data = a.data.astype(dtype, copy=False)
    return a


def operator_block(
    block: sp.csr_matrix,
    row_offset: int,
    transpose: bool,
    row_indptr: np.ndarray,
    col_indptr: np.ndarray,
    kind: Layer,
    dtype: np.dtype | type = np.float32,
) -> sp.csr_matrix:
    """A block of rows of the layers' operator: ``Â^T`` / ``Â`` (gcn), mean (sage) or sum (gin).

    Parameters
    ----------
    block
        CSR rows ``[row_offset, ..)`` of ``A^T`` (``transpose``) or of ``A``: unweighted,
        or with the file's per-edge weights for the weighted operator
        (``read_csr(..., weights=True)``).
    row_offset
        Global id of the block's first row.
    transpose
        Whether ``block`` holds rows of ``A^T`` (the forward operator) or of ``A``.
    row_indptr
        CSR ``indptr`` of the block's rows in the file (the row side's degrees).
    col_indptr
        CSR ``indptr`` of all ``n`` rows of the other matrix (the column side's degrees).
    kind
        The layer, whose :attr:`~hpcgnn.kinds.Layer.operator` says which:
        :func:`normalize_block`, or the mean ``D_in^-1 A^T`` and its adjoint ``A D_in^-1``
        (:func:`mean_block`), or the sum ``A^T + s I`` and its adjoint (:func:`sum_block`;
        GIN's ``s = 1 + eps``, a pattern's ``s = 1``), or the weighted ``A_w^T`` and ``A_w``
        (the block's own values, :func:`weighted_block`).
    dtype
        Value dtype of the result.
    """
    op = kind.operator
    if op.weighted:
        return weighted_block(block, dtype)
    if op.name in ("sum", "pattern"):  # the pattern: the ones of A^T + I
        return sum_block(block, row_offset, op.self_weight, dtype)
    if op.name == "mean":
        if transpose:
            return mean_block(block, np.diff(row_indptr), None, dtype)
        return mean_block(block, None, np.diff(col_indptr), dtype)
    row_deg = degrees_from_indptr(row_indptr)
    col_deg = degrees_from_indptr(col_indptr)
    return normalize_block(block, row_offset, row_deg, col_deg, dtype)


def load_normalized(
    gf: GraphReader, dtype: np.dtype | type, adjoint: bool = True, kind: Layer = GCN
) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
    """Read the whole graph and return ``(Â^T, Â)`` as SciPy CSR matrices.

    ``adjoint=False`` (a forward pass only) skips ``Â`` and returns ``(Â^T, None)``;
    a kind with the mean operator (GraphSAGE) returns the mean ``D_in^-1 A^T`` and its
    adjoint instead (:func:`~hpcgnn.graph.normalize.operator_block`).
    """
    n = gf.meta.num_nodes
    weights = kind.operator.weighted
    a = gf.read_csr(0, n, weights=weights)
    a_t = gf.read_csr(0, n, transpose=True, weights=weights) if gf.meta.directed else a
    norm_t = operator_block(a_t, 0, True, a_t.indptr, a.indptr, kind, dtype)
    norm = operator_block(a, 0, False, a.indptr, a_t.indptr, kind, dtype) if adjoint else None
    return norm_t, norm
