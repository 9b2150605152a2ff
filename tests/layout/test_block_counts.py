"""Nonzeros and halo sizes of a partition's blocks (:mod:`hpcgnn.layout.block_counts`)."""

import numpy as np
import scipy.sparse as sp

from hpcgnn.layout.block_counts import (
    COUNT_NAMES,
    BlockCounts,
    block_counts,
    coarsenings,
    halo_pairs,
    partition_block_counts,
)
from hpcgnn.layout.blocks import merge_offsets, owner_of

PARTITION = np.array([0, 3, 3, 9, 10, 14, 20, 21, 30])  # 8 uneven parts, one empty


def directed_graph(n: int = 30, edges: int = 120, seed: int = 4) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, edges), rng.integers(0, n, edges)
    keep = src != dst
    a = sp.csr_matrix((np.ones(keep.sum(), np.float32), (src[keep], dst[keep])), shape=(n, n))
    a.sum_duplicates()
    return a


def brute_force(rows: sp.csr_matrix, offsets: np.ndarray) -> tuple[list[int], list[int]]:
    """Per block: the remote columns of its rows; pairs (v, d) it owns in d's halo."""
    blocks = len(offsets) - 1
    halos = []
    for b in range(blocks):
        cols = set(rows[offsets[b] : offsets[b + 1]].indices.tolist())
        halos.append({c for c in cols if not offsets[b] <= c < offsets[b + 1]})
    send = [0] * blocks
    for halo in halos:
        for v in halo:
            send[int(owner_of(np.array([v]), offsets)[0])] += 1
    return [len(h) for h in halos], send


def test_halo_pairs_count_every_remote_vertex_once_per_block():
    a = directed_graph()
    for offsets in (PARTITION, np.array([0, 30]), np.array([0, 7, 30])):
        recv, send = halo_pairs(a, offsets)
        want_recv, want_send = brute_force(a, offsets)
        assert recv.tolist() == want_recv and send.tolist() == want_send
        assert recv.sum() == send.sum()


def test_block_counts_of_a_directed_graph_tell_in_from_out():
    a = directed_graph()
    a_t = a.T.tocsr()
    counts = block_counts(a, a_t, PARTITION)
    rows = [slice(lo, hi) for lo, hi in zip(PARTITION[:-1], PARTITION[1:], strict=True)]
    assert list(counts.in_edges) == [a_t[r].nnz for r in rows]
    assert list(counts.out_edges) == [a[r].nnz for r in rows]
    assert (list(counts.fwd_recv), list(counts.fwd_send)) == brute_force(a_t, PARTITION)
    assert (list(counts.bwd_recv), list(counts.bwd_send)) == brute_force(a, PARTITION)
    assert counts.in_edges != counts.out_edges  # the check above can tell them apart
    assert BlockCounts.from_arrays(counts.arrays()) == counts
    assert sorted(counts.arrays()) == sorted(COUNT_NAMES)


def test_every_coarsening_a_run_can_follow_is_counted():
    a = directed_graph()
    a_t = a.T.tocsr()
    assert coarsenings(8) == [1, 2, 4, 8] and coarsenings(6) == [1, 2, 3, 6]
    by_blocks = partition_block_counts(a, a_t, PARTITION)
    assert sorted(by_blocks) == [1, 2, 4, 8]
    for blocks, counts in by_blocks.items():
        assert counts == block_counts(a, a_t, merge_offsets(PARTITION, blocks))
    one = by_blocks[1]
    assert one.in_edges == (a.nnz,) and one.fwd_recv == (0,) and one.bwd_send == (0,)
