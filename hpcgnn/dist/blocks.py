"""Block distributions of vertex ranges."""

from __future__ import annotations

import numpy as np


def even_offsets(n: int, parts: int) -> np.ndarray:
    """Offsets ``o`` (length ``parts + 1``) splitting ``n`` items into near-equal blocks.

    The first ``n % parts`` blocks get one item more, so block sizes differ by at most 1.
    """
    base, extra = divmod(n, parts)
    sizes = np.full(parts, base, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def merge_offsets(offsets: np.ndarray, groups: int) -> np.ndarray:
    """Coarsen ``len(offsets) - 1`` consecutive parts into ``groups`` near-equal groups."""
    parts = len(offsets) - 1
    idx = even_offsets(parts, groups)
    return np.asarray(offsets)[idx]


def vertex_offsets(n: int, parts: int, partition: tuple[int, ...] | None) -> np.ndarray:
    """Offsets of ``parts`` row blocks, following a file's partition when it has one.

    A partition into exactly ``parts`` parts is used as is; one into a multiple of
    ``parts`` parts is coarsened; otherwise the rows are split evenly.
    """
    if partition is not None:
        k = len(partition) - 1
        if k == parts:
            return np.asarray(partition, dtype=np.int64)
        if k % parts == 0:
            return merge_offsets(np.asarray(partition, dtype=np.int64), parts)
    return even_offsets(n, parts)
