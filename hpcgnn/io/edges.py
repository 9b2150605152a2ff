"""External-memory edge sorting: turn an unordered stream of edges into CSR rows.

Generators and converters produce edges in arbitrary order, possibly with duplicates and
self loops, and possibly more than fit in memory at once. :class:`EdgeSorter` spills them
into temporary bucket files by row range, then sorts and de-duplicates one bucket at a
time, so peak memory is about one bucket plus O(n), never O(nnz) for the whole graph.
Edges may carry weights: the weights of an edge's duplicates are summed.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpcgnn.errors import InputError
from hpcgnn.io.format import index_dtype, weight_dtype
from hpcgnn.utils.files import new_temporary, output_errors, remove_temporary, write_array

#: Edges per bucket aimed for; a bucket is sorted in memory.
EDGES_PER_BUCKET = 1 << 23
#: Memory per edge of the bucket being sorted, about.
BYTES_PER_EDGE = 40


@dataclass
class CsrRows:
    """A contiguous block of CSR rows ``[row_start, row_start + len(counts))``."""

    row_start: int
    counts: np.ndarray  # int64, entries per row
    indices: np.ndarray  # column ids, sorted within each row
    data: np.ndarray | None = None  # the weight of each entry of indices; None: unweighted


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sort the 1-D array ``values`` in place and return its distinct values.

    Sorts and drops repeats; unlike :func:`numpy.unique`, whose hash-based path in
    NumPy 2.3+ is tens of times slower on millions of mostly distinct ids.
    """
    values.sort()
    if values.size < 2:
        return values
    keep = np.empty(values.size, dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def summed_duplicates(keys: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``keys`` in increasing order, and the summed weights of each.

    The weights of one key are summed in float64 in increasing order of weight, so the sum
    depends only on the multiset of weights, never on the order the records came in: the
    two directions of an undirected edge, and an entry of ``A`` and of ``A^T``, get the
    same bits.
    """
    order = np.lexsort((weights, keys))
    keys = keys[order]
    values = weights[order].astype(np.float64)
    if keys.size < 2:
        return keys, values
    first = np.empty(keys.size, dtype=bool)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    return keys[starts], np.add.reduceat(values, starts)


class _Buckets:
    """Append-only binary spill files, one (rows, cols[, weights]) per row range."""

    def __init__(
        self, directory: Path, tag: str, num_nodes: int, num_buckets: int,
        weights: np.dtype | None = None,
    ) -> None:
        self.directory = directory
        self.num_nodes = num_nodes
        self.rows_per_bucket = max(1, math.ceil(num_nodes / num_buckets))
        self.num_buckets = max(1, math.ceil(num_nodes / self.rows_per_bucket))
        self.dtype = index_dtype(num_nodes)
        self.weights = weights
        kinds = ("rows", "cols") + (("weights",) if weights is not None else ())
        self.paths = [
            tuple(directory / f"{tag}{b}.{kind}" for kind in kinds)
            for b in range(self.num_buckets)
        ]
        self.count = 0

    def add(self, rows: np.ndarray, cols: np.ndarray, weights: np.ndarray | None = None) -> None:
        bucket = rows // self.rows_per_bucket
        order = np.argsort(bucket, kind="stable")
        bucket = bucket[order]
        columns = [a[order].astype(self.dtype, copy=False) for a in (rows, cols)]
        if weights is not None:
            columns.append(weights[order])
        bounds = np.searchsorted(bucket, np.arange(self.num_buckets + 1))
        for b in range(self.num_buckets):
            lo, hi = bounds[b], bounds[b + 1]
            if hi > lo:
                with self.errors():
                    for path, values in zip(self.paths[b], columns, strict=True):
                        with open(path, "ab") as f:
                            write_array(f, values[lo:hi])
        self.count += len(rows)

    def errors(self) -> AbstractContextManager[None]:
        """Report a failed write or read of a spill file as an ``OutputError``."""
        return output_errors(self.directory, "temporary edge files in")

    def _take(self, b: int) -> list[np.ndarray]:
        """Read and delete bucket ``b``'s spill files: rows, columns[, weights]."""
        arrays = []
        for path, dtype in zip(self.paths[b], (self.dtype, self.dtype, self.weights),
                               strict=False):
            with self.errors():
                arrays.append(np.fromfile(path, dtype=dtype))
            path.unlink()
        return arrays

    def rows(self) -> Iterator[CsrRows]:
        n = self.num_nodes
        for b in range(self.num_buckets):
            lo = b * self.rows_per_bucket
            hi = min(n, lo + self.rows_per_bucket)
            if not self.paths[b][0].exists():
                weights = None if self.weights is None else np.empty(0, dtype=self.weights)
                yield CsrRows(lo, np.zeros(hi - lo, np.int64), np.empty(0, self.dtype), weights)
                continue
            r, c, *w = self._take(b)
            keep = r != c  # self loops are implied by the GCN normalisation
            key = (r[keep].astype(np.int64) - lo) * n + c[keep]
            del r, c
            data = None
            if w:
                key, data = summed_duplicates(key, w[0][keep])
                data = self._stored(data, lo, key)
            else:
                key = sorted_unique(key)
            local_rows = key // n
            cols = (key - local_rows * n).astype(self.dtype)
            counts = np.bincount(local_rows, minlength=hi - lo).astype(np.int64)
            yield CsrRows(lo, counts, cols, data)

    def _stored(self, sums: np.ndarray, lo: int, key: np.ndarray) -> np.ndarray:
        """Summed weights as stored; a sum beyond the weight dtype's range is an error."""
        with np.errstate(over="ignore"):
            data = sums.astype(self.weights)
        bad = np.flatnonzero(~np.isfinite(data))
        if bad.size:
            k = int(key[bad[0]])
            raise InputError(
                f"the weights of the repeated edge {lo + k // self.num_nodes} -> "
                f"{k % self.num_nodes} sum to {sums[bad[0]]:g}, beyond {self.weights}"
            )
        return data


class EdgeSorter:
    """Collect edges in any order and emit the CSR of ``A`` (and of ``A^T`` if directed).

    Parameters
    ----------
    num_nodes
        Number of vertices; every id must lie in ``[0, num_nodes)``.
    directed
        If ``False`` each edge is stored in both directions (``A`` is symmetric) and
        :meth:`transpose_rows` is unavailable.
    expected_edges
        Hint used to size the buckets so that each holds about ``EDGES_PER_BUCKET`` edges.
    tmpdir
        Where spill files go (default: the system temporary directory).
    weights
        ``None`` (default): unweighted edges. Else every edge carries a weight, stored as
        :func:`~hpcgnn.io.format.weight_dtype` of this dtype (float64 stays, anything
        else becomes float32).

    Notes
    -----
    Self loops are dropped (with their weights). Duplicate edges are stored once; the
    weights of an edge's duplicates are summed (in float64, then stored in the weight
    dtype), the same sum for ``A`` and ``A^T`` and for both directions of an undirected
    edge. Use as a context manager so the spill directory is removed even on error.
    """

    def __init__(
        self,
        num_nodes: int,
        directed: bool,
        expected_edges: int = 0,
        tmpdir: str | os.PathLike | None = None,
        weights: np.dtype | type | None = None,
    ) -> None:
        if num_nodes <= 0:
            raise InputError(f"a graph needs at least one vertex, got num_nodes={num_nodes}")
        self.num_nodes = int(num_nodes)
        self.directed = directed
        #: The stored dtype of the edge weights, or ``None``: unweighted.
        self.weight_dtype = None if weights is None else weight_dtype(weights)
        stored = expected_edges * (1 if directed else 2)
        num_buckets = max(1, math.ceil(stored / EDGES_PER_BUCKET))
        with output_errors(tmpdir or tempfile.gettempdir(), "temporary edge files in"):
            self._dir = new_temporary(tmpdir, "hpcgnn-edges-", is_dir=True)
        n, w = self.num_nodes, self.weight_dtype
        self._fwd = _Buckets(self._dir, "a", n, num_buckets, w)
        self._rev = _Buckets(self._dir, "t", n, num_buckets, w) if directed else None

    def __enter__(self) -> EdgeSorter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the spill directory."""
        remove_temporary(self._dir)

    @property
    def edges_added(self) -> int:
        """Number of (directed) edge records added so far, duplicates included."""
        return self._fwd.count if self.directed else self._fwd.count // 2

    def add(
        self, src: np.ndarray, dst: np.ndarray, source: str | os.PathLike | None = None,
        weights: np.ndarray | None = None,
    ) -> None:
        """Add the edges ``src[k] -> dst[k]``; ids are checked against ``num_nodes``.

        ``source``, the file the edges come from, is named when an id is out of range or a
        weight is not finite. ``weights[k]`` is the weight of edge ``k``: required by a
        weighted sorter, refused by an unweighted one.
        """
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        if src.shape != dst.shape:
            raise InputError(
                f"edge source and target arrays differ in length: {src.size} vs {dst.size}"
            )
        w = self._weights(weights, src.size, source)
        if src.size == 0:
            return
        lo = min(src.min(), dst.min())
        hi = max(src.max(), dst.max())
        if lo < 0 or hi >= self.num_nodes:
            bad = lo if lo < 0 else hi
            what = "edge endpoint" if source is None else f"{source}: vertex id"
            raise InputError(f"{what} {bad} is out of range [0, {self.num_nodes})")
        if self.directed:
            self._fwd.add(src, dst, w)
            assert self._rev is not None
            self._rev.add(dst, src, w)
        else:
            both = None if w is None else np.concatenate([w, w])
            self._fwd.add(np.concatenate([src, dst]), np.concatenate([dst, src]), both)

    def _weights(
        self, weights: np.ndarray | None, size: int, source: str | os.PathLike | None
    ) -> np.ndarray | None:
        """``weights`` in the stored dtype, checked: one per edge, each finite there."""
        if (weights is None) != (self.weight_dtype is None):
            raise ValueError("a weighted sorter takes weights, an unweighted one none")
        if weights is None:
            return None
        given = np.asarray(weights).ravel()
        if given.size != size:
            raise InputError(f"edge weights and endpoints differ in length: {given.size} vs {size}")
        with np.errstate(over="ignore", invalid="ignore"):
            w = given.astype(self.weight_dtype)
        bad = np.flatnonzero(~np.isfinite(w))
        if bad.size:
            where = "" if source is None else f"{source}: "
            raise InputError(f"{where}edge weight {given[bad[0]]} is not a finite {w.dtype}")
        return w

    def rows(self) -> Iterator[CsrRows]:
        """Yield the CSR of ``A`` in row order, one bucket at a time (consumes the spill)."""
        return self._fwd.rows()

    def transpose_rows(self) -> Iterator[CsrRows]:
        """Yield the CSR of ``A^T`` in row order (directed graphs only)."""
        if self._rev is None:
            raise ValueError("an undirected graph has no separate transpose")
        return self._rev.rows()
