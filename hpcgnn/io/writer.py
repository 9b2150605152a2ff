"""Streaming writer of the HDF5 graph format.

The file is written under an unpredictable temporary name beside the output
(:class:`~hpcgnn.io.output.H5Output`) and renamed into place only when every required
part has been written, so an interrupted or failed ``prepare`` never leaves a file that
looks complete, nor a temporary file, and a previous file at the output is kept.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import h5py
import numpy as np
import scipy.sparse as sp

from hpcgnn import __version__
from hpcgnn.errors import InputError
from hpcgnn.io import format as fmt
from hpcgnn.io.edges import CsrRows, EdgeSorter
from hpcgnn.io.output import CHECKSUM, H5Output, write_dataset
from hpcgnn.layout.block_counts import BlockCounts
from hpcgnn.utils.progress import Progress

#: HDF5 refuses chunks of 4 GiB or more; a feature chunk holds at least one row.
_MAX_ROW_BYTES = (1 << 32) - 1


def _dataset_options(shape: tuple[int, ...], chunks: tuple[int, ...]) -> dict:
    if 0 in shape:
        return {}
    chunks = tuple(max(1, min(c, s)) for c, s in zip(chunks, shape, strict=True))
    return {
        "chunks": chunks,
        "compression": fmt.COMPRESSION,
        "compression_opts": fmt.COMPRESSION_LEVEL,
        "shuffle": True,
        **CHECKSUM,
    }


def _growing_dataset(group: h5py.Group, name: str, dtype: np.dtype) -> h5py.Dataset:
    """An empty 1-D dataset that grows as a CSR's entries are appended (chunked, compressed)."""
    return group.create_dataset(
        name, shape=(0,), maxshape=(None,), dtype=dtype, chunks=(fmt.CHUNK_ELEMENTS,),
        compression=fmt.COMPRESSION, compression_opts=fmt.COMPRESSION_LEVEL, shuffle=True,
        **CHECKSUM,
    )


def _append(dset: h5py.Dataset, start: int, values: np.ndarray) -> None:
    """Write ``values`` at ``dset[start:]``, growing the dataset to hold them."""
    if len(values):
        dset.resize((start + len(values),))
        dset[start : start + len(values)] = values.astype(dset.dtype, copy=False)


def _writes(method: Callable) -> Callable:
    """Report a failed write in ``method`` as an ``OutputError`` naming the file."""

    @functools.wraps(method)
    def wrapper(self: GraphFileWriter, *args: object, **kwargs: object) -> object:
        with self._out.errors():
            return method(self, *args, **kwargs)

    return wrapper


