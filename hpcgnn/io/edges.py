"""External-memory edge sorting: turn an unordered stream of edges into CSR rows.

Generators and converters produce edges in arbitrary order, possibly with duplicates and
self loops, and possibly more than fit in memory at once. :class:`EdgeSorter` spills them
into temporary bucket files by row range, then sorts and de-duplicates one bucket at a
time, so peak memory is about one bucket plus O(n), never O(nnz) for the whole graph.
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
from hpcgnn.io.format import index_dtype
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


class _Buckets:
    """Append-only binary spill files, one pair (rows, cols) per row range."""

    def __init__(self, directory: Path, tag: str, num_nodes: int, num_buckets: int) -> None:
        self.directory = directory
        self.num_nodes = num_nodes
        self.rows_per_bucket = max(1, math.ceil(num_nodes / num_buckets))
        self.num_buckets = max(1, math.ceil(num_nodes / self.rows_per_bucket))
        self.dtype = index_dtype(num_nodes)
        self.paths = [
            (directory / f"{tag}{b}.rows", directory / f"{tag}{b}.cols")
            for b in range(self.num_buckets)
        ]
        self.count = 0

    def add(self, rows: np.ndarray, cols: np.ndarray) -> None:
        bucket = rows // self.rows_per_bucket
        order = np.argsort(bucket, kind="stable")
        bucket, rows, cols = bucket[order], rows[order], cols[order]
        bounds = np.searchsorted(bucket, np.arange(self.num_buckets + 1))
        for b in range(self.num_buckets):
            lo, hi = bounds[b], bounds[b + 1]
            if hi > lo:
                rpath, cpath = self.paths[b]
                with self.errors(), open(rpath, "ab") as fr, open(cpath, "ab") as fc:
                    write_array(fr, rows[lo:hi].astype(self.dtype, copy=False))
                    write_array(fc, cols[lo:hi].astype(self.dtype, copy=False))
        self.count += len(rows)

    def errors(self) -> AbstractContextManager[None]:
        """Report a failed write or read of a spill file as an ``OutputError``."""
        return output_errors(self.directory, "temporary edge files in")

    def rows(self) -> Iterator[CsrRows]:
        n = self.num_nodes
        for b, (rpath, cpath) in enumerate(self.paths):
            lo = b * self.rows_per_bucket
            hi = min(n, lo + self.rows_per_bucket)
            if rpath.exists():
                with self.errors():
                    r = np.fromfile(rpath, dtype=self.dtype).astype(np.int64)
                    c = np.fromfile(cpath, dtype=self.dtype).astype(np.int64)
                rpath.unlink()
                cpath.unlink()
                keep = r != c  # self loops are implied by the GCN normalisation
                key = sorted_unique((r[keep] - lo) * n + c[keep])
                del r, c, keep
                local_rows = key // n
                cols = (key - local_rows * n).astype(self.dtype)
                counts = np.bincount(local_rows, minlength=hi - lo).astype(np.int64)
            else:
                cols = np.empty(0, dtype=self.dtype)
                counts = np.zeros(hi - lo, dtype=np.int64)
            yield CsrRows(lo, counts, cols)


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

    Notes
    -----
    Duplicate edges and self loops are dropped. Use as a context manager so the spill
    directory is removed even on error.
    """

    def __init__(
        self,
        num_nodes: int,
        directed: bool,
        expected_edges: int = 0,
        tmpdir: str | os.PathLike | None = None,
    ) -> None:
        if num_nodes <= 0:
            raise InputError(f"a graph needs at least one vertex, got num_nodes={num_nodes}")
        self.num_nodes = int(num_nodes)
        self.directed = directed
        stored = expected_edges * (1 if directed else 2)
        num_buckets = max(1, math.ceil(stored / EDGES_PER_BUCKET))
        with output_errors(tmpdir or tempfile.gettempdir(), "temporary edge files in"):
            self._dir = new_temporary(tmpdir, "hpcgnn-edges-", is_dir=True)
        self._fwd = _Buckets(self._dir, "a", self.num_nodes, num_buckets)
        self._rev = _Buckets(self._dir, "t", self.num_nodes, num_buckets) if directed else None

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
        self, src: np.ndarray, dst: np.ndarray, source: str | os.PathLike | None = None
    ) -> None:
        """Add the edges ``src[k] -> dst[k]``; ids are checked against ``num_nodes``.

        ``source``, the file the edges come from, is named when an id is out of range.
        """
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        if src.shape != dst.shape:
            raise InputError(
                f"edge source and target arrays differ in length: {src.size} vs {dst.size}"
            )
        if src.size == 0:
            return
        lo = min(src.min(), dst.min())
        hi = max(src.max(), dst.max())
        if lo < 0 or hi >= self.num_nodes:
            bad = lo if lo < 0 else hi
            what = "edge endpoint" if source is None else f"{source}: vertex id"
            raise InputError(f"{what} {bad} is out of range [0, {self.num_nodes})")
        if self.directed:
            self._fwd.add(src, dst)
            assert self._rev is not None
            self._rev.add(dst, src)
        else:
            self._fwd.add(np.concatenate([src, dst]), np.concatenate([dst, src]))

    def rows(self) -> Iterator[CsrRows]:
        """Yield the CSR of ``A`` in row order, one bucket at a time (consumes the spill)."""
        return self._fwd.rows()

    def transpose_rows(self) -> Iterator[CsrRows]:
        """Yield the CSR of ``A^T`` in row order (directed graphs only)."""
        if self._rev is None:
            raise ValueError("an undirected graph has no separate transpose")
        return self._rev.rows()
