"""The communication relation of a partitioned graph: who owns each vertex, who needs it.

The destination sets are sparse (CSR of ``(vertex, rank)`` pairs), so a relation has no
cap on the number of ranks: its memory is one entry per pair to deliver.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hpcgnn.layout.blocks import owner_of


@dataclass(frozen=True)
class Relation:
    """Source rank and destination set of every vertex.

    Attributes
    ----------
    offsets : numpy.ndarray
        Row block offsets (length ``parts + 1``); rank ``r`` owns ``[offsets[r], offsets[r+1])``.
    source : numpy.ndarray
        ``source[u]`` = rank owning ``u`` (``s_u``), int64.
    dest_ptr : numpy.ndarray
        CSR row pointer (length ``n + 1``, int64) into ``dest_ranks``.
    dest_ranks : numpy.ndarray
        ``dest_ranks[dest_ptr[u]:dest_ptr[u+1]]`` = the ranks other than ``s_u`` owning an
        out-neighbour of ``u`` (``D_u``), ascending, int64.
    """

    offsets: np.ndarray
    source: np.ndarray
    dest_ptr: np.ndarray
    dest_ranks: np.ndarray

    @property
    def parts(self) -> int:
        """Number of ranks."""
        return len(self.offsets) - 1

    @property
    def num_dests(self) -> np.ndarray:
        """``|D_u|`` of every vertex (int64)."""
        return np.diff(self.dest_ptr)

    def dests(self, u: int) -> np.ndarray:
        """``D_u``, ascending."""
        return self.dest_ranks[self.dest_ptr[u] : self.dest_ptr[u + 1]]

    def pair_vertices(self) -> np.ndarray:
        """The vertex of every ``(vertex, rank)`` pair, aligned with ``dest_ranks``."""
        return np.repeat(np.arange(len(self.source), dtype=np.int64), self.num_dests)

    def pair_counts(self) -> np.ndarray:
        """``V[i, j]`` = number of vertices rank ``i`` must deliver to rank ``j``."""
        k = self.parts
        key = self.source[self.pair_vertices()] * k + self.dest_ranks
        return np.bincount(key, minlength=k * k).reshape(k, k).astype(np.int64)


def relation_from_pairs(
    offsets: np.ndarray, vertices: np.ndarray, ranks: np.ndarray, n: int | None = None
) -> Relation:
    """Build a :class:`Relation` from ``(vertex, rank)`` pairs.

    Pairs may repeat and may name the vertex's own rank (both are dropped). ``n`` (default
    ``offsets[-1]``) is the number of vertices.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    k = len(offsets) - 1
    n = int(offsets[-1]) if n is None else n
    source = owner_of(np.arange(n, dtype=np.int64), offsets).astype(np.int64)
    key = np.unique(np.asarray(vertices, dtype=np.int64) * k + np.asarray(ranks, dtype=np.int64))
    v, r = key // k, key % k
    keep = source[v] != r
    v, r = v[keep], r[keep]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(v, minlength=n), out=ptr[1:])
    return Relation(offsets, source, ptr, r)


def block_pairs(block: sp.csr_matrix, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(row, part)`` pairs of a CSR block: the parts owning the columns of each row."""
    rows = np.repeat(np.arange(block.shape[0], dtype=np.int64), np.diff(block.indptr))
    return rows, owner_of(block.indices, offsets)


def relation_from_file(gf, offsets: np.ndarray, block_rows: int = 1 << 16) -> Relation:
    """Compute the relation of a :class:`~hpcgnn.io.reader.GraphFile` by row blocks of A.

    ``D_u`` holds the parts owning some ``v`` with an edge ``u -> v`` (``A[u, v] != 0``),
    i.e. the ranks whose vertices aggregate from ``u``, minus ``s_u``. Memory: one entry
    per distinct ``(u, part)`` pair, whatever the number of parts.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    k = len(offsets) - 1
    n = gf.meta.num_nodes
    keys = [np.zeros(0, dtype=np.int64)]
    for lo in range(0, n, block_rows):
        rows, parts = block_pairs(gf.read_csr(lo, min(n, lo + block_rows)), offsets)
        keys.append(np.unique((rows + lo) * k + parts))
    key = np.concatenate(keys)
    return relation_from_pairs(offsets, key // k, key % k, n)


def relation_from_edges(
    n: int, src: np.ndarray, dst: np.ndarray, offsets: np.ndarray
) -> Relation:
    """Relation of an in-memory edge list (``src[i] -> dst[i]``)."""
    a = sp.csr_matrix(
        (np.ones(len(src), dtype=np.float32), (np.asarray(src), np.asarray(dst))), shape=(n, n)
    )
    rows, parts = block_pairs(a, np.asarray(offsets))
    return relation_from_pairs(offsets, rows, parts, n)


def signature_groups(relation: Relation) -> list[tuple[int, tuple[int, ...], np.ndarray]]:
    """Vertices needing communication grouped by ``(s_u, D_u)``: ``(source, dests, ids)``.

    Groups are ordered by source, then by ``D_u`` read as the binary number
    ``sum_{d in D_u} 2^d`` (the order of the former bit-mask relation); ids ascend. The
    sort key packs each boundary vertex's set into ``ceil(parts / 64)`` words, built only
    for the sort.
    """
    need = np.flatnonzero(relation.num_dests)
    if not len(need):
        return []
    words = (relation.parts + 63) // 64
    at = np.searchsorted(need, relation.pair_vertices())
    r = relation.dest_ranks
    key = np.zeros((len(need), words), dtype=np.uint64)
    np.bitwise_or.at(
        key, (at, r // 64), np.left_shift(np.uint64(1), (r % 64).astype(np.uint64))
    )
    s = relation.source[need]
    order = np.lexsort((*key.T, s))
    key, s, ids = key[order], s[order], need[order]
    differs = (s[1:] != s[:-1]) | np.any(key[1:] != key[:-1], axis=1)
    cut = np.flatnonzero(np.r_[True, differs, True])
    return [
        (int(s[a]), tuple(relation.dests(int(ids[a])).tolist()), ids[a:b])
        for a, b in zip(cut[:-1], cut[1:], strict=True)
    ]
