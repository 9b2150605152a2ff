"""A graph held in memory that reads like a graph file, and opening either.

:class:`MemoryGraph` answers the block reads of :class:`~hpcgnn.io.reader.GraphFile`
(``meta``, ``read_indptr``, ``read_csr``, ``read_features``, ``read_labels``,
``read_mask``) from SciPy and NumPy arrays, so every layout's loader, and so every model,
can be built from matrices in memory (tests, notebooks) without writing HDF5, and
``hpcgnn.train`` trains on one (full-batch modes). Every rank holds the whole graph (each
builds it, or each loads it); each loader still takes only its rows of it.
:meth:`MemoryGraph.from_arrays` makes one from an edge index or a SciPy matrix, features,
labels and masks, as ``hpcgnn prepare`` would store them (:mod:`hpcgnn.io.arrays`).
"""

from __future__ import annotations

import hashlib
import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import format as fmt
from hpcgnn.io.arrays import adjacency_of, features_of, labels_of, masks_of, row_normalized
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
        ``n x f`` features, dense or CSR (read as a file's ``features_csr``).
    labels
        Class ids (``-1``: unlabelled), or multi-label targets: an ``n x C`` 0/1 matrix.
    masks
        ``train``, ``val`` and ``test`` boolean masks.
    num_classes
        Classes (default: ``labels.max() + 1``; a label matrix's columns).
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
    feature_normalization
        How the features were normalised (``"row"``), as a file records it; ``""``: as given.
    """

    adjacency: sp.csr_matrix
    features: np.ndarray | sp.csr_matrix
    labels: np.ndarray
    masks: dict[str, np.ndarray]
    num_classes: int | None = None
    directed: bool = False
    partition_offsets: tuple[int, ...] | None = None
    name: str = "memory"
    weighted: bool = False
    feature_normalization: str = ""
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
        if sp.issparse(self.features):  # any sparse format reads as CSR
            object.__setattr__(self, "features", sp.csr_matrix(self.features))

    @property
    def meta(self) -> GraphMeta:
        """Sizes and flags, as a file's."""
        n, f = self.features.shape
        classes = self.num_classes
        multi_label = np.ndim(self.labels) == 2
        if multi_label:
            classes = int(np.shape(self.labels)[1])
        elif classes is None:
            classes = int(self.labels.max()) + 1 if len(self.labels) else 0
        return GraphMeta(
            path=f"<{self.name}>", num_nodes=n, num_edges=int(self._csr[False].nnz),
            num_features=f, num_classes=classes, directed=self.directed, name=self.name,
            feature_dtype=np.dtype(self.features.dtype),
            format_version=fmt.format_version(self.weighted, multi_label),
            partition_offsets=self.partition_offsets, partition_method=None,
            weighted=self.weighted,
            feature_nnz=(int(self.features.nnz) if isinstance(self.features, sp.csr_matrix)
                         else None),
            feature_normalization=self.feature_normalization, multi_label=multi_label,
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
        """Feature rows ``[row_lo, row_hi)``, dense."""
        rows = self.features[row_lo:row_hi]
        return rows.toarray() if isinstance(rows, sp.csr_matrix) else rows

    def read_feature_csr(self, row_lo: int, row_hi: int) -> sp.csr_matrix:
        """Feature rows ``[row_lo, row_hi)`` as CSR."""
        return sp.csr_matrix(self.features[row_lo:row_hi])

    def read_labels(self, row_lo: int, row_hi: int) -> np.ndarray:
        """Class ids of rows ``[row_lo, row_hi)`` (a label matrix's rows: uint8 0/1)."""
        rows = np.asarray(self.labels[row_lo:row_hi])
        if rows.ndim == 2:
            return rows.astype(fmt.MULTI_LABEL_DTYPE)
        return rows.astype(np.int64)

    def read_mask(self, name: str, row_lo: int, row_hi: int) -> np.ndarray:
        """The ``train``, ``val`` or ``test`` mask of rows ``[row_lo, row_hi)``."""
        return np.asarray(self.masks[name][row_lo:row_hi], dtype=bool)

    def read_node_ids(self, row_lo: int, row_hi: int) -> np.ndarray:
        """The ids of rows ``[row_lo, row_hi)``: the rows themselves."""
        return np.arange(row_lo, row_hi, dtype=np.int64)

    def read_partition_perm(self, row_lo: int = 0, row_hi: int | None = None) -> np.ndarray:
        """The identity: a graph in memory is in its partition's order already."""
        return np.arange(row_lo, self.meta.num_nodes if row_hi is None else row_hi,
                         dtype=np.int64)

    def digest(self) -> str:
        """SHA-256 of the whole graph (sizes, edges, features, labels, masks): equal graphs'."""
        h = hashlib.sha256(repr(self.meta).encode())
        x = self.features
        parts = [self._csr[False].indptr, self._csr[False].indices, self._csr[False].data]
        parts += [x.indptr, x.indices, x.data] if isinstance(x, sp.csr_matrix) else [x]
        parts += [np.asarray(self.labels), *(np.asarray(self.masks[m]) for m in fmt.MASK_NAMES)]
        for a in parts:
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()

    @classmethod
    def from_arrays(
        cls,
        *,
        features: Any,
        labels: Any,
        train_mask: Any,
        val_mask: Any,
        test_mask: Any,
        edge_index: Any = None,
        edge_weight: Any = None,
        adjacency: Any = None,
        weighted: bool = False,
        directed: bool = False,
        num_classes: int | None = None,
        row_normalize: bool = False,
        name: str = "memory",
        source: str | None = None,
    ) -> MemoryGraph:
        """A graph made of arrays as ``hpcgnn prepare`` stores it (:mod:`hpcgnn.io.arrays`).

        NumPy arrays, SciPy matrices, or CPU tensors (anything :func:`numpy.asarray`
        reads), checked: a refusal is one :class:`~hpcgnn.errors.InputError`. A file that
        ``hpcgnn prepare pyg`` or ``npz`` writes of the same arrays trains to the same
        weights (the same ``params_sha256``).

        Parameters
        ----------
        features
            ``n x F`` numbers, dense or a SciPy sparse matrix (kept CSR); stored float32.
        labels
            A class id per vertex (``n`` or ``n x 1``; negative: unlabelled), or multi-label
            targets: an ``n x C`` matrix of 0 and 1 (``C >= 2``; train with ``loss="bce"``).
        train_mask, val_mask, test_mask
            ``n`` booleans each: disjoint, on labelled vertices only.
        edge_index, edge_weight
            ``(2, E)`` vertex ids, an edge ``src -> dst`` per column (PyG's
            ``edge_index``), and optionally a weight per edge.
        adjacency, weighted
            Instead of ``edge_index``: an ``n x n`` SciPy sparse matrix; with ``weighted``
            its values are the edge weights.
        directed
            Keep the edges' directions; else the graph is made undirected (symmetric
            weights are required of a weighted one).
        num_classes
            Classes (default: the largest label + 1; a label matrix's columns).
        row_normalize
            Divide each feature row by the sum of its absolute values (``prepare
            --row-normalize``).
        name
            The graph's name in reports.
        source
            What the arrays are, named by errors (default: ``<name>``).
        """
        x = np.asarray(features) if not sp.issparse(features) else features
        n = int(x.shape[0]) if getattr(x, "ndim", 0) >= 1 else 0
        where = source or f"<{name}>"
        x = features_of(x, n, where)
        y = labels_of(labels, n, where)
        if y.ndim == 2 and num_classes not in (None, y.shape[1]):
            raise InputError(f"{where}: num_classes {num_classes} but {y.shape[1]} label columns")
        if y.ndim == 1 and num_classes is not None and y.size and num_classes <= y.max():
            raise InputError(f"{where}: num_classes {num_classes} but label {int(y.max())}")
        masks = masks_of({"train": train_mask, "val": val_mask, "test": test_mask}, y, where)
        a = adjacency_of(n, edge_index=edge_index, adjacency=adjacency, edge_weight=edge_weight,
                         weighted=weighted, directed=directed, source=where)
        return cls(
            a, row_normalized(x) if row_normalize else x, y, masks, num_classes=num_classes,
            directed=directed, name=name,
            weighted=edge_weight is not None or (adjacency is not None and weighted),
            feature_normalization="row" if row_normalize else "",
        )

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
