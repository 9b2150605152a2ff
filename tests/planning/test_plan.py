import numpy as np
import pytest

from hpcgnn.planning import (
    Plan,
    check_plan,
    load_topology,
    plan_spst,
    reverse_tables,
    split_substages,
)
from tests.planning.masks import relation_from_masks
from tests.planning.test_spst import random_relation


@pytest.fixture(scope="module")
def planned():
    topo = load_topology("configs/topologies/dgx1.json")
    rel = random_relation(400, 8, 900, 5)
    return rel, plan_spst(topo, rel, chunks=4, fallback=False)


def test_tables_deliver_every_destination_exactly_once(planned):
    rel, plan = planned
    check_plan(plan, rel)
    tables = plan.tables()
    assert {k: len(v) for k, v in tables.items()} == plan.counts()
    received: dict[int, list[int]] = {}
    for (k, _s, d), ids in tables.items():
        assert 1 <= k <= 7
        assert len(np.unique(ids)) == len(ids)  # one table never repeats a vertex
        for u in ids.tolist():
            received.setdefault(u, []).append(d)
    for u in range(len(rel.source)):
        got = received.get(u, [])
        assert len(got) == len(set(got))  # each rank receives u at most once
        want = set(rel.dests(u).tolist())
        assert want <= set(got) and rel.source[u] not in got


def test_reverse_plan_swaps_and_mirrors_stages(planned):
    _, plan = planned
    m = plan.num_stages
    tables = plan.tables()
    rev = reverse_tables(tables, m)
    assert len(rev) == len(tables)
    for (k, s, d), ids in tables.items():
        assert np.array_equal(rev[(m + 1 - k, d, s)], ids)
    back = reverse_tables(rev, m)
    assert back.keys() == tables.keys()
    assert all(np.array_equal(back[key], tables[key]) for key in tables)


def test_substages_receive_each_gradient_once(planned):
    _, plan = planned
    tables = reverse_tables(plan.tables(), plan.num_stages)
    subs = split_substages(tables)
    # same multiset of (stage, src, dst, vertex)
    flat = sorted((k, s, d, u) for (k, s, d), ids in tables.items() for u in ids.tolist())
    flat2 = sorted((k, s, d, u) for (k, _j, s, d), ids in subs.items() for u in ids.tolist())
    assert flat == flat2
    per_recv: dict[tuple[int, int, int], list[int]] = {}
    for (k, j, _s, d), ids in subs.items():
        per_recv.setdefault((k, j, d), []).extend(ids.tolist())
    for lst in per_recv.values():
        assert len(lst) == len(set(lst))
    # a multicast tree makes senders receive several gradients: sub-stages are needed
    assert max(j for (_k, j, _s, _d) in subs) >= 1


def test_substages_by_hand():
    tables = {(1, 0, 2): np.array([1, 2, 3]), (1, 1, 2): np.array([2, 3]),
              (1, 3, 2): np.array([3]), (1, 0, 1): np.array([3])}
    subs = split_substages(tables)
    assert {k: v.tolist() for k, v in subs.items()} == {
        (1, 0, 0, 1): [3], (1, 0, 0, 2): [1, 2, 3], (1, 1, 1, 2): [2, 3], (1, 2, 3, 2): [3],
    }


def test_check_plan_rejects_broken_trees():
    rel = relation_from_masks(np.array([0, 1, 2, 3]), np.array([0b110, 0, 0]))
    ids = np.array([0])
    check_plan(Plan(3, [(ids, ((1, 0, 1), (2, 1, 2)))]), rel)
    bad = [
        ((1, 0, 1),),  # destination 2 missed
        ((1, 0, 1), (1, 1, 2)),  # 1 forwards in the stage it receives
        ((1, 0, 1), (1, 0, 2), (2, 1, 2)),  # 2 receives twice
        ((1, 0, 1), (2, 1, 0), (2, 1, 2)),  # source receives
    ]
    for tree in bad:
        with pytest.raises(ValueError):
            check_plan(Plan(3, [(ids, tree)]), rel)
    with pytest.raises(ValueError, match="zero or several"):
        check_plan(Plan(3, []), rel)
