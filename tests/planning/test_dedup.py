import numpy as np
import pytest

from hpcgnn.planning.dedup import (
    DedupVolumes,
    chunk_bounds,
    dedup_volumes,
    identity_schedule,
    merged_positions,
    remote_rows,
    sliding,
    transition_sets,
    write_positions,
)


def random_sets(m: int, n: int, num_vertices: int, size: int, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        [np.unique(rng.integers(0, num_vertices, rng.integers(0, size + 1))) for _ in range(n)]
        for _ in range(m)
    ]


def brute_volumes(sets, schedule) -> tuple[int, int, int]:
    m, n = schedule.shape
    batches = [[set(sets[i][schedule[i, j]].tolist()) for i in range(m)] for j in range(n)]
    v_ori = sum(len(s) for b in batches for s in b)
    unions = [set().union(*b) for b in batches]
    v_p2p = sum(len(u) for u in unions)
    v_ru = len(unions[0]) + sum(len(unions[j] - unions[j - 1]) for j in range(1, n))
    return v_ori, v_p2p, v_ru


def test_chunk_bounds_balance_work_and_cover_rows():
    nnz = np.array([10, 0, 0, 0, 10, 0, 0, 0, 10, 0, 0, 0])
    b = chunk_bounds(nnz, 3)
    assert b[0] == 0 and b[-1] == 12 and np.all(np.diff(b) >= 0)
    work = [int((nnz[a:c] + 1).sum()) for a, c in zip(b[:-1], b[1:], strict=True)]
    assert max(work) - min(work) <= 11  # within one heavy row
    small = chunk_bounds(np.zeros(2, int), 4)
    assert small[0] == 0 and small[-1] == 2 and np.all(np.diff(small) >= 0)
    assert list(chunk_bounds(np.zeros(0, int), 2)) == [0, 0, 0]
    with pytest.raises(ValueError):
        chunk_bounds(nnz, 0)


def test_sliding_positions():
    prev, cur = np.array([1, 4, 6, 9]), np.array([2, 4, 9, 11])
    s = sliding(prev, cur)
    assert np.array_equal(cur[s.keep_cur], prev[s.keep_prev])
    assert sorted(cur[s.keep_cur].tolist()) == [4, 9]
    assert cur[s.new].tolist() == [2, 11]


@pytest.mark.parametrize("seed", range(6))
def test_volumes_match_brute_force(seed):
    sets = random_sets(3, 4, 40, 15, seed)
    for sched in (identity_schedule(3, 4), np.array([[3, 1, 0, 2], [0, 2, 1, 3], [1, 0, 3, 2]])):
        v = dedup_volumes(sets, sched)
        assert (v.v_ori, v.v_p2p, v.v_ru) == brute_volumes(sets, sched)
        assert v.v_ru <= v.v_p2p <= v.v_ori


def test_volumes_by_hand():
    # V_ori = 10 + 8; batch 0 = {0,1,2,3,4,7}, batch 1 = {2,3,4,5,6} (3 of them reused)
    sets = [
        [np.array([0, 1, 3]), np.array([2, 3])],
        [np.array([1, 2, 4]), np.array([2, 4, 5])],
        [np.array([0, 3, 4, 7]), np.array([3, 4, 6])],
    ]
    v = dedup_volumes(sets, identity_schedule(3, 2))
    assert (v.v_ori, v.v_p2p, v.v_ru) == (18, 11, 8)


def test_cost_formula_by_hand():
    v = DedupVolumes(v_ori=100, v_p2p=60, v_ru=20)
    c = v.cost(1e9, {"hd": 1.0, "dd": 2.0, "ru": 4.0})
    assert c == pytest.approx(20 / 1.0 + 40 / 2.0 + 40 / 4.0)
    gbps = {"hd": 1.0, "dd": 2.0, "ru": 4.0}
    assert v.cost(1e9, gbps, "inter") == pytest.approx(60 / 1.0 + 40 / 2.0)
    assert v.cost(1e9, gbps, "none") == pytest.approx(100 / 1.0)
    assert v.as_dict() == {"V_ori": 100, "V_p2p": 60, "V_ru": 20}


