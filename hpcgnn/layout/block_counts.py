"""Nonzeros and halo sizes of every block of a contiguous vertex partition (pure NumPy).

``hpcgnn partition`` records them in the file for each block count the partition can be
coarsened to (``partition/blocks/<B>``, see ``docs/format.md``), so the memory check knows
the busiest rank's blocks before training (:func:`hpcgnn.cost.ranking.memory_parts`); the
halo cost model counts the same pairs from a file (:func:`hpcgnn.cost.halo.halo_volumes`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import scipy.sparse as sp

from hpcgnn.layout.blocks import merge_offsets, owner_of

#: The counts of :class:`BlockCounts`, in order: the names of the file's datasets.
COUNT_NAMES = ("in_edges", "out_edges", "fwd_recv", "fwd_send", "bwd_recv", "bwd_send")


@dataclass(frozen=True)
class BlockCounts:
    """Per block ``b`` of a contiguous vertex partition (one entry each; self loops not counted).

    Attributes
    ----------
    in_edges, out_edges
        Stored entries of ``A^T``'s and of ``A``'s rows of the block (edges into and out
        of its vertices).
    fwd_recv, fwd_send
        The halo of ``A^T``'s rows: distinct remote vertices the block needs (what it
        receives in the halo forward gather), and ``(vertex, block)`` pairs of its own
        vertices in other blocks' halos (what it sends).
    bwd_recv, bwd_send
        The same for ``A``'s rows (a pulled backward).
    """

    in_edges: tuple[int, ...]
    out_edges: tuple[int, ...]
    fwd_recv: tuple[int, ...]
    fwd_send: tuple[int, ...]
    bwd_recv: tuple[int, ...]
    bwd_send: tuple[int, ...]

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> BlockCounts:
        """From one integer array per :data:`COUNT_NAMES`."""
        return cls(**{k: tuple(int(v) for v in arrays[k]) for k in COUNT_NAMES})

    def arrays(self) -> dict[str, np.ndarray]:
        """One int64 array per :data:`COUNT_NAMES` (as the file stores them)."""
        return {f.name: np.asarray(getattr(self, f.name), dtype=np.int64) for f in fields(self)}


def remote_columns(indices: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Sorted, distinct ``indices`` outside ``[lo, hi)`` (global ids, int64): a block's halo."""
    cols = np.unique(np.asarray(indices, dtype=np.int64))
    return cols[(cols < lo) | (cols >= hi)]


def halo_pairs(rows: sp.csr_matrix, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per block of ``offsets``: distinct remote columns of its rows, and its sent pairs.

    ``rows``: all rows of the matrix (global ids). Returns ``(recv, send)``: ``recv[b]``
    remote vertices block ``b``'s rows touch, ``send[b]`` pairs ``(v, d)`` with ``v`` in
    block ``b`` and in block ``d``'s halo. One block's columns at a time.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    parts = len(offsets) - 1
    recv = np.zeros(parts, dtype=np.int64)
    send = np.zeros(parts, dtype=np.int64)
    for b in range(parts):
        lo, hi = int(offsets[b]), int(offsets[b + 1])
        halo = remote_columns(rows.indices[rows.indptr[lo] : rows.indptr[hi]], lo, hi)
        recv[b] = len(halo)
        send += np.bincount(owner_of(halo, offsets), minlength=parts)
    return recv, send


def block_counts(a: sp.csr_matrix, a_t: sp.csr_matrix, offsets: np.ndarray) -> BlockCounts:
    """The :class:`BlockCounts` of the blocks ``offsets`` of the graph ``A`` (and ``A^T``)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    fwd_recv, fwd_send = halo_pairs(a_t, offsets)
    # an undirected graph's A is its A^T: count once
    bwd_recv, bwd_send = (fwd_recv, fwd_send) if a is a_t else halo_pairs(a, offsets)
    return BlockCounts.from_arrays(
        {
            "in_edges": np.diff(np.asarray(a_t.indptr, dtype=np.int64)[offsets]),
            "out_edges": np.diff(np.asarray(a.indptr, dtype=np.int64)[offsets]),
            "fwd_recv": fwd_recv,
            "fwd_send": fwd_send,
            "bwd_recv": bwd_recv,
            "bwd_send": bwd_send,
        }
    )


def coarsenings(parts: int) -> list[int]:
    """Every block count a partition of ``parts`` parts is followed at: its divisors."""
    return [b for b in range(1, parts + 1) if parts % b == 0]


def partition_block_counts(
    a: sp.csr_matrix, a_t: sp.csr_matrix, partition: np.ndarray
) -> dict[int, BlockCounts]:
    """:func:`block_counts` at every coarsening of ``partition`` (offsets), by block count.

    The blocks a run of ``B`` ranks takes (:func:`hpcgnn.layout.blocks.vertex_offsets`).
    """
    partition = np.asarray(partition, dtype=np.int64)
    parts = len(partition) - 1
    return {b: block_counts(a, a_t, merge_offsets(partition, b)) for b in coarsenings(parts)}
