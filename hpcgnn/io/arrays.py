"""A graph given as arrays, checked and made canonical as ``hpcgnn prepare`` stores one.

What :meth:`hpcgnn.io.memory.MemoryGraph.from_arrays` and the in-memory converters of
``hpcgnn prepare`` (``pyg``, ``npz``) share, so that a graph trained from memory is the
graph a file of the same arrays holds:

- the adjacency, from an edge index ``(2, E)`` (PyG's ``edge_index``: an edge
  ``src -> dst`` per column) or from an ``n x n`` sparse matrix: self loops dropped (the
  GCN normalisation implies them), repeated edges stored once with their weights summed;
  an undirected graph is symmetric: a symmetric input (PyG stores both directions) is
  taken as it is, an unweighted one that is not gets the union of both directions, and
  weights that are not symmetric are refused (``directed`` keeps directions);
- features: ``n x F`` numbers, finite, stored as float32, dense or CSR;
- labels: one class id per vertex, negative (or NaN) meaning unlabelled; or multi-label
  targets, an ``n x C`` matrix (``C >= 2``) of 0 and 1 (PyG's 2-D ``Data.y`` of PPI, Yelp
  or ogbn-proteins), stored uint8, every vertex labelled;
- masks: boolean, one entry per vertex, disjoint, only on labelled vertices.

Every refusal is an :class:`~hpcgnn.errors.InputError` naming the input.
"""

from __future__ import annotations

import os
from typing import Any, TypeAlias

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import format as fmt
from hpcgnn.io.validate import mask_problem

#: Dense or CSR features.
Features: TypeAlias = np.ndarray | sp.csr_matrix


def class_ids(values: np.ndarray, source: str | os.PathLike) -> np.ndarray:
    """Return numeric labels as int64 class ids, negative or NaN becoming ``-1`` (unlabelled).

    Raises :class:`InputError` naming ``source`` if a known label is not an integer, or
    beyond the largest class id a graph file holds (``MAX_CLASSES - 1``).
    """
    known = np.isfinite(values) & (values >= 0)
    fraction = values[known] != np.round(values[known])
    if np.any(fraction):
        raise InputError(f"{source}: label {values[known][fraction][0]} is not an integer class id")
    big = values[known] >= fmt.MAX_CLASSES
    if np.any(big):
        raise InputError(f"{source}: label {values[known][big][0]:.0f} is beyond the largest class"
                         f" id ({fmt.MAX_CLASSES - 1}) a graph file holds")
    return np.where(known, values, fmt.UNLABELLED).astype(np.int64)


def labels_of(values: Any, num_nodes: int, source: str) -> np.ndarray:
    """One class id per vertex of ``values``, shape ``(n,)`` or ``(n, 1)`` (:func:`class_ids`).

    A matrix ``(n, C)`` with ``C >= 2`` columns is multi-label targets: every value 0 or 1,
    returned as uint8.
    """
    y = np.asarray(values)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim == 2 and y.shape[0] == num_nodes and y.dtype.kind in "biuf":
        bad = np.argwhere((y != 0) & (y != 1))
        if bad.size:
            r, k = (int(v) for v in bad[0])
            raise InputError(f"{source}: multi-label target {y[r, k]} of vertex {r}, class {k}"
                             " is not 0 or 1")
        return y.astype(fmt.MULTI_LABEL_DTYPE)
    if y.ndim != 1 or y.shape[0] != num_nodes or y.dtype.kind not in "biuf":
        raise InputError(f"{source}: labels of shape {y.shape} and dtype {y.dtype}; expected one"
                         f" class id per vertex, shape ({num_nodes},), or an ({num_nodes}, C)"
                         " matrix of 0 and 1 (multi-label)")
    return class_ids(y, source)


def masks_of(
    masks: dict[str, Any], labels: np.ndarray, source: str
) -> dict[str, np.ndarray]:
    """The ``train``, ``val`` and ``test`` masks as booleans, checked against ``labels``."""
    n, out = len(labels), {}
    for name in fmt.MASK_NAMES:
        if name not in masks:
            raise InputError(f"{source}: no {name} mask")
        m = np.asarray(masks[name])
        if m.shape != (n,) or m.dtype.kind not in "biu" or (m.dtype.kind != "b" and (
                m.size and (m.min() < 0 or m.max() > 1))):
            raise InputError(f"{source}: the {name} mask has shape {m.shape} and dtype {m.dtype};"
                             f" expected {n} booleans (one per vertex)")
        out[name] = m.astype(bool)
    problem = mask_problem(labels, out, 0)
    if problem:
        raise InputError(f"{source}: {problem}")
    return out


