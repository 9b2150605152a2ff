"""Block reader of the HDF5 graph format.

Every read is a hyperslab of the rows a rank owns: opening a file reads only metadata,
and :meth:`GraphFile.read_csr` touches ``indptr[lo:hi+1]`` and the matching slice of
``indices`` (and of the edge weights ``data`` when asked for them), so a rank's memory is
proportional to its block, never to the whole graph.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

import h5py
import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import format as fmt
from hpcgnn.layout.block_counts import COUNT_NAMES, BlockCounts
from hpcgnn.utils.text import printable

_Attr = TypeVar("_Attr")

#: Largest ratio of declared to stored bytes accepted for a compressed dataset (deflate's
#: best case is about 1032:1).
MAX_COMPRESSION = 1100
#: Datasets up to this size are never refused for their storage (fill values, tiny data).
SMALL_DATASET_BYTES = 1 << 16
#: Deepest group nesting accepted (the format uses three levels: `partition/blocks/<B>`).
MAX_DEPTH = 8
MAX_CLASSES = fmt.MAX_CLASSES


@dataclass(frozen=True)
class GraphMeta:
    """Sizes and flags of a graph file (from its attributes and dataset shapes)."""

    path: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    directed: bool
    name: str
    feature_dtype: np.dtype
    format_version: int
    partition_offsets: tuple[int, ...] | None
    partition_method: str | None
    source: str = ""
    #: Stored nonzeros of features kept as CSR (``features_csr``); ``None``: dense.
    feature_nnz: int | None = None
    #: How ``prepare`` normalised the features (``"row"``), or ``""``: as given.
    feature_normalization: str = ""
    #: Whether the adjacency stores edge weights (``adjacency/data``; format version 2).
    weighted: bool = False
    #: Whether ``labels`` is a ``(num_nodes, num_classes)`` 0/1 matrix (multi-label targets,
    #: format version 3), not a class id per vertex.
    multi_label: bool = False
    #: The partition's blocks' nonzeros and halo sizes by block count, as ``hpcgnn
    #: partition`` records them (``partition/blocks``); empty for a file without them.
    partition_blocks: tuple[tuple[int, BlockCounts], ...] = ()

    def block_counts(self, blocks: int) -> BlockCounts | None:
        """The recorded counts of the partition coarsened to ``blocks`` blocks, or ``None``."""
        return dict(self.partition_blocks).get(blocks)


def first_nonfinite_row(values: np.ndarray, indptr: np.ndarray) -> int | None:
    """The first row of a CSR block (``indptr`` from 0) with a NaN or Inf value, or ``None``."""
    bad = np.flatnonzero(~np.isfinite(values))
    if not bad.size:
        return None
    return int(np.searchsorted(indptr, bad[0], "right")) - 1


def weights_problem(row: int, group: str) -> str:
    """The line of a NaN or Inf edge weight, first in ``row`` of ``group``'s CSR."""
    return f"edge weights contain NaN or Inf (first in row {row} of '{group}')"


