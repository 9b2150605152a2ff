"""Block distributions of vertex ranges, 1.5D stage chunks, column splits of sparse rows."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def even_offsets(n: int | np.ndarray, parts: int) -> np.ndarray:
    """Offsets ``o`` (length ``parts + 1``) splitting ``n`` items into near-equal blocks.

    The first ``n % parts`` blocks get one item more, so block sizes differ by at most 1.
    For an array ``n`` the offsets of every entry are returned at once, with shape
    ``(parts + 1, *n.shape)``.
    """
    base, extra = np.divmod(np.asarray(n, dtype=np.int64), parts)
    j = np.arange(parts + 1, dtype=np.int64).reshape(-1, *[1] * base.ndim)
    return j * base + np.minimum(j, extra)


def merge_offsets(offsets: np.ndarray, groups: int) -> np.ndarray:
    """Coarsen ``len(offsets) - 1`` consecutive parts into ``groups`` near-equal groups."""
    parts = len(offsets) - 1
    idx = even_offsets(parts, groups)
    return np.asarray(offsets)[idx]


def partition_fits(partition: tuple[int, ...], parts: int) -> bool:
    """Whether a partition gives ``parts`` blocks: it has ``parts`` parts or a multiple."""
    return (len(partition) - 1) % parts == 0


def vertex_offsets(n: int, parts: int, partition: tuple[int, ...] | None) -> np.ndarray:
    """Offsets of ``parts`` row blocks, following a file's partition when it has one.

    A partition into exactly ``parts`` parts is used as is; one into a multiple of
    ``parts`` parts is coarsened (consecutive parts merged); otherwise the rows are split
    evenly.
    """
    if partition is not None and partition_fits(partition, parts):
        return merge_offsets(np.asarray(partition, dtype=np.int64), parts)
    return even_offsets(n, parts)


def owner_of(vertices: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Block (rank, part, process row) owning each vertex under the contiguous ``offsets``."""
    return np.searchsorted(np.asarray(offsets, dtype=np.int64), vertices, side="right") - 1


def stage_chunks(num_blocks: int, c: int) -> np.ndarray:
    """Offsets of the ``c`` chunks of consecutive stages (block rows) of 1.5D."""
    return even_offsets(num_blocks, c)


def split_columns(a: sp.csr_matrix, offsets: np.ndarray) -> list[sp.csr_matrix]:
    """Split a CSR matrix into column blocks ``[offsets[k], offsets[k+1])`` (local column ids).

    Linear in ``nnz`` plus ``blocks x rows``: nonzeros are bucketed by block with a stable
    sort, which keeps them in row order (and sorted within rows) inside every block.
    """
    rows = a.shape[0]
    offsets = np.asarray(offsets, dtype=np.int64)
    if len(offsets) == 2:
        width = int(offsets[1] - offsets[0])
        return [sp.csr_matrix((a.data, a.indices - offsets[0], a.indptr), shape=(rows, width))]
    block_of = np.searchsorted(offsets, a.indices, side="right") - 1
    order = np.argsort(block_of, kind="stable")
    bounds = np.searchsorted(block_of[order], np.arange(len(offsets)))
    row_of = np.repeat(np.arange(rows, dtype=np.int64), np.diff(a.indptr))
    out = []
    for k in range(len(offsets) - 1):
        sel = order[bounds[k] : bounds[k + 1]]
        counts = np.bincount(row_of[sel], minlength=rows)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        width = int(offsets[k + 1] - offsets[k])
        cols = a.indices[sel] - offsets[k]
        out.append(sp.csr_matrix((a.data[sel], cols, indptr), shape=(rows, width)))
    return out