def features_of(values: Any, num_nodes: int, source: str) -> Features:
    """``n x F`` features (``F > 0``) as float32, CSR when given sparse; finite."""
    x = sp.csr_matrix(values) if sp.issparse(values) else np.asarray(values)
    if x.ndim != 2 or x.shape[0] != num_nodes or x.shape[1] == 0 or x.dtype.kind not in "biuf":
        raise InputError(f"{source}: features of shape {x.shape} and dtype {x.dtype}; expected"
                         f" numbers of shape ({num_nodes}, F) with F > 0")
    x = x.astype(np.float32)
    stored = x.data if isinstance(x, sp.csr_matrix) else x
    bad = np.flatnonzero(~np.isfinite(stored.reshape(-1)))
    if bad.size:
        row = (int(np.searchsorted(x.indptr, bad[0], "right")) - 1
               if isinstance(x, sp.csr_matrix) else int(bad[0]) // x.shape[1])
        raise InputError(f"{source}: features contain NaN or Inf (first at vertex {row})")
    return x


def row_normalized(x: Features) -> Features:
    """``D^-1 X`` with ``D`` the sums of the rows' absolute values: a row of zeros stays zero.

    For non-negative features (bag of words, TF-IDF) every row then sums to 1, as Kipf &
    Welling's preprocessing makes them. Per row, so a matrix gives the rows of its blocks.
    """
    sums = np.asarray(abs(x).sum(axis=1), dtype=np.float64).ravel()
    inv = np.divide(1.0, sums, out=np.zeros_like(sums), where=sums != 0)
    if isinstance(x, sp.csr_matrix):
        return sp.csr_matrix(sp.diags(inv) @ x).astype(x.dtype)
    return (x * inv[:, None]).astype(x.dtype)


def adjacency_of(
    num_nodes: int,
    *,
    edge_index: Any = None,
    adjacency: Any = None,
    edge_weight: Any = None,
    weighted: bool = False,
    directed: bool = False,
    source: str = "graph",
) -> sp.csr_matrix:
    """The canonical ``n x n`` adjacency of the module notes, CSR with sorted rows.

    Parameters
    ----------
    num_nodes
        ``n``.
    edge_index, adjacency
        One of them: ``(2, E)`` integer ids (an edge ``src -> dst`` per column), or an
        ``n x n`` SciPy sparse matrix (an entry ``A[u, v]``: an edge ``u -> v``).
    edge_weight, weighted
        Weights: one per column of ``edge_index``; or, with ``weighted``, the values of
        ``adjacency``. Without them the graph is unweighted (float32 ones).
    directed
        Keep edge directions; else the result is symmetric.
    source
        What the arrays are, for messages.

    Returns
    -------
    scipy.sparse.csr_matrix
        float32 ones (unweighted), or the weights (float64 stays, else float32).
    """
    n = num_nodes
    if (edge_index is None) == (adjacency is None):
        raise InputError(f"{source}: give the edges as edge_index or as adjacency (one of them)")
    if adjacency is not None:
        a = sp.coo_matrix(adjacency) if sp.issparse(adjacency) else None
        if a is None or a.shape != (n, n):
            shape = a.shape if a is not None else np.shape(adjacency)
            raise InputError(f"{source}: the adjacency is {type(adjacency).__name__} of shape"
                             f" {shape}; expected a SciPy sparse matrix of shape ({n}, {n})")
        src, dst = a.row.astype(np.int64), a.col.astype(np.int64)
        w = a.data if weighted else None
    else:
        e = np.asarray(edge_index)
        if e.ndim != 2 or e.shape[0] != 2 or (e.size and e.dtype.kind not in "iu"):
            raise InputError(f"{source}: edge_index of shape {e.shape} and dtype {e.dtype};"
                             " expected integer ids of shape (2, E)")
        src, dst = e.astype(np.int64)
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            bad = min(src.min(), dst.min()) if min(src.min(), dst.min()) < 0 else max(
                src.max(), dst.max())
            raise InputError(f"{source}: edge_index has vertex id {bad} out of range [0, {n})")
        w = None if edge_weight is None else np.asarray(edge_weight)
        if w is not None and (w.reshape(-1).shape != src.shape or w.dtype.kind not in "biuf"):
            raise InputError(f"{source}: edge weights of shape {w.shape} and dtype {w.dtype};"
                             f" expected one number per edge ({src.size})")
    if w is not None:
        w = w.reshape(-1)
        if not np.isfinite(w).all():
            raise InputError(f"{source}: edge weights contain NaN or Inf")
        w = w.astype(fmt.weight_dtype(w.dtype))
    keep = src != dst
    data = np.ones(int(keep.sum()), np.float32) if w is None else w[keep]
    a = sp.csr_matrix((data, (src[keep], dst[keep])), shape=(n, n))  # repeats summed
    if w is None:
        a.data[:] = 1.0
    if not directed and (a != a.T).nnz:
        if w is not None:
            raise InputError(f"{source}: the edge weights are not symmetric (A[u, v] != A[v, u])"
                             " for an undirected graph: give symmetric weights, or keep the"
                             " directions (directed, --directed)")
        a.data[:] = 1.0
        a = a + a.T
        a.data[:] = 1.0
    a = sp.csr_matrix(a)
    a.sort_indices()
    return a
