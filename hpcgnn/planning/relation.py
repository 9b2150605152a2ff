"""The communication relation of a partitioned graph: who owns each vertex, who needs it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import ConfigError
from hpcgnn.layout.blocks import owner_of

MAX_PARTS = 62


@dataclass(frozen=True)
class Relation:
    """Source rank and destination set of every vertex.

    Attributes
    ----------
    offsets : numpy.ndarray
        Row block offsets (length ``parts + 1``); rank ``r`` owns ``[offsets[r], offsets[r+1])``.
    source : numpy.ndarray
        ``source[u]`` = rank owning ``u`` (``s_u``), int64.
    dest_mask : numpy.ndarray
        ``dest_mask[u]`` = bit set of ranks other than ``s_u`` owning an out-neighbour of
        ``u`` (``D_u``), int64.
    """

    offsets: np.ndarray
    source: np.ndarray
    dest_mask: np.ndarray

    @property
    def parts(self) -> int:
        """Number of ranks."""
        return len(self.offsets) - 1

    def pair_counts(self) -> np.ndarray:
        """``V[i, j]`` = number of vertices rank ``i`` must deliver to rank ``j``."""
        k = self.parts
        out = np.zeros((k, k), dtype=np.int64)
        for j in range(k):
            has = (self.dest_mask >> j) & 1 == 1
            out[:, j] = np.bincount(self.source[has], minlength=k)
        return out


def block_dest_mask(block: sp.csr_matrix, offsets: np.ndarray) -> np.ndarray:
    """Bit set of the parts owning the columns of each row of a CSR block (int64)."""
    rows = np.repeat(np.arange(block.shape[0], dtype=np.int64), np.diff(block.indptr))
    parts = owner_of(block.indices, offsets)
    k = len(offsets) - 1
    key = np.unique(rows * k + parts)
    bits = np.left_shift(np.int64(1), (key % k).astype(np.int64))
    mask = np.zeros(block.shape[0], dtype=np.int64)
    np.bitwise_or.at(mask, key // k, bits)
    return mask


def relation_from_file(gf, offsets: np.ndarray, block_rows: int = 1 << 16) -> Relation:
    """Compute the relation of a :class:`~hpcgnn.io.reader.GraphFile` by row blocks of A.

    ``D_u`` holds the parts owning some ``v`` with an edge ``u -> v`` (``A[u, v] != 0``),
    i.e. the ranks whose vertices aggregate from ``u``, minus ``s_u``.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    k = len(offsets) - 1
    if not 1 <= k <= MAX_PARTS:
        raise ConfigError(f"number of parts must be in 1..{MAX_PARTS}, got {k}")
    n = gf.meta.num_nodes
    mask = np.zeros(n, dtype=np.int64)
    for lo in range(0, n, block_rows):
        hi = min(n, lo + block_rows)
        mask[lo:hi] = block_dest_mask(gf.read_csr(lo, hi), offsets)
    return relation_from_masks(offsets, mask)


def relation_from_masks(offsets: np.ndarray, mask: np.ndarray) -> Relation:
    """Build a :class:`Relation` from per-vertex part masks (the own part is cleared)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    source = owner_of(np.arange(len(mask), dtype=np.int64), offsets).astype(np.int64)
    own = np.left_shift(np.int64(1), source)
    return Relation(offsets, source, np.asarray(mask, dtype=np.int64) & ~own)


def relation_from_edges(
    n: int, src: np.ndarray, dst: np.ndarray, offsets: np.ndarray
) -> Relation:
    """Relation of an in-memory edge list (``src[i] -> dst[i]``)."""
    a = sp.csr_matrix(
        (np.ones(len(src), dtype=np.float32), (np.asarray(src), np.asarray(dst))), shape=(n, n)
    )
    return relation_from_masks(offsets, block_dest_mask(a, np.asarray(offsets)))


def mask_to_ranks(mask: int) -> tuple[int, ...]:
    """Ranks set in a bit mask, ascending."""
    out = []
    r = 0
    while mask:
        if mask & 1:
            out.append(r)
        mask >>= 1
        r += 1
    return tuple(out)
