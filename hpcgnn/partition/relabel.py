"""Write a graph file relabelled so that every part is a contiguous range of vertex ids.

New ids are ordered by part and, within a part, by old id (a stable sort), so part ``k``
owns ids ``offsets[k] .. offsets[k+1] - 1``. ``perm[new] = old`` maps back; the file
stores it relative to the *original* numbering, so re-partitioning a partitioned file
composes the two permutations.

The adjacency is permuted in memory (rows and column indices, columns re-sorted within
each row, edge weights carried along); partitioning needs the whole graph on one process
anyway. Feature rows are
permuted in bounded memory: old rows are read in blocks and routed to buckets of new rows
(spilled to disk beside the output when the matrix exceeds ``feature_memory_bytes``), and
each bucket is then written in new order.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from hpcgnn.io import format as fmt
from hpcgnn.io.edges import CsrRows
from hpcgnn.io.reader import GraphFile
from hpcgnn.io.writer import GraphFileWriter
from hpcgnn.layout.block_counts import partition_block_counts
from hpcgnn.utils.files import new_temporary, output_errors, remove_temporary, write_array
from hpcgnn.utils.progress import Progress

#: Feature bytes held in memory at once while permuting rows (about twice this at peak).
FEATURE_MEMORY_BYTES = 1 << 29
#: Rows per CSR block handed to the writer.
_CSR_WRITE_ROWS = 1 << 20


def relabelling(parts: np.ndarray, num_parts: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(perm, offsets)`` that make every part a contiguous id range.

    ``perm[new] = old`` lists the vertices ordered by part, stable by old id within a
    part; part ``k`` gets new ids ``offsets[k] .. offsets[k+1] - 1``.
    """
    perm = np.argsort(parts, kind="stable").astype(np.int64)
    sizes = np.bincount(parts, minlength=num_parts)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return perm, offsets


def inverse_permutation(perm: np.ndarray) -> np.ndarray:
    """Return ``inv`` with ``inv[perm[i]] = i``."""
    inv = np.empty_like(perm)
    inv[perm] = np.arange(len(perm), dtype=perm.dtype)
    return inv


def permute_csr(matrix: sp.csr_matrix, perm: np.ndarray, inv: np.ndarray) -> sp.csr_matrix:
    """Return ``P A P^T``: new row ``i`` is old row ``perm[i]`` with columns renamed by ``inv``.

    Column indices are sorted within each row of the result.
    """
    out = matrix[perm]
    out.indices = inv[out.indices].astype(out.indices.dtype, copy=False)
    out.has_sorted_indices = False
    out.sort_indices()
    return out


def _csr_blocks(matrix: sp.csr_matrix, weighted: bool) -> Iterator[CsrRows]:
    n = matrix.shape[0]
    for lo in range(0, n, _CSR_WRITE_ROWS):
        hi = min(n, lo + _CSR_WRITE_ROWS)
        ptr = matrix.indptr[lo : hi + 1]
        span = slice(ptr[0], ptr[-1])
        data = matrix.data[span] if weighted else None
        yield CsrRows(lo, np.diff(ptr).astype(np.int64), matrix.indices[span], data)


class _RowBuckets:
    """Rows routed to buckets of new ids: in memory for one bucket, else spill files."""

    def __init__(self, num_buckets: int, num_features: int, dtype: np.dtype, tmpdir: Path):
        self.num_features = num_features
        self.dtype = dtype
        self._memory: list[tuple[np.ndarray, np.ndarray]] | None = None
        self._dir: Path | None = None
        self._tmpdir = tmpdir
        if num_buckets == 1:
            self._memory = []
        else:
            with self.errors():
                self._dir = new_temporary(tmpdir, ".hpcgnn-permute-", is_dir=True)

    def close(self) -> None:
        if self._dir is not None:
            remove_temporary(self._dir)

    def errors(self) -> AbstractContextManager[None]:
        """Report a failed write or read of a spill file as an ``OutputError``."""
        return output_errors(self._dir or self._tmpdir, "temporary feature files in")

    def add(self, bucket: int, ids: np.ndarray, rows: np.ndarray) -> None:
        if self._memory is not None:
            self._memory.append((ids, rows))
            return
        assert self._dir is not None
        with self.errors():
            with open(self._dir / f"{bucket}.ids", "ab") as f:
                write_array(f, ids.astype(np.int64, copy=False))
            with open(self._dir / f"{bucket}.rows", "ab") as f:
                write_array(f, rows.astype(self.dtype, copy=False))

    def take(self, bucket: int) -> tuple[np.ndarray, np.ndarray]:
        if self._memory is not None:
            parts, self._memory = self._memory, []
            if not parts:
                return np.empty(0, np.int64), np.empty((0, self.num_features), self.dtype)
            return (np.concatenate([p[0] for p in parts]),
                    np.concatenate([p[1] for p in parts]))
        assert self._dir is not None
        ids_path, rows_path = self._dir / f"{bucket}.ids", self._dir / f"{bucket}.rows"
        if not ids_path.exists():
            return np.empty(0, np.int64), np.empty((0, self.num_features), self.dtype)
        with self.errors():
            ids = np.fromfile(ids_path, dtype=np.int64)
            rows = np.fromfile(rows_path, dtype=self.dtype).reshape(-1, self.num_features)
        ids_path.unlink()
        rows_path.unlink()
        return ids, rows


