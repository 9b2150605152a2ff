import numpy as np
import pytest

from hpcgnn.planning.dedup import DedupVolumes, dedup_volumes, identity_schedule
from hpcgnn.planning.reorganization import (
    MembershipShard,
    assign_chunks,
    choose_schedule,
    membership_keys,
    order_batches,
)
from tests.planning.test_dedup import brute_volumes, random_sets


def algorithm4(sets) -> tuple[np.ndarray, bool]:
    """HongTu Algorithm 4 with Python sets, then kept only if C (eq. 4) does not grow."""
    m, n = len(sets), len(sets[0])
    sched = identity_schedule(m, n)
    batch = [set(sets[0][j].tolist()) for j in range(n)]
    for i in range(1, m):
        free = list(range(n))
        for j in range(n):
            shared = [len(batch[j] & set(sets[i][k].tolist())) for k in free]
            sched[i, j] = k = free.pop(shared.index(max(shared)))
            batch[j] |= set(sets[i][k].tolist())
    order, rest = [0], list(range(1, n))
    while rest:
        shared = [len(batch[b] & batch[order[-1]]) for b in rest]
        order.append(rest.pop(shared.index(max(shared))))
    sched = sched[:, order]
    after = DedupVolumes(*brute_volumes(sets, sched)).cost(1.0)
    ok = after <= DedupVolumes(*brute_volumes(sets, identity_schedule(m, n))).cost(1.0)
    return (sched if ok else identity_schedule(m, n)), ok


# m parts, n chunks, vertices, largest set (small sets leave chunks empty, many ties)
CASES = [(1, 3, 20, 8), (2, 1, 20, 8), (3, 4, 40, 15), (4, 5, 60, 30), (5, 6, 30, 4)]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("m", "n", "nv", "size"), CASES)
def test_schedule_equals_algorithm4(seed, m, n, nv, size):
    sets = random_sets(m, n, nv, size, seed)
    sched, reorg = choose_schedule(sets)
    expected, ok = algorithm4(sets)
    np.testing.assert_array_equal(sched, expected)
    assert reorg.accepted == ok
    assert reorg.before == dedup_volumes(sets, identity_schedule(m, n))
    if ok:
        assert reorg.after == dedup_volumes(sets, sched)


def test_reorganisation_that_trades_reuse_for_transfers_is_refused():
    # part 1's chunks in the "wrong" order: Algorithm 4 pairs equal sets, which keeps V_ru
    # (6 host loads either way) but turns 6 reused rows into 6 device-to-device ones: C
    # grows, so the identity schedule stays (V_ru alone would have taken it)
    a, b = np.array([0, 1, 2]), np.array([5, 6, 7])
    sched, reorg = choose_schedule([[a, b], [b, a]])
    assert sched.tolist() == [[0, 1], [0, 1]]
    assert not reorg.accepted and reorg.c_after > reorg.c_before
    assert (reorg.before.v_p2p, reorg.before.v_ru) == (12, 6)
    assert (reorg.after.v_p2p, reorg.after.v_ru) == (6, 6)
    # where device-to-device rows are (nearly) free, pairing saves the reuse copies
    _, even = choose_schedule([[a, b], [b, a]], gbps={"dd": 1e12})
    assert even.c_after <= even.c_before and even.accepted


def test_scores_of_vertex_range_shards_add_up():
    sets = random_sets(3, 4, 50, 20, 7)
    whole = MembershipShard.from_sets(sets)
    keys = [membership_keys(part) for part in sets]
    cuts = [0, 7, 8, 31, 50]  # uneven ranges, one of a single vertex
    shards = []
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        mine = [k[(k >= lo * 4) & (k < hi * 4)] for k in keys]
        counts = [len(k) for k in mine]
        shards.append(MembershipShard.from_keys(np.concatenate(mine), counts, 4, lo, hi - lo))
    assert sum(s.triples for s in shards) == whole.triples == sum(len(k) for k in keys)
    sched = np.array([[0, 1, 2, 3], [2, 0, 3, 1], [3, 2, 1, 0]])
    for part in (1, 2):
        total = sum(s.chunk_overlaps(sched, part) for s in shards)
        np.testing.assert_array_equal(total, whole.chunk_overlaps(sched, part))
    total = sum(s.batch_overlaps(sched) for s in shards)
    np.testing.assert_array_equal(total, whole.batch_overlaps(sched))
    trans = [set().union(*(sets[i][sched[i, j]].tolist() for i in range(3))) for j in range(4)]
    assert total.tolist() == [[len(a & b) for b in trans] for a in trans]


def test_greedy_steps_break_ties_to_the_lowest_index():
    assert assign_chunks(np.zeros((3, 3), dtype=np.int64)).tolist() == [0, 1, 2]
    scores = np.array([[1, 5, 5], [9, 0, 9], [0, 0, 0]])
    assert assign_chunks(scores).tolist() == [1, 0, 2]
    assert order_batches(np.array([[3, 1, 1], [1, 3, 2], [1, 2, 3]])) == [0, 1, 2]
    assert order_batches(np.array([[3, 0, 2], [0, 3, 1], [2, 1, 3]])) == [0, 2, 1]
    assert order_batches(np.ones((1, 1))) == [0]


def test_keys_must_match_counts_and_range():
    with pytest.raises(ValueError):
        MembershipShard.from_keys(np.arange(3), [1, 1], 2)
    with pytest.raises(ValueError):  # vertex 2 (keys 4, 5) is outside [0, 2)
        MembershipShard.from_keys(np.arange(6), [3, 3], 2, 0, 2)


def test_a_schedule_that_lowers_v_ru_but_raises_c_is_refused():
    # one host load fewer (V_ru 5 -> 4) but eleven rows fewer shared within the batches
    # (V_p2p 15 -> 4): seven more device-to-device rows cost more at the default tiers
    base = DedupVolumes(20, 15, 5)
    worse = DedupVolumes(20, 4, 4)
    assert worse.v_ru < base.v_ru and worse.cost(1.0) > base.cost(1.0)
    assert base.cost(1.0, d2d_rows=5) == base.cost(1.0)  # V_ori - V_p2p by default
    assert base.cost(8.0, dedup="inter", d2d_rows=7) > base.cost(8.0, dedup="inter")