class GraphFile:
    """An open graph file; read blocks of it.

    Parameters
    ----------
    path
        A file written by ``hpcgnn prepare`` or ``hpcgnn partition``.

    Raises
    ------
    InputError
        If the file is missing, not HDF5, truncated, of a newer format version, or lacks a
        dataset or has one of the wrong shape or dtype. Contents (index ranges, NaN
        values, monotonicity) are checked by :func:`hpcgnn.io.validate.validate_file`.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)
        if not Path(path).exists():
            raise InputError(f"{self.path}: no such file")
        if not Path(path).is_file():  # a pipe would block the open, a directory fail in lines
            raise InputError(f"{self.path}: not a regular file (a directory, pipe or device)")
        try:
            self._h5 = h5py.File(self.path, "r")
        except OSError as err:
            why = " ".join(str(err).split())  # HDF5's messages span lines
            raise InputError(
                f"{self.path}: not a readable HDF5 file (truncated or corrupt?): {why}"
            ) from err
        try:
            self._check_storage(self._h5, "", 0, set())
            self.meta = self._read_meta()
        except Exception:
            self._h5.close()
            raise

    def __enter__(self) -> GraphFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the underlying HDF5 file."""
        if self._h5.id.valid:
            self._h5.close()

    # -- storage policy --------------------------------------------------------------------
    def _check_storage(
        self, group: h5py.Group, prefix: str, depth: int, seen: set[object]
    ) -> None:
        """Refuse what could reach other files or make reading explode, before any read.

        Soft and external links, external storage and virtual datasets are refused (they
        can point at any file on the machine); so is a dataset that declares more bytes than
        its storage can hold (at most :data:`MAX_COMPRESSION` times its stored size when
        compressed, all of it otherwise), which would make a small file read for hours.
        Every object is checked once however many hard links reach it (``seen`` holds the
        ids of those checked), so groups linked many times over cannot make the check itself
        run for hours.
        """
        if depth > MAX_DEPTH:
            raise self._fail(f"groups nested deeper than {MAX_DEPTH} levels at '{prefix}'")
        seen.add(group.id)
        for name in group:
            path = f"{prefix}/{name}"
            link = group.get(name, getlink=True)
            if isinstance(link, (h5py.SoftLink, h5py.ExternalLink)):
                kind = "an external link" if isinstance(link, h5py.ExternalLink) else "a soft link"
                raise self._fail(f"'{path}' is {kind}; links are not followed")
            obj = group.get(name)
            if obj is None or obj.id in seen:
                continue
            if isinstance(obj, h5py.Group):
                self._check_storage(obj, path, depth + 1, seen)
            elif isinstance(obj, h5py.Dataset):
                seen.add(obj.id)
                self._check_dataset(obj, path)

    def _check_dataset(self, ds: h5py.Dataset, path: str) -> None:
        if ds.is_virtual:
            raise self._fail(f"dataset '{path}' is virtual (maps other files); not read")
        if ds.external:
            raise self._fail(f"dataset '{path}' uses external storage (another file); not read")
        declared = int(ds.size) * ds.dtype.itemsize
        stored = int(ds.id.get_storage_size())
        filtered = ds.chunks is not None and ds.id.get_create_plist().get_nfilters() > 0
        limit = stored * MAX_COMPRESSION if filtered else stored
        if declared > max(limit, 0) and declared > SMALL_DATASET_BYTES:
            raise self._fail(
                f"dataset '{path}' declares {declared} bytes but stores {stored}"
                " (unwritten or forged); not read"
            )

    # -- metadata ------------------------------------------------------------------------
    def _fail(self, what: str) -> InputError:
        """The error of this file; names read from it are escaped, never printed raw."""
        return InputError(printable(f"{self.path}: {what}"))

    def _attr(self, name: str, kind: type[_Attr], default: _Attr | None = None) -> _Attr:
        """Root attribute ``name`` as a ``kind`` (``str``, ``bool`` or ``int``)."""
        if name not in self._h5.attrs:
            if default is not None:
                return default
            raise self._fail(f"missing root attribute '{name}'")
        try:
            value = self._h5.attrs[name]
            if kind is str:
                return cast(_Attr, value.decode() if isinstance(value, bytes) else str(value))
        except UnicodeDecodeError:
            raise self._fail(f"attribute '{name}' is not UTF-8 text") from None
        if kind is bool:
            return cast(_Attr, bool(value))
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, int):  # 3.5, "3", [3], True
            raise self._fail(f"attribute '{name}' is not an integer: {value!r}")
        return cast(_Attr, value)

    def dataset(self, name: str, shape: tuple[int | None, ...], kinds: str) -> h5py.Dataset:
        """Return dataset ``name`` after checking its shape and dtype kind.

        Parameters
        ----------
        name
            HDF5 path inside the file.
        shape
            Expected shape; ``None`` entries are not checked.
        kinds
            Allowed ``numpy.dtype.kind`` letters, e.g. ``"iu"`` for integers.
        """
        obj = self._h5.get(name)
        if obj is None:
            raise self._fail(f"missing dataset '{name}'")
        if not isinstance(obj, h5py.Dataset):
            raise self._fail(f"'{name}' is not a dataset")
        if obj.dtype.kind not in kinds:
            raise self._fail(f"dataset '{name}' has dtype {obj.dtype}, expected kind '{kinds}'")
        if len(obj.shape) != len(shape) or any(
            want is not None and got != want for got, want in zip(obj.shape, shape, strict=True)
        ):
            want_s = "(" + ", ".join("*" if s is None else str(s) for s in shape)
            want_s += ",)" if len(shape) == 1 else ")"
            raise self._fail(f"dataset '{name}' has shape {obj.shape}, expected {want_s}")
        return obj

    def _read_meta(self) -> GraphMeta:
        fmt_name = self._attr(fmt.ATTR_FORMAT, str)
        if fmt_name != fmt.FORMAT_NAME:
            raise self._fail(f"not an hpcgnn graph file (format attribute is '{fmt_name}')")
        version = self._attr(fmt.ATTR_VERSION, int)
        if version > fmt.FORMAT_VERSION:
            raise self._fail(
                f"format version {version} is newer than this hpcgnn reads "
                f"({fmt.FORMAT_VERSION}); upgrade hpcgnn"
            )
        if version < 1:
            raise self._fail(f"invalid format version {version}")
        n = self._attr(fmt.ATTR_NUM_NODES, int)
        nnz = self._attr(fmt.ATTR_NUM_EDGES, int)
        f = self._attr(fmt.ATTR_NUM_FEATURES, int)
        c = self._attr(fmt.ATTR_NUM_CLASSES, int)
        directed = self._attr(fmt.ATTR_DIRECTED, bool)
        name = printable(self._attr(fmt.ATTR_NAME, str, default=""))
        if n <= 0 or nnz < 0 or f <= 0 or c <= 0:
            raise self._fail(
                f"invalid sizes: num_nodes={n}, num_edges={nnz}, num_features={f}, num_classes={c}"
            )
        if c > MAX_CLASSES:
            raise self._fail(f"num_classes={c} is more than {MAX_CLASSES}; not a class count")
        groups = [fmt.ADJACENCY] + ([fmt.ADJACENCY_T] if directed else [])
        for g in groups:
            self.dataset(f"{g}/{fmt.INDPTR}", (n + 1,), "iu")
            self.dataset(f"{g}/{fmt.INDICES}", (nnz,), "iu")
        weighted = self._weights_meta(groups, version, nnz)
        feats, feature_nnz = self._features_meta(n, f)
        multi_label = self._labels_meta(n, c, version)
        for m in fmt.MASK_NAMES:
            self.dataset(f"{fmt.MASKS}/{m}", (n,), "biu")
        self.dataset(fmt.NODE_IDS, (n,), "iu")
        offsets = method = None
        blocks: tuple[tuple[int, BlockCounts], ...] = ()
        if fmt.PARTITION in self._h5:
            name = f"{fmt.PARTITION}/{fmt.PART_OFFSETS}"
            self.dataset(name, (None,), "iu")
            off = self._read(name, ())
            self.dataset(f"{fmt.PARTITION}/{fmt.PART_PERM}", (n,), "iu")
            if len(off) < 2 or off[0] != 0 or off[-1] != n or np.any(np.diff(off) < 0):
                raise self._fail(f"partition offsets {off.tolist()[:8]} are not 0 <= ... <= {n}")
            offsets = tuple(int(x) for x in off)
            method = printable(str(self._h5[fmt.PARTITION].attrs.get("method", "")))
            blocks = self._blocks_meta(len(offsets) - 1)
        normalization = self._attr(fmt.ATTR_FEATURE_NORMALIZATION, str, default="")
        if normalization not in fmt.FEATURE_NORMALIZATIONS:
            raise self._fail(f"unknown feature normalization {normalization[:20]!r} (known: row)")
        return GraphMeta(
            path=self.path,
            num_nodes=n,
            num_edges=nnz,
            num_features=f,
            num_classes=c,
            directed=directed,
            name=name,
            feature_dtype=feats.dtype,
            format_version=version,
            partition_offsets=offsets,
            partition_method=method,
            source=printable(self._attr(fmt.ATTR_SOURCE, str, default="")),
            feature_nnz=feature_nnz,
            feature_normalization=normalization,
            weighted=weighted,
            multi_label=multi_label,
            partition_blocks=blocks,
        )

    def _blocks_meta(self, parts: int) -> tuple[tuple[int, BlockCounts], ...]:
        """``partition/blocks``: the counts of every recorded coarsening of ``parts`` parts."""
        group = self._h5[fmt.PARTITION].get(fmt.PART_BLOCKS)
        if group is None:
            return ()
        name = f"{fmt.PARTITION}/{fmt.PART_BLOCKS}"
        if not isinstance(group, h5py.Group):
            raise self._fail(f"'{name}' is not a group")
        out = []
        for key in group:
            if not key.isdecimal() or int(key) < 1 or parts % int(key):
                raise self._fail(f"'{name}/{key}' does not name a block count of {parts} parts")
            b, arrays = int(key), {}
            for count in COUNT_NAMES:
                path = f"{name}/{key}/{count}"
                self.dataset(path, (b,), "iu")
                arrays[count] = self._read(path, ())
            if any(np.any(v < 0) for v in arrays.values()):
                raise self._fail(f"'{name}/{key}' has negative counts")
            out.append((b, BlockCounts.from_arrays(arrays)))
        return tuple(sorted(out, key=lambda item: item[0]))

    def _labels_meta(self, n: int, c: int, version: int) -> bool:
        """Whether ``labels`` is a multi-label ``(n, C)`` matrix (version 3), else ids ``(n,)``."""
        obj = self._h5.get(fmt.LABELS)
        if not isinstance(obj, h5py.Dataset) or len(obj.shape) != 2:
            self.dataset(fmt.LABELS, (n,), "iu")
            return False
        if version < fmt.MULTI_LABEL_VERSION:
            raise self._fail(
                f"has multi-label targets ('{fmt.LABELS}' of shape {obj.shape}) but format"
                f" version {version}; multi-label files are version {fmt.MULTI_LABEL_VERSION}"
            )
        self.dataset(fmt.LABELS, (n, c), "biu")
        return True

    def _weights_meta(self, groups: list[str], version: int, nnz: int) -> bool:
        """Whether the file stores edge weights: ``data`` beside every CSR's indices, or none.

        Weights make a file version 2 (a version-1 reader would drop them unseen).
        """
        names = [f"{g}/{fmt.DATA}" for g in groups]
        if names[0] not in self._h5:
            if len(names) > 1 and names[1] in self._h5:
                raise self._fail(f"has '{names[1]}' but no '{names[0]}' (edge weights of both)")
            return False
        if version < fmt.WEIGHTED_VERSION:
            raise self._fail(
                f"has edge weights ('{names[0]}') but format version {version}; "
                f"weighted files are version {fmt.WEIGHTED_VERSION}"
            )
        for name in names:
            self.dataset(name, (nnz,), "f")
        return True

    def _features_meta(self, n: int, f: int) -> tuple[h5py.Dataset, int | None]:
        """The features' values dataset and, for CSR features, their nonzero count."""
        dense, csr = fmt.FEATURES in self._h5, fmt.FEATURES_CSR in self._h5
        if dense and csr:
            raise self._fail(f"has both '{fmt.FEATURES}' and '{fmt.FEATURES_CSR}' (one expected)")
        if not dense and not csr:
            raise self._fail(f"missing dataset '{fmt.FEATURES}' (or group '{fmt.FEATURES_CSR}')")
        if dense:
            return self.dataset(fmt.FEATURES, (n, f), "f"), None
        self.dataset(f"{fmt.FEATURES_CSR}/{fmt.INDPTR}", (n + 1,), "iu")
        nnz = len(self.dataset(f"{fmt.FEATURES_CSR}/{fmt.INDICES}", (None,), "iu"))
        return self.dataset(f"{fmt.FEATURES_CSR}/{fmt.DATA}", (nnz,), "f"), nnz

    # -- block reads ---------------------------------------------------------------------
    def _read(self, name: str, sel: slice | tuple) -> np.ndarray:
        try:
            return self._h5[name][sel]
        except (OSError, ValueError, KeyError) as err:
            raise self._fail(
                f"cannot read dataset '{name}' (truncated or corrupt?): {err}"
            ) from err

    def read_indptr(self, row_lo: int, row_hi: int, transpose: bool = False) -> np.ndarray:
        """Return ``indptr[row_lo : row_hi + 1]`` of ``A`` (or ``A^T``) as int64."""
        group = self._adjacency_group(transpose)
        return self._read(f"{group}/{fmt.INDPTR}", slice(row_lo, row_hi + 1)).astype(np.int64)

    def read_csr(
        self, row_lo: int, row_hi: int, transpose: bool = False, weights: bool = False
    ) -> sp.csr_matrix:
        """Read rows ``[row_lo, row_hi)`` of ``A`` (or of ``A^T``) as a CSR block.

        The result has shape ``(row_hi - row_lo, num_nodes)``. Its values are float32 ones
        (the default: the pattern only), or with ``weights`` the stored edge weights
        (float32 or float64 as stored; float32 ones when the file has none), checked to be
        finite. Indices are checked to lie in range; ``indptr`` to be monotone over the block.
        """
        n = self.meta.num_nodes
        if not 0 <= row_lo <= row_hi <= n:
            raise ValueError(f"row range [{row_lo}, {row_hi}) outside [0, {n})")
        group = self._adjacency_group(transpose)
        ptr = self.read_indptr(row_lo, row_hi, transpose)
        if np.any(np.diff(ptr) < 0) or ptr[0] < 0 or ptr[-1] > self.meta.num_edges:
            raise self._fail(f"'{group}/{fmt.INDPTR}' is not monotone within [0, num_edges]")
        span = slice(int(ptr[0]), int(ptr[-1]))
        idx = self._read(f"{group}/{fmt.INDICES}", span)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = idx.min() if idx.min() < 0 else idx.max()
            raise self._fail(f"'{group}/{fmt.INDICES}' has vertex id {bad} out of range [0, {n})")
        ptr = ptr - ptr[0]
        if weights and self.meta.weighted:
            data = self._read(f"{group}/{fmt.DATA}", span)
            data = data.astype(fmt.sparse_dtype(data.dtype), copy=False)
            row = first_nonfinite_row(data, ptr)
            if row is not None:
                raise self._fail(weights_problem(row_lo + row, group))
        else:
            data = np.ones(idx.size, dtype=np.float32)
        return sp.csr_matrix((data, idx, ptr), shape=(row_hi - row_lo, n))

    def read_features(self, row_lo: int, row_hi: int) -> np.ndarray:
        """Read feature rows ``[row_lo, row_hi)`` as a dense block; fails on NaN or Inf."""
        if self.meta.feature_nnz is not None:
            return self.read_feature_csr(row_lo, row_hi).toarray()
        x = self._read(fmt.FEATURES, np.s_[row_lo:row_hi])
        if not np.isfinite(x).all():
            raise self._not_finite(row_lo + int(np.argwhere(~np.isfinite(x))[0, 0]))
        return x

    def _not_finite(self, vertex: int) -> InputError:
        return self._fail(f"features contain NaN or Inf (first at vertex {vertex})")

    def read_feature_csr(self, row_lo: int, row_hi: int) -> sp.csr_matrix:
        """Read feature rows ``[row_lo, row_hi)`` as CSR (a dense file's block, converted).

        A CSR file's block is read as it is stored: ``indptr`` checked monotone, column
        indices in range, values finite.
        """
        if self.meta.feature_nnz is None:
            x = self.read_features(row_lo, row_hi)
            return sp.csr_matrix(x.astype(fmt.sparse_dtype(x.dtype), copy=False))
        g, f = fmt.FEATURES_CSR, self.meta.num_features
        ptr = self._read(f"{g}/{fmt.INDPTR}", slice(row_lo, row_hi + 1)).astype(np.int64)
        if np.any(np.diff(ptr) < 0) or ptr[0] < 0 or ptr[-1] > self.meta.feature_nnz:
            raise self._fail(f"'{g}/{fmt.INDPTR}' is not monotone within [0, nonzeros]")
        span = slice(int(ptr[0]), int(ptr[-1]))
        idx = self._read(f"{g}/{fmt.INDICES}", span)
        if idx.size and (idx.min() < 0 or idx.max() >= f):
            bad = idx.min() if idx.min() < 0 else idx.max()
            raise self._fail(f"'{g}/{fmt.INDICES}' has feature column {bad} out of range [0, {f})")
        data = self._read(f"{g}/{fmt.DATA}", span)
        data = data.astype(fmt.sparse_dtype(data.dtype), copy=False)
        row = first_nonfinite_row(data, ptr - ptr[0])
        if row is not None:
            raise self._not_finite(row_lo + row)
        return sp.csr_matrix((data, idx, ptr - ptr[0]), shape=(row_hi - row_lo, f))

    def read_labels(self, row_lo: int, row_hi: int) -> np.ndarray:
        """Read class ids of rows ``[row_lo, row_hi)`` (``-1`` = unlabelled).

        A multi-label file's rows of its 0/1 matrix instead: ``(row_hi - row_lo, C)`` uint8,
        every value checked to be 0 or 1.
        """
        if self.meta.multi_label:
            y = self._read(fmt.LABELS, np.s_[row_lo:row_hi])
            bad = np.argwhere((y != 0) & (y != 1))
            if bad.size:
                r, k = (int(v) for v in bad[0])
                raise self._fail(f"multi-label target {y[r, k]} of vertex {row_lo + r}, class"
                                 f" {k} is not 0 or 1")
            return y.astype(fmt.MULTI_LABEL_DTYPE)
        y = self._read(fmt.LABELS, slice(row_lo, row_hi)).astype(np.int64)
        c = self.meta.num_classes
        if y.size and (y.min() < fmt.UNLABELLED or y.max() >= c):
            bad = y.min() if y.min() < fmt.UNLABELLED else y.max()
            raise self._fail(f"label {bad} out of range [0, {c}) (or -1 for unlabelled)")
        return y

    def read_mask(self, name: str, row_lo: int, row_hi: int) -> np.ndarray:
        """Read the ``train``, ``val`` or ``test`` mask of rows ``[row_lo, row_hi)``."""
        if name not in fmt.MASK_NAMES:
            raise ValueError(f"unknown mask {name!r}")
        return self._read(f"{fmt.MASKS}/{name}", slice(row_lo, row_hi)).astype(bool)

    def read_node_ids(self, row_lo: int, row_hi: int) -> np.ndarray:
        """Read the original ids of rows ``[row_lo, row_hi)``."""
        return self._read(fmt.NODE_IDS, slice(row_lo, row_hi)).astype(np.int64)

    def read_partition_perm(self, row_lo: int = 0, row_hi: int | None = None) -> np.ndarray:
        """Read ``perm[row_lo:row_hi]`` of the partition (``perm[new] = old``; default: all)."""
        if self.meta.partition_offsets is None:
            raise self._fail("file has no partition")
        name = f"{fmt.PARTITION}/{fmt.PART_PERM}"
        return self._read(name, slice(row_lo, row_hi)).astype(np.int64)

    def _adjacency_group(self, transpose: bool) -> str:
        if transpose and self.meta.directed:
            return fmt.ADJACENCY_T
        return fmt.ADJACENCY