def permute_features(
    src: GraphFile,
    writer: GraphFileWriter,
    inv: np.ndarray,
    *,
    memory_bytes: int = FEATURE_MEMORY_BYTES,
    tmpdir: str | os.PathLike | None = None,
    show_progress: bool = True,
) -> None:
    """Write the feature rows of ``src`` to ``writer`` in the new order.

    Parameters
    ----------
    src
        The file being relabelled.
    writer
        Receives rows ``0 .. n-1`` of the new numbering, in order.
    inv
        ``inv[old] = new``.
    memory_bytes
        Feature bytes to hold at once; larger matrices go through spill files.
    tmpdir
        Directory for spill files (default: the system temporary directory).
    show_progress
        Show progress bars on stderr.

    """
    meta = src.meta
    n, f = meta.num_nodes, meta.num_features
    dtype = meta.feature_dtype
    row_bytes = f * dtype.itemsize
    chunk = fmt.feature_chunk_rows(f, dtype.itemsize)
    bucket_rows = max(1, memory_bytes // row_bytes)
    num_buckets = -(-n // bucket_rows)
    read_rows = min(n, max(chunk, bucket_rows // chunk * chunk))
    buckets = _RowBuckets(num_buckets, f, dtype, Path(tmpdir or tempfile.gettempdir()))
    try:
        with Progress("routing feature rows", n, "rows", enabled=show_progress) as bar:
            for lo in range(0, n, read_rows):
                hi = min(n, lo + read_rows)
                rows = src.read_features(lo, hi)
                target = inv[lo:hi]
                which = target // bucket_rows
                order = np.argsort(which, kind="stable")
                bounds = np.searchsorted(which[order], np.arange(num_buckets + 1))
                for k in np.flatnonzero(np.diff(bounds)):
                    sel = order[bounds[k] : bounds[k + 1]]
                    buckets.add(int(k), target[sel], rows[sel])
                bar.update(hi - lo)
        with Progress("writing features", n, "rows", enabled=show_progress) as bar:
            for b in range(num_buckets):
                lo = b * bucket_rows
                hi = min(n, lo + bucket_rows)
                ids, rows = buckets.take(b)
                block = np.empty((hi - lo, f), dtype=dtype)
                block[ids - lo] = rows
                del ids, rows
                writer.write_features(lo, block)
                bar.update(hi - lo)
    finally:
        buckets.close()


def write_relabelled(
    src: GraphFile,
    out: str | os.PathLike,
    parts: np.ndarray,
    num_parts: int,
    method: str,
    edge_cut: int,
    *,
    adjacency: sp.csr_matrix | None = None,
    feature_memory_bytes: int = FEATURE_MEMORY_BYTES,
    show_progress: bool = True,
) -> np.ndarray:
    """Write ``src`` relabelled by ``parts`` to ``out``; return the stored permutation.

    Parameters
    ----------
    src
        The input file (validated by the caller).
    out
        Output path; written under a temporary name and renamed when complete.
    parts
        ``parts[v]`` in ``[0, num_parts)`` for every vertex ``v`` of ``src``.
    num_parts
        Number of parts ``K``.
    method, edge_cut
        Recorded as attributes of the ``partition`` group.
    adjacency
        ``A`` of ``src`` if the caller already holds it, with its edge weights if ``src``
        has them (otherwise it is read).
    feature_memory_bytes
        Memory budget for permuting feature rows.
    show_progress
        Show progress bars on stderr.

    Returns
    -------
    numpy.ndarray
        ``perm[new] = original id``, composed with any partition ``src`` already had.

    """
    meta = src.meta
    n = meta.num_nodes
    perm, offsets = relabelling(parts, num_parts)
    inv = inverse_permutation(perm)
    stored_perm = perm if meta.partition_offsets is None else src.read_partition_perm()[perm]
    out = Path(out)
    a = adjacency if adjacency is not None else src.read_csr(0, n, weights=meta.weighted)
    del adjacency
    with GraphFileWriter(
        out,
        num_nodes=n,
        num_features=meta.num_features,
        num_classes=meta.num_classes,
        directed=meta.directed,
        name=meta.name,
        source=meta.source,
        feature_dtype=meta.feature_dtype,
        show_progress=show_progress,
        sparse_features=meta.feature_nnz is not None,  # the input's layout kept
        feature_normalization=meta.feature_normalization,
        weight_dtype=a.dtype if meta.weighted else None,
        multi_label=meta.multi_label,
    ) as writer:
        a_new = permute_csr(a, perm, inv)
        del a
        writer.write_csr(fmt.ADJACENCY, _csr_blocks(a_new, meta.weighted))
        at_new = a_new
        if meta.directed:
            at_new = a_new.T.tocsr()
            at_new.sort_indices()
            writer.write_csr(fmt.ADJACENCY_T, _csr_blocks(at_new, meta.weighted))
        blocks = partition_block_counts(a_new, at_new, offsets)
        del a_new, at_new
        permute_features(src, writer, inv, memory_bytes=feature_memory_bytes,
                         tmpdir=out.parent, show_progress=show_progress)
        writer.write_labels(src.read_labels(0, n)[perm])
        writer.write_masks(*(src.read_mask(m, 0, n)[perm] for m in fmt.MASK_NAMES))
        writer.write_node_ids(src.read_node_ids(0, n)[perm])
        writer.write_partition(offsets, stored_perm, method, edge_cut, blocks)
    return stored_perm
