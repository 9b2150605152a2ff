import dataclasses
import hashlib

import numpy as np
import pytest

from hpcgnn.errors import ConfigError
from hpcgnn.planning import (
    check_plan,
    counts_cost,
    load_topology,
    parse_topology,
    plan_cost,
    plan_items,
    plan_p2p,
    plan_spst,
    plan_trees,
    uniform_topology,
)
from hpcgnn.planning.relation import relation_from_edges, signature_groups
from hpcgnn.planning.spst import chunk_sizes, direct_trees, tree_counts
from hpcgnn.planning.topology import rail_topology
from tests.planning.masks import relation_from_masks

BPV = 1000.0  # bytes per vertex

def full_topology(n: int, bw: float = 10.0) -> dict:
    """Helper: a complete topology of ``n`` ranks, every link ``bw`` GB/s."""
    return {
        "ranks": n,
        "links": [
            {"a": a, "b": b, "bandwidth_gbps": bw} for a in range(n) for b in range(a + 1, n)
        ],
    }


def random_relation(n: int, parts: int, m: int, seed: int):
    """Helper: relation of a random directed graph split evenly into ``parts``."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    offsets = np.linspace(0, n, parts + 1).astype(np.int64)
    return relation_from_edges(n, src, dst, offsets)


def random_topology(parts: int, seed: int):
    """Helper: a random connected topology with mixed bandwidths."""
    rng = np.random.default_rng(seed)
    links = [{"a": r, "b": r + 1, "bandwidth_gbps": float(rng.uniform(1, 50))}
             for r in range(parts - 1)]
    for a in range(parts):
        for b in range(a + 2, parts):
            if rng.random() < 0.5:
                links.append({"a": a, "b": b, "bandwidth_gbps": float(rng.uniform(1, 50))})
    return parse_topology({"ranks": parts, "links": links})


def zero_latency(topo):
    """Helper: ``topo`` without latencies (DGCL's bandwidth-only cost model)."""
    return dataclasses.replace(
        topo, link_alpha_s=np.zeros_like(topo.link_alpha_s), stage_alpha_s=0.0
    )


def plan_digest(plan) -> str:
    """Helper: a short hash of a plan's routes (ids and trees)."""
    h = hashlib.sha256()
    for ids, tree in plan.routes:
        h.update(np.asarray(ids, dtype=np.int64).tobytes())
        h.update(repr(tree).encode())
    return h.hexdigest()[:16]


def _triangle(slow: float = 1.0):
    return parse_topology({"ranks": 3, "links": [
        {"a": 0, "b": 1, "bandwidth_gbps": 10.0},
        {"a": 1, "b": 2, "bandwidth_gbps": 10.0},
        {"a": 0, "b": 2, "bandwidth_gbps": slow},
    ]})


def _rel_0_to_2(count: int = 100):
    mask = np.zeros(count + 2, dtype=np.int64)
    mask[:count] = 1 << 2
    return relation_from_masks(np.array([0, count, count + 1, count + 2]), mask)


def test_p2p_cost_by_hand():
    topo, rel = _triangle(), _rel_0_to_2()
    cost = plan_cost(topo, plan_p2p(topo, rel), BPV)
    assert cost.time_s == pytest.approx(100 * BPV / 1e9)
    assert cost.link_counts[0, topo.link_id(0, 2)] == 100


def _nic_topology():
    """0, 1 on node a; 2 on node b; no link 0-1; both links into 2 share b's 4 GB/s NIC."""
    return parse_topology({
        "ranks": 3,
        "nodes": [{"name": "a", "ranks": [0, 1]}, {"name": "b", "ranks": [2]}],
        "shared": [{"name": "nic", "node": "b", "bandwidth_gbps": 4.0}],
        "links": [{"a": 0, "b": 2, "bandwidth_gbps": 10.0, "via": ["nic"]},
                  {"a": 1, "b": 2, "bandwidth_gbps": 10.0, "via": ["nic"]}],
    })


def test_p2p_cost_with_shared_resource_and_route_by_hand():
    # 0,1 on node a; 2 on node b; both links into 2 share b's 4 GB/s NIC
    topo = _nic_topology()
    mask = np.array([4, 4, 4, 0], dtype=np.int64)  # 0,1 on rank 0; 2 on rank 1
    rel = relation_from_masks(np.array([0, 2, 3, 4]), mask)
    cost = plan_cost(topo, plan_p2p(topo, rel), BPV)
    assert cost.time_s == pytest.approx(3 * BPV / 4e9)  # 3 vertices through the NIC
    assert cost.link_times[0, topo.link_id(0, 2)] == pytest.approx(3 * BPV / 4e9)
    # no link 0->1: p2p routes 0->2->1 in stage 1, spst forwards in 2 stages
    mask = np.array([2, 0, 0, 0], dtype=np.int64)
    rel = relation_from_masks(np.array([0, 2, 3, 4]), mask)
    c = plan_cost(topo, plan_p2p(topo, rel), BPV)
    assert c.time_s == pytest.approx(BPV / 4e9) and len(c.stage_times) == 1
    sp = plan_spst(topo, rel, fallback=False)
    check_plan(sp, rel)
    assert sp.num_stages == 2  # 0->2 then 2->1: NIC in, then NIC out: twice p2p's time
    assert plan_cost(topo, sp, BPV).time_s == pytest.approx(2 * BPV / 4e9)
    assert plan_spst(topo, rel).num_stages == 1  # falls back to the hardware route


def test_spst_forwards_over_fast_links():
    topo, rel = _triangle(slow=1.0), _rel_0_to_2()
    p2p = plan_cost(topo, plan_p2p(topo, rel), BPV).time_s
    plan = plan_spst(topo, rel, chunks=None)
    check_plan(plan, rel)
    assert plan.num_stages == 2
    # better than forwarding everything (2 stages of 100 vertices at 10 GB/s): SPST also
    # keeps the idle slow direct link busy while it adds no stage time
    t = plan_cost(topo, plan, BPV).time_s
    assert t <= 2 * 100 * BPV / 10e9 and t < p2p / 4


def test_spst_fuses_multicast_through_a_fast_hub():
    # rank 0 must reach 2 and 3 over slow direct links; 0-1 and 1-2, 1-3 are fast
    topo = parse_topology({"ranks": 4, "links": [
        {"a": 0, "b": 1, "bandwidth_gbps": 20.0}, {"a": 1, "b": 2, "bandwidth_gbps": 20.0},
        {"a": 1, "b": 3, "bandwidth_gbps": 20.0}, {"a": 0, "b": 2, "bandwidth_gbps": 2.0},
        {"a": 0, "b": 3, "bandwidth_gbps": 2.0}]})
    mask = np.zeros(103, dtype=np.int64)
    mask[:100] = (1 << 2) | (1 << 3)
    rel = relation_from_masks(np.array([0, 100, 101, 102, 103]), mask)
    plan = plan_spst(topo, rel, chunks=None)
    check_plan(plan, rel)
    t = plan_cost(topo, plan, BPV).time_s
    assert t < 0.25 * plan_cost(topo, plan_p2p(topo, rel), BPV).time_s


@pytest.mark.parametrize("seed", range(6))
def test_spst_valid_and_never_worse_than_p2p(seed):
    parts = 3 + seed % 4
    topo = random_topology(parts, seed)
    rel = random_relation(60, parts, 150, seed)
    p2p = plan_p2p(topo, rel)
    check_plan(p2p, rel, max_stages=1)
    t_p2p = plan_cost(topo, p2p, BPV).time_s
    for chunks in (None, 4):
        raw = plan_spst(topo, rel, seed=seed, chunks=chunks, fallback=False)
        check_plan(raw, rel)
        assert raw.num_stages <= parts - 1
        plan = plan_spst(topo, rel, seed=seed, chunks=chunks)
        check_plan(plan, rel)
        assert plan_cost(topo, plan, BPV).time_s <= t_p2p * (1 + 1e-9)
        assert plan_cost(topo, plan, BPV).time_s <= plan_cost(topo, raw, BPV).time_s


def test_max_stages_bound_is_respected_or_reported():
    topo = random_topology(6, 1)
    rel = random_relation(60, 6, 200, 1)
    plan = plan_spst(topo, rel, max_stages=5)
    check_plan(plan, rel, max_stages=5)
    chain = parse_topology({"ranks": 4, "links": [
        {"a": r, "b": r + 1, "bandwidth_gbps": 1.0} for r in range(3)]})
    rel = relation_from_masks(np.array([0, 1, 2, 3, 4]), np.array([8, 0, 0, 0]))
    with pytest.raises(ConfigError, match="no route within 2 stages"):
        plan_spst(chain, rel, max_stages=2)
    check_plan(plan_spst(chain, rel, max_stages=3), rel, max_stages=3)


def test_chunked_close_to_per_vertex_on_dgx1():
    topo = zero_latency(load_topology("configs/topologies/dgx1.json"))
    rel = random_relation(2000, 8, 3000, 7)
    exact = plan_cost(topo, plan_spst(topo, rel, chunks=None), BPV).time_s
    chunked = plan_cost(topo, plan_spst(topo, rel, chunks=8), BPV).time_s
    p2p = plan_cost(topo, plan_p2p(topo, rel), BPV).time_s
    assert exact < 0.5 * p2p and chunked < 0.5 * p2p
    assert abs(chunked - exact) <= 0.15 * exact


def test_parts_must_match_ranks():
    with pytest.raises(ConfigError, match="has 3 ranks"):
        plan_p2p(_triangle(), random_relation(20, 4, 30, 0))


def test_counts_cost_equals_plan_cost():
    topo = load_topology("configs/topologies/dgx1.json")
    rel = random_relation(400, 8, 900, 2)
    for plan in (plan_p2p(topo, rel), plan_spst(topo, rel, chunks=8)):
        a, b = plan_cost(topo, plan, BPV), counts_cost(topo, plan.counts(), BPV)
        assert a.time_s == b.time_s
        np.testing.assert_array_equal(a.stage_times, b.stage_times)
        np.testing.assert_array_equal(a.link_counts, b.link_counts)
    empty = counts_cost(topo, {}, BPV)
    assert empty.time_s == 0.0 and len(empty.stage_times) == 1


def test_chunk_sizes():
    assert chunk_sizes(10, 4) == [3, 3, 3, 1]
    assert chunk_sizes(3, 64) == [1, 1, 1]
    assert chunk_sizes(5, None) == [1] * 5
    assert chunk_sizes(0, 4) == []


def test_plan_trees_from_counts_match_plan_spst():
    topo = random_topology(5, 3)
    rel = random_relation(80, 5, 200, 3)
    # items in the order plan_spst builds them (groups in signature order, chunked)
    items = [(s, dests, c) for s, dests, ids in signature_groups(rel)
             for c in chunk_sizes(len(ids), 4)]
    rng = np.random.default_rng(9)
    for _, _, ids in signature_groups(rel):
        rng.permutation(ids)  # plan_spst shuffles each group first
    trees = plan_trees(topo, items, seed=rng)
    plan = plan_spst(topo, rel, seed=9, chunks=4, fallback=False)
    assert trees == [tree for _, tree in plan.routes]
    counts = tree_counts(items, trees)
    assert counts == plan.counts()
    assert plan_trees(topo, items, seed=5) == plan_trees(topo, items, seed=5)


def test_plan_items_falls_back_to_direct():
    # no link 0-1: SPST forwards through 2's NIC twice, the hardware route is cheaper
    topo = _nic_topology()
    items = [(0, (1,), 5)]
    trees, direct = plan_items(topo, items)
    assert direct and trees == direct_trees(items) == [((1, 0, 1),)]
    trees, direct = plan_items(topo, items, fallback=False)
    assert not direct and trees == [((1, 0, 2), (2, 2, 1))]
    assert tree_counts(items, trees) == {(1, 0, 2): 5, (2, 2, 1): 5}


def test_spst_at_128_modelled_ranks():
    topo = parse_topology(rail_topology(16, 8))
    rel = random_relation(1280, 128, 100, 1)
    assert rel.dest_ranks.max() >= 64
    p2p = plan_p2p(topo, rel)
    check_plan(p2p, rel, max_stages=1)
    raw = plan_spst(topo, rel, chunks=8, fallback=False)
    check_plan(raw, rel)
    # cross-rail pairs have no direct link: SPST forwards inside a node first
    assert raw.num_stages >= 2
    assert plan_cost(topo, raw, BPV).time_s <= 1.5 * plan_cost(topo, p2p, BPV).time_s


def test_latency_by_hand():
    # 0 -> 2 direct (1 GB/s) or through 1 (10 GB/s per hop); 100 vertices of 1000 bytes
    doc = {"ranks": 3, "stage_alpha_us": 10.0, "alpha_us": {"slow": 2.0}, "links": [
        {"a": 0, "b": 1, "bandwidth_gbps": 10.0, "alpha_us": 1.0},
        {"a": 1, "b": 2, "bandwidth_gbps": 10.0, "alpha_us": 1.0},
        {"a": 0, "b": 2, "bandwidth_gbps": 1.0, "kind": "slow"}]}
    topo, rel = parse_topology(doc), _rel_0_to_2()
    cost = plan_cost(topo, plan_p2p(topo, rel), BPV)
    assert cost.time_s == pytest.approx(10e-6 + 2e-6 + 100e-6)
    assert cost.link_times[0, topo.link_id(0, 2)] == pytest.approx(2e-6 + 100e-6)
    assert cost.link_times[0, topo.link_id(0, 1)] == 0.0  # idle links pay no latency
    # forwarding pays: two stages of at most (10 + 1 + 10) us beat 112 us
    plan = plan_spst(topo, rel, chunks=None, bytes_per_vertex=BPV)
    assert plan.num_stages == 2
    assert plan_cost(topo, plan, BPV).time_s <= 2 * (10e-6 + 1e-6 + 10e-6) * (1 + 1e-9)
    # 10-byte rows: the bandwidth saved (1 us) does not pay for a second stage
    small = plan_spst(topo, rel, chunks=None, bytes_per_vertex=10.0)
    assert small.num_stages == 1 and plan_digest(small) == plan_digest(plan_p2p(topo, rel))


def test_endpoint_cost_by_hand():
    # rank 0 sends 100 vertices to each of 1, 2, 3 in one stage over idle parallel links:
    # its three messages and 300 vertices serialise at its endpoint
    doc = {**full_topology(4), "endpoint": {"alpha_us": 5.0, "bandwidth_gbps": 2.0}}
    topo = parse_topology(doc)
    counts = {(1, 0, d): 100 for d in (1, 2, 3)}
    cost = counts_cost(topo, counts, BPV)
    assert cost.endpoint_times[0, 0] == pytest.approx(3 * 5e-6 + 300 * BPV / 2e9)
    assert cost.endpoint_times[0, 1] == pytest.approx(5e-6 + 100 * BPV / 2e9)
    assert cost.time_s == pytest.approx(cost.endpoint_times[0, 0])  # > any link's 10 us
    # forwarding through 1 moves the work off rank 0 but adds a stage: the rank pays
    plain = counts_cost(parse_topology(full_topology(4)), counts, BPV)
    assert plain.time_s == pytest.approx(100 * BPV / 10e9) and not plain.endpoint_times.any()


def test_ranks_sharing_cores_take_their_summed_work_over_the_cores():
    # 0 -> 1 and 2 -> 3 at once, all four ranks on 2 cores: each rank's own time is one
    # message and 100 vertices, the pool's the four ranks' sum over 2 cores
    doc = {**full_topology(4), "endpoint": {
        "alpha_us": 5.0, "bandwidth_gbps": 2.0,
        "core_pools": [{"ranks": [0, 1, 2, 3], "cores": 2}]}}
    topo = parse_topology(doc)
    counts = {(1, 0, 1): 100, (1, 2, 3): 100}
    one = 5e-6 + 100 * BPV / 2e9
    assert counts_cost(topo, counts, BPV).time_s == pytest.approx(4 * one / 2)
    doc["endpoint"]["core_pools"] = [{"ranks": [0, 1], "cores": 2}, {"ranks": [2, 3], "cores": 2}]
    assert counts_cost(parse_topology(doc), counts, BPV).time_s == pytest.approx(one)


def test_a_busy_endpoint_keeps_the_plan_direct():
    # forwarding saves link time but the relay pays a message in and out: with costly
    # endpoints the direct plan wins where the bandwidth-only model forwards
    doc = {"ranks": 3, "links": [
        {"a": 0, "b": 1, "bandwidth_gbps": 10.0}, {"a": 1, "b": 2, "bandwidth_gbps": 10.0},
        {"a": 0, "b": 2, "bandwidth_gbps": 1.0}]}
    rel = _rel_0_to_2()
    assert plan_spst(parse_topology(doc), rel, chunks=None, bytes_per_vertex=BPV).num_stages == 2
    doc["endpoint"] = {"alpha_us": 200.0}
    plan = plan_spst(parse_topology(doc), rel, chunks=None, bytes_per_vertex=BPV)
    assert plan.num_stages == 1


def test_latency_stops_deep_plans_on_dgx1():
    topo = load_topology("configs/topologies/dgx1.json")
    rel = random_relation(400, 8, 600, 7)
    zero = plan_spst(zero_latency(topo), rel, fallback=False)
    assert zero.num_stages == 6  # DGCL's bandwidth-only model
    t_zero, t_p2p = (plan_cost(topo, p, 4096.0).time_s for p in (zero, plan_p2p(topo, rel)))
    plan = plan_spst(topo, rel, bytes_per_vertex=4096.0)
    check_plan(plan, rel)
    t = plan_cost(topo, plan, 4096.0).time_s
    assert plan.num_stages == 2 and t < 0.5 * t_zero and t < 0.7 * t_p2p
    # 16-float32 rows: latency dominates and the direct plan is kept
    assert plan_spst(topo, rel, bytes_per_vertex=64.0).num_stages == 1


def test_zero_latency_gives_the_plans_of_the_bandwidth_model():
    # digests recorded with the planner before latency (commit e18d98e)
    dgx1 = zero_latency(load_topology("configs/topologies/dgx1.json"))
    rel = random_relation(600, 8, 1500, 4)
    assert plan_digest(plan_spst(dgx1, rel, chunks=8, seed=3)) == "bc8e1f0694b2dc9d"
    rel = random_relation(90, 4, 200, 4)
    uniform = zero_latency(uniform_topology(4))  # the default topology has latency since
    assert plan_digest(plan_spst(uniform, rel, chunks=8, seed=3)) == ("54f1566327c2a657")
    topo = random_topology(6, 2)
    rel = random_relation(120, 6, 400, 2)
    assert plan_digest(plan_spst(topo, rel, chunks=None, seed=3)) == "a233d807501b87b9"


def test_spst_at_1024_modelled_ranks():
    # 128 nodes x 8 GPUs: ~137 000 directed links, ~1M rank pairs; routes are built on
    # demand and a Dijkstra expansion costs the out-links of one rank
    topo = parse_topology(rail_topology(128, 8, nvlink_us=3, net_us=8, stage_us=10))
    rel = random_relation(4096, 1024, 8, 5)
    assert rel.dest_ranks.max() >= 512
    t_p2p = plan_cost(topo, plan_p2p(topo, rel), BPV).time_s
    plan = plan_spst(topo, rel, chunks=8, bytes_per_vertex=BPV)
    check_plan(plan, rel)
    assert plan_cost(topo, plan, BPV).time_s <= t_p2p * (1 + 1e-9)
    raw = plan_spst(zero_latency(topo), rel, chunks=8, fallback=False)
    check_plan(raw, rel)
    assert raw.num_stages >= 2  # cross-rail pairs are forwarded inside a node


@pytest.mark.parametrize("doc", [
    rail_topology(4, 4), rail_topology(4, 4, nvlink_us=3, net_us=8, stage_us=10),
    "configs/topologies/dgx1.json",
])
def test_array_and_list_relaxation_give_the_same_plans(doc, monkeypatch):
    topo = load_topology(doc) if isinstance(doc, str) else parse_topology(doc)
    rel = random_relation(200, topo.num_ranks, 300, 3)
    digests = []
    for degree in (1, 10**9):  # every rank relaxed as arrays, then as lists
        monkeypatch.setattr("hpcgnn.planning.spst.ARRAY_DEGREE", degree)
        digests.append([plan_digest(plan_spst(topo, rel, seed=s, chunks=c, bytes_per_vertex=BPV))
                        for s, c in ((0, None), (1, 4))])
    assert digests[0] == digests[1]


def test_the_default_topology_never_forwards_what_direct_sends_cheaper():
    """Without --topology (the uniform mesh with the laptop's 2 us links) the plan moves no
    more rows than p2p on a skewed relation where the zero-latency model forwards some."""
    from hpcgnn.cost.machine import load_machine
    from hpcgnn.planning.topology import UNIFORM_ALPHA_US

    assert UNIFORM_ALPHA_US * 1e-6 == load_machine("laptop").link(8).alpha
    topo = uniform_topology(8)
    rel = random_relation(2000, 8, 6000, 9)
    direct = plan_cost(topo, plan_p2p(topo, rel), BPV)
    plan = plan_spst(topo, rel, chunks=8, bytes_per_vertex=BPV)
    check_plan(plan, rel)
    assert sum(plan.counts().values()) <= sum(plan_p2p(topo, rel).counts().values())
    assert plan_cost(topo, plan, BPV).time_s <= direct.time_s * (1 + 1e-9)
    raw = plan_spst(zero_latency(topo), rel, chunks=8, bytes_per_vertex=BPV)
    assert sum(raw.counts().values()) > sum(plan.counts().values())  # it would forward


def test_concurrent_transfers_through_a_bus_inside_a_node_are_charged_together():
    """DGCL's Table 3: GPUs sending through one shared connection at once each get a share
    of it; the cost model charges the bytes of all of them at the bus's bandwidth."""
    from tests.planning.test_topology import _bus_doc

    topo = parse_topology(_bus_doc(True))  # links 10 GB/s, pairs 0-2, 1-3 through a 5 GB/s bus
    one = counts_cost(topo, {(1, 0, 2): 100}, BPV).time_s
    both = counts_cost(topo, {(1, 0, 2): 100, (1, 1, 3): 100}, BPV).time_s
    apart = counts_cost(topo, {(1, 0, 1): 100, (1, 2, 3): 100}, BPV).time_s
    assert one == pytest.approx(100 * BPV / 5e9)
    assert both == pytest.approx(2 * one)  # two streams share the bus's capacity
    assert apart == pytest.approx(100 * BPV / 10e9)
    items = [(0, (2,), 100), (1, (3,), 100)]
    trees, _ = plan_items(topo, items, fallback=False, bytes_per_vertex=BPV)
    routed = counts_cost(topo, tree_counts(items, trees), BPV).time_s
    assert routed < both  # the planner goes around the bus