def test_remote_rows_by_brute_force():
    sets = random_sets(2, 3, 20, 8, 3)
    offsets = np.array([0, 10, 20])
    sched = identity_schedule(2, 3)
    assert remote_rows(sets, sched, offsets, "none") == (0, 0)
    fwd_i, bwd_i = remote_rows(sets, sched, offsets, "inter")
    fwd_f, bwd_f = remote_rows(sets, sched, offsets, "full")
    exp_i = exp_ff = exp_fb = 0
    for i in range(2):
        seq = [set(s.tolist()) for s in sets[i]]
        own = set(range(offsets[i], offsets[i + 1]))
        for j, s in enumerate(seq):
            exp_i += len(s - own)
            exp_ff += len(s - own - (seq[j - 1] if j else set()))
            exp_fb += len(s - own - (seq[j + 1] if j + 1 < 3 else set()))
    assert (fwd_i, bwd_i) == (exp_i, exp_i)
    assert (fwd_f, bwd_f) == (exp_ff, exp_fb)
    assert len(transition_sets(sets, sched)) == 3


def test_cached_layers_fill_the_budget_widest_first():
    from hpcgnn.planning.dedup import cached_layers

    widths = [7, 16, 16, 4]  # bytes per layer at 10 rows of 4 bytes: 280, 640, 640, 160
    assert cached_layers(10, widths, 4, None) == (True,) * 4
    assert cached_layers(10, widths, 4, 0) == (False,) * 4
    assert cached_layers(10, widths, 4, 1280) == (False, True, True, False)
    assert cached_layers(10, widths, 4, 1279) == (True, True, False, True)
    assert cached_layers(10, widths, 4, 10**9) == (True,) * 4


def test_write_positions_reuse_in_place_as_in_the_paper():
    # HongTu Fig. 7 (a): 2, 6, 7 stay where they are, 3, 5, 8 take the slots of 1, 4, 9
    a, b = np.array([1, 2, 4, 6, 7, 9]), np.array([2, 3, 5, 6, 7, 8])
    wp = write_positions([a, b, np.array([3])])
    assert wp.capacity == 6
    assert wp.slots[0].tolist() == [0, 1, 2, 3, 4, 5]
    assert wp.slots[1].tolist() == [1, 0, 2, 3, 4, 5]
    assert wp.slots[2].tolist() == [0]
    assert write_positions([]).capacity == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_write_positions_keep_shared_rows_and_fit_the_largest_set(seed):
    rng = np.random.default_rng(seed)
    sets = [np.unique(rng.integers(0, 30, rng.integers(0, 20))) for _ in range(8)]
    wp = write_positions(sets)
    assert wp.capacity == max(len(s) for s in sets)
    for j, (s, slots) in enumerate(zip(sets, wp.slots, strict=True)):
        assert len(np.unique(slots)) == len(s) and (slots < wp.capacity).all()
        if j:
            prev = dict(zip(sets[j - 1].tolist(), wp.slots[j - 1].tolist(), strict=True))
            kept = {v: p for v, p in zip(s.tolist(), slots.tolist(), strict=True) if v in prev}
            assert all(prev[v] == p for v, p in kept.items())  # nothing moves


@pytest.mark.parametrize("reuse", [False, True])
def test_merged_positions_hold_each_row_once_and_keep_shared_rows(reuse):
    # rank 1 of three owns [10, 20); N_ij mixes own and remote ids, T_ij holds the own ones
    # the others ask for as well (HongTu Sect. 6: one buffer for T_ij and N_ij)
    rng = np.random.default_rng(3)
    neigh = [np.unique(rng.integers(0, 30, 12)) for _ in range(5)]
    trans = [np.union1d(s[(s >= 10) & (s < 20)], rng.integers(10, 20, 3)) for s in neigh]
    slots = write_positions(trans).slots if reuse else None
    mp = merged_positions(neigh, trans, slots, 10, 20)
    assert mp.transition == max(len(t) for t in trans)
    remote = [s[(s < 10) | (s >= 20)] for s in neigh]
    assert mp.rows == mp.transition + max(len(r) for r in remote)
    for j, (s, pos) in enumerate(zip(neigh, mp.positions, strict=True)):
        assert len(np.unique(pos)) == len(s) and (pos < mp.rows).all()
        own = (s >= 10) & (s < 20)
        # an own row is read where its transition row is: not stored twice
        tpos = np.searchsorted(trans[j], s[own])
        assert (pos[own] == (tpos if slots is None else slots[j][tpos])).all()
        assert (pos[~own] >= mp.transition).all()
        if reuse and j:  # a row shared with the previous batch has not moved
            prev = dict(zip(neigh[j - 1].tolist(), mp.positions[j - 1].tolist(), strict=True))
            assert all(prev.get(v, p) == p for v, p in zip(s.tolist(), pos.tolist(), strict=True))
