"""A graph held in memory that reads like a graph file, and opening either.

:class:`MemoryGraph` answers the block reads of :class:`~hpcgnn.io.reader.GraphFile`
(``meta``, ``read_indptr``, ``read_csr``, ``read_features``, ``read_labels``,
``read_mask``) from SciPy and NumPy arrays, so every layout's loader, and so every model,
can be built from matrices in memory (tests, notebooks) without writing HDF5. Every rank
holds the whole graph; each loader still takes only its rows of it.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import format as fmt
from hpcgnn.io.reader import GraphFile, GraphMeta, first_nonfinite_row, weights_problem


@dataclass(frozen=True, eq=False)
class MemoryGraph:
    """A graph in memory with :class:`~hpcgnn.io.reader.GraphFile`'s read interface.

    Parameters
    ----------
    adjacency
        ``n x n`` adjacency ``A`` (a stored entry ``A[u, v]``: an edge ``u -> v``); only
        the pattern is used, as a file without weights stores it, unless ``weighted``.
    features
        ``n x f`` features.
    labels
        Class ids (``-1``: unlabelled).
    masks
        ``train``, ``val`` and ``test`` boolean masks.
    num_classes
        Classes (default: ``labels.max() + 1``).
    directed
        Whether ``A`` is directed (undirected: ``A`` must be symmetric).
    partition_offsets
        Part offsets of a vertex partition (as ``hpcgnn partition`` writes), else ``None``.
    name
        The graph's name in reports.
    weighted
        Whether the values of ``adjacency`` are the edge weights (read with
        ``read_csr(..., weights=True)``; float64 stays, other dtypes become float32;
        duplicate entries are summed). Undirected: ``A`` must be symmetric with its weights.
    """

    adjacency: sp.csr_matrix
    features: np.ndarray
    labels: np.ndarray
    masks: dict[str, np.ndarray]
    num_classes: int | None = None
    directed: bool = False
    partition_offsets: tuple[int, ...] | None = None
    name: str = "memory"
    weighted: bool = False
    _csr: dict[bool, sp.csr_matrix] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        dtype = fmt.weight_dtype(self.adjacency.dtype) if self.weighted else np.float32
        a = sp.csr_matrix(self.adjacency, dtype=dtype, copy=True)
        a.sum_duplicates()
        a.sort_indices()
        if not self.weighted:
            a.data[:] = 1.0
        a_t = a.T.tocsr() if self.directed else a
        a_t.sort_indices()
        object.__setattr__(self, "_csr", {False: a, True: a_t})

    @property
    def meta(self) -> GraphMeta:
        """Sizes and flags, as a file's."""
        n, f = self.features.shape
        classes = self.num_classes
        if classes is None:
            classes = int(self.labels.max()) + 1 if len(self.labels) else 0
        return GraphMeta(
            path=f"<{self.name}>", num_nodes=n, num_edges=int(self._csr[False].nnz),
            num_features=f, num_classes=classes, directed=self.directed, name=self.name,
            feature_dtype=np.dtype(self.features.dtype),
            format_version=fmt.format_version(self.weighted),
            partition_offsets=self.partition_offsets, partition_method=None,
            weighted=self.weighted,
        )

    def read_indptr(self, row_lo: int, row_hi: int, transpose: bool = False) -> np.ndarray:
        """``indptr[row_lo : row_hi + 1]`` of ``A`` (or ``A^T``) as int64."""
        return self._csr[transpose].indptr[row_lo : row_hi + 1].astype(np.int64)

    def read_csr(
        self, row_lo: int, row_hi: int, transpose: bool = False, weights: bool = False
    ) -> sp.csr_matrix:
        """Rows ``[row_lo, row_hi)`` of ``A`` (or ``A^T``), as a file's block.

        Float32 ones, or with ``weights`` the edge weights (ones when unweighted), checked
        to be finite.
        """
        block = self._csr[transpose][row_lo:row_hi].tocsr()
        if not self.weighted:
            return block
        if not weights:
            ones = np.ones(block.nnz, dtype=np.float32)
            return sp.csr_matrix((ones, block.indices, block.indptr), shape=block.shape)
        row = first_nonfinite_row(block.data, block.indptr)
        if row is not None:
            group = fmt.ADJACENCY_T if transpose and self.directed else fmt.ADJACENCY
            raise InputError(f"{self.meta.path}: {weights_problem(row_lo + row, group)}")
        return block

    def read_features(self, row_lo: int, row_hi: int) -> np.ndarray:
        """Feature rows ``[row_lo, row_hi)``."""
        return self.features[row_lo:row_hi]

    def read_feature_csr(self, row_lo: int, row_hi: int) -> sp.csr_matrix:
        """Feature rows ``[row_lo, row_hi)`` as CSR."""
        return sp.csr_matrix(self.features[row_lo:row_hi])

    def read_labels(self, row_lo: int, row_hi: int) -> np.ndarray:
        """Class ids of rows ``[row_lo, row_hi)``."""
        return np.asarray(self.labels[row_lo:row_hi], dtype=np.int64)

    def read_mask(self, name: str, row_lo: int, row_hi: int) -> np.ndarray:
        """The ``train``, ``val`` or ``test`` mask of rows ``[row_lo, row_hi)``."""
        return np.asarray(self.masks[name][row_lo:row_hi], dtype=bool)

    def __enter__(self) -> MemoryGraph:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


#: Where a graph is read from: a graph file's path, or a graph in memory.
GraphSource = str | os.PathLike | MemoryGraph
#: An open graph: a file, or a graph in memory (the same block reads).
GraphReader = GraphFile | MemoryGraph


def read_feature_block(
    gf: GraphReader, lo: int, hi: int, dtype: np.dtype | type
) -> np.ndarray | sp.csr_matrix:
    """Feature rows ``[lo, hi)`` as the graph stores them (dense, or CSR), values as ``dtype``."""
    if gf.meta.feature_nnz is None:
        return np.ascontiguousarray(gf.read_features(lo, hi), dtype=dtype)
    return gf.read_feature_csr(lo, hi).astype(dtype)


def open_graph(source: GraphSource) -> AbstractContextManager[GraphReader]:
    """Open ``source`` for block reads: a :class:`GraphFile`, or the in-memory graph itself."""
    if isinstance(source, MemoryGraph):
        return nullcontext(source)
    return GraphFile(source)