class GraphFileWriter:
    """Write one graph file, part by part, in bounded memory.

    Parameters
    ----------
    path
        Destination ``.h5`` file; written under a temporary name, renamed on success. A
        symlink or another non-regular file there is refused, never followed.
    num_nodes, num_features, num_classes
        Sizes of the graph.
    directed
        Whether ``A^T`` differs from ``A`` (then both CSRs are stored).
    name, source
        Free-text dataset name and provenance, kept as attributes.
    feature_dtype
        ``float32`` (default) or ``float64``.
    what
        How error messages name the output (default ``"--out"``).
    weight_dtype
        ``None`` (default): an unweighted graph, written as format version 1. ``float32``
        or ``float64``: every CSR of the adjacency carries its edge weights (``data``),
        and the file is format version 2.
    multi_label
        Multi-label targets: :meth:`write_labels` takes a ``(num_nodes, num_classes)`` 0/1
        matrix (stored uint8), and the file is format version 3.

    Examples
    --------
    >>> with GraphFileWriter("g.h5", num_nodes=n, num_features=f, num_classes=c,
    ...                      directed=False) as w:          # doctest: +SKIP
    ...     w.write_adjacency(sorter)
    ...     w.write_features(0, x)
    ...     w.write_labels(y)
    ...     w.write_masks(train, val, test)
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        num_nodes: int,
        num_features: int,
        num_classes: int,
        directed: bool,
        name: str = "",
        source: str = "",
        feature_dtype: np.dtype | type = np.float32,
        show_progress: bool = True,
        what: str = "--out",
        sparse_features: bool = False,
        feature_normalization: str = "",
        weight_dtype: np.dtype | type | None = None,
        multi_label: bool = False,
    ) -> None:
        self.path = Path(path)
        self.multi_label = bool(multi_label)
        self.num_nodes = int(num_nodes)
        self.num_features = int(num_features)
        self.num_classes = int(num_classes)
        self.directed = bool(directed)
        self.show_progress = show_progress
        self.feature_dtype = np.dtype(feature_dtype)
        self.sparse_features = bool(sparse_features)
        if self.feature_dtype not in fmt.FEATURE_DTYPES:
            raise InputError(
                f"features must be float16, float32 or float64, got {self.feature_dtype}"
            )
        #: The dtype of the edge weights, or ``None``: unweighted.
        self.weight_dtype = None if weight_dtype is None else np.dtype(weight_dtype)
        if self.weight_dtype is not None and self.weight_dtype not in fmt.WEIGHT_DTYPES:
            raise InputError(f"edge weights must be float32 or float64, got {self.weight_dtype}")
        if self.num_nodes <= 0 or self.num_features <= 0 or self.num_classes <= 0:
            raise InputError(
                f"nodes, features and classes must be positive, got {self.num_nodes}, "
                f"{self.num_features}, {self.num_classes}"
            )
        if self.num_features * self.feature_dtype.itemsize > _MAX_ROW_BYTES:
            raise InputError(
                f"{self.num_features} features of {self.feature_dtype} make a row of 4 GiB or "
                f"more, beyond what an HDF5 chunk can hold"
            )
        self._written: set[str] = set()
        self._num_edges: int | None = None
        self._out = H5Output(self.path, what)
        self._h5 = self._out.file
        try:
            self._start(name, source, feature_normalization)
        except BaseException:
            self.abort()
            raise

    @_writes
    def _start(self, name: str, source: str, feature_normalization: str) -> None:
        root = self._h5.attrs
        root[fmt.ATTR_FORMAT] = fmt.FORMAT_NAME
        root[fmt.ATTR_VERSION] = fmt.format_version(self.weight_dtype is not None,
                                                    self.multi_label)
        root[fmt.ATTR_NUM_NODES] = self.num_nodes
        root[fmt.ATTR_NUM_FEATURES] = self.num_features
        root[fmt.ATTR_NUM_CLASSES] = self.num_classes
        root[fmt.ATTR_DIRECTED] = self.directed
        root[fmt.ATTR_NAME] = name
        root[fmt.ATTR_SOURCE] = source
        if feature_normalization:
            root[fmt.ATTR_FEATURE_NORMALIZATION] = feature_normalization
        root["created_by"] = f"hpcgnn {__version__}"
        self._features_rows = 0
        if self.sparse_features:
            self._start_sparse_features()
            return
        self._features = self._h5.create_dataset(
            fmt.FEATURES,
            shape=(self.num_nodes, self.num_features),
            dtype=self.feature_dtype,
            **_dataset_options(
                (self.num_nodes, self.num_features),
                (
                    fmt.feature_chunk_rows(self.num_features, self.feature_dtype.itemsize),
                    self.num_features,
                ),
            ),
        )

    def _start_sparse_features(self) -> None:
        g = self._h5.create_group(fmt.FEATURES_CSR)
        n = self.num_nodes
        self._csr_ptr = g.create_dataset(
            fmt.INDPTR, shape=(n + 1,), dtype=fmt.INDPTR_DTYPE,
            **_dataset_options((n + 1,), (fmt.CHUNK_ELEMENTS,)),
        )
        self._csr_ptr[0] = 0
        self._csr = [
            _growing_dataset(g, name, dtype)
            for name, dtype in ((fmt.INDICES, fmt.index_dtype(self.num_features)),
                                (fmt.DATA, self.feature_dtype))
        ]
        self._features_nnz = 0

    # -- context management -------------------------------------------------------------
    def __enter__(self) -> GraphFileWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()

    def abort(self) -> None:
        """Close and delete the temporary file; the output is left as it was."""
        self._out.discard()

    def finish(self) -> None:
        """Check that every required part was written, close, and rename into place.

        On any error the temporary file is deleted (see :meth:`abort`).
        """
        try:
            missing = {fmt.ADJACENCY, fmt.LABELS, fmt.MASKS} - self._written
            if self.directed:
                missing |= {fmt.ADJACENCY_T} - self._written
            if self._features_rows != self.num_nodes:
                missing.add(f"features (rows written {self._features_rows}/{self.num_nodes})")
            if missing:
                raise InputError(
                    f"graph file incomplete, not written: missing {sorted(missing)}"
                )
            if fmt.NODE_IDS not in self._written:
                self.write_node_ids(np.arange(self.num_nodes, dtype=fmt.NODE_ID_DTYPE))
            with self._out.errors():
                self._h5.attrs[fmt.ATTR_NUM_EDGES] = int(self._num_edges or 0)
            self._out.commit()
        except BaseException:
            self.abort()
            raise

    # -- parts --------------------------------------------------------------------------
    @_writes
    def write_csr(self, group: str, blocks: Iterable[CsrRows]) -> int:
        """Write a CSR matrix given as consecutive row blocks; return its number of nonzeros.

        Parameters
        ----------
        group
            ``format.ADJACENCY`` or ``format.ADJACENCY_T``.
        blocks
            Row blocks in order, covering rows ``0 .. num_nodes - 1`` exactly; with
            weights (a ``weight_dtype``) each block's ``data``, all finite, else none.
        """
        n = self.num_nodes
        g = self._h5.create_group(group)
        indptr = g.create_dataset(
            fmt.INDPTR,
            shape=(n + 1,),
            dtype=fmt.INDPTR_DTYPE,
            **_dataset_options((n + 1,), (fmt.CHUNK_ELEMENTS,)),
        )
        indices = _growing_dataset(g, fmt.INDICES, fmt.index_dtype(n))
        weights = None
        if self.weight_dtype is not None:
            weights = _growing_dataset(g, fmt.DATA, self.weight_dtype)
        indptr[0] = 0
        nnz = 0
        next_row = 0
        with Progress(f"writing {group}", n, "rows", enabled=self.show_progress) as bar:
            for block in blocks:
                if block.row_start != next_row:
                    raise InputError(
                        f"CSR rows out of order: expected {next_row}, got {block.row_start}"
                    )
                rows = len(block.counts)
                ends = nnz + np.cumsum(block.counts, dtype=np.int64)
                indptr[next_row + 1 : next_row + 1 + rows] = ends
                _append(indices, nnz, block.indices)
                if weights is not None:
                    _append(weights, nnz, self._block_weights(block))
                elif block.data is not None:
                    raise ValueError("edge weights given to a writer without weight_dtype")
                nnz += len(block.indices)
                next_row += rows
                bar.update(rows)
        if next_row != n:
            raise InputError(f"CSR covers {next_row} rows, expected {n}")
        for dset in (indptr, indices, weights):  # now, not when collected (hpcgnn.io.output)
            if dset is not None:
                dset.flush()
        self._written.add(group)
        if group == fmt.ADJACENCY:
            self._num_edges = nnz
        return nnz

    def _block_weights(self, block: CsrRows) -> np.ndarray:
        """The weights of ``block``'s entries, checked: one each, all finite."""
        if block.data is None or len(block.data) != len(block.indices):
            raise ValueError("a weighted file needs one weight per CSR entry")
        if not np.isfinite(block.data).all():
            raise InputError("edge weights contain NaN or Inf")
        return block.data

    def write_adjacency(self, sorter: EdgeSorter) -> int:
        """Write ``A`` (and ``A^T`` for directed graphs) from an :class:`EdgeSorter`."""
        if sorter.directed != self.directed:
            raise ValueError("sorter and writer disagree on directedness")
        if sorter.weight_dtype != self.weight_dtype:
            raise ValueError("sorter and writer disagree on edge weights")
        nnz = self.write_csr(fmt.ADJACENCY, sorter.rows())
        if self.directed:
            nnz_t = self.write_csr(fmt.ADJACENCY_T, sorter.transpose_rows())
            if nnz_t != nnz:
                raise InputError(f"A has {nnz} entries but A^T has {nnz_t}")
        return nnz

    @_writes
    def write_features(self, start: int, block: np.ndarray | sp.spmatrix | sp.sparray) -> None:
        """Write feature rows ``[start, start + len(block))``; call in row order.

        ``block``: dense or SciPy sparse; a file of sparse features (``sparse_features``)
        stores its nonzeros, a dense file every entry.
        """
        if not sp.issparse(block):
            block = np.asarray(block)
        if block.ndim != 2 or block.shape[1] != self.num_features:
            raise InputError(
                f"feature block has shape {block.shape}, expected (*, {self.num_features})"
            )
        if start != self._features_rows:
            raise InputError(
                f"feature rows out of order: expected {self._features_rows}, got {start}"
            )
        if not np.isfinite(block.data if sp.issparse(block) else block).all():
            raise InputError("features contain NaN or Inf")
        rows = block.shape[0]
        if self.sparse_features:
            self._append_csr(sp.csr_matrix(block, dtype=fmt.sparse_dtype(self.feature_dtype)))
        else:
            dense = block if isinstance(block, np.ndarray) else block.toarray()
            self._features[start : start + rows] = dense.astype(self.feature_dtype, copy=False)
        self._features_rows += rows

    def _append_csr(self, block: sp.csr_matrix) -> None:
        block.eliminate_zeros()
        block.sum_duplicates()  # also sorts each row's columns
        start, nnz = self._features_rows, self._features_nnz
        rows = block.shape[0]
        self._csr_ptr[start + 1 : start + 1 + rows] = nnz + block.indptr[1:].astype(np.int64)
        for dset, values in zip(self._csr, (block.indices, block.data), strict=True):
            _append(dset, nnz, values)
        self._features_nnz = nnz + block.nnz

    def write_labels(self, labels: np.ndarray) -> None:
        """Write one class id per vertex (``-1`` for unlabelled vertices).

        A ``multi_label`` writer takes the ``(num_nodes, num_classes)`` 0/1 matrix instead.
        """
        labels = np.asarray(labels)
        if self.multi_label:
            self._write_label_matrix(labels)
            return
        if labels.shape != (self.num_nodes,):
            raise InputError(f"labels have shape {labels.shape}, expected ({self.num_nodes},)")
        if labels.size and (labels.min() < fmt.UNLABELLED or labels.max() >= self.num_classes):
            raise InputError(f"labels out of range [0, {self.num_classes})")
        self._write_1d(fmt.LABELS, labels.astype(fmt.LABEL_DTYPE))

    @_writes
    def _write_label_matrix(self, labels: np.ndarray) -> None:
        """The multi-label targets, stored uint8 in chunks of whole rows."""
        shape = (self.num_nodes, self.num_classes)
        if labels.shape != shape:
            raise InputError(f"multi-label targets have shape {labels.shape}, expected {shape}")
        if labels.dtype.kind not in "biuf" or not np.isin(labels, (0, 1)).all():
            raise InputError("multi-label targets must be 0 or 1")
        rows = fmt.feature_chunk_rows(self.num_classes, 1)
        write_dataset(self._h5, fmt.LABELS, labels.astype(fmt.MULTI_LABEL_DTYPE),
                      **_dataset_options(shape, (rows, self.num_classes)))
        self._written.add(fmt.LABELS)

    @_writes
    def write_masks(self, train: np.ndarray, val: np.ndarray, test: np.ndarray) -> None:
        """Write boolean train/val/test masks of length ``num_nodes``."""
        g = self._h5.create_group(fmt.MASKS)
        for name, mask in zip(fmt.MASK_NAMES, (train, val, test), strict=True):
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (self.num_nodes,):
                raise InputError(
                    f"{name} mask has shape {mask.shape}, expected ({self.num_nodes},)"
                )
            write_dataset(g, name, mask, **_dataset_options(mask.shape, (fmt.CHUNK_ELEMENTS,)))
        self._written.add(fmt.MASKS)

    def write_node_ids(self, node_ids: np.ndarray) -> None:
        """Write the original id of every vertex (default: ``0 .. n-1``)."""
        node_ids = np.asarray(node_ids, dtype=fmt.NODE_ID_DTYPE)
        if node_ids.shape != (self.num_nodes,):
            raise InputError(f"node ids have shape {node_ids.shape}, expected ({self.num_nodes},)")
        self._write_1d(fmt.NODE_IDS, node_ids)

    @_writes
    def write_partition(
        self, offsets: np.ndarray, perm: np.ndarray, method: str, edge_cut: int,
        blocks: dict[int, BlockCounts] | None = None,
    ) -> None:
        """Record a vertex partition: part ``k`` owns ids ``offsets[k] .. offsets[k+1]-1``.

        ``perm[new_id]`` is the id of the vertex in the file that was partitioned;
        ``blocks``: the nonzeros and halo sizes of its blocks by block count
        (:func:`hpcgnn.layout.block_counts.partition_block_counts`), or ``None``.
        """
        g = self._h5.create_group(fmt.PARTITION)
        write_dataset(g, fmt.PART_OFFSETS, np.asarray(offsets, dtype=np.int64))
        perm = np.asarray(perm, dtype=np.int64)
        write_dataset(
            g, fmt.PART_PERM, perm, **_dataset_options(perm.shape, (fmt.CHUNK_ELEMENTS,))
        )
        g.attrs["method"] = method
        g.attrs["num_parts"] = len(offsets) - 1
        g.attrs["edge_cut"] = int(edge_cut)
        for b, counts in (blocks or {}).items():
            block = g.create_group(f"{fmt.PART_BLOCKS}/{b}")
            for name, values in counts.arrays().items():
                write_dataset(block, name, values)
        self._written.add(fmt.PARTITION)

    @_writes
    def _write_1d(self, name: str, data: np.ndarray) -> None:
        write_dataset(self._h5, name, data, **_dataset_options(data.shape, (fmt.CHUNK_ELEMENTS,)))
        self._written.add(name)
