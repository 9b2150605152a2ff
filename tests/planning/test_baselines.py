"""DGCL's baselines (Swap, Replication, DGCL-R) on a 4-rank relation checked by hand."""

import pytest

from hpcgnn.planning import parse_topology, plan_cost, plan_p2p, plan_spst
from hpcgnn.planning.baselines import (
    dgcl_r,
    host_topology,
    plan_method,
    replication,
    split_by_node,
    swap,
)
from tests.planning.masks import relation_from_masks

BPV = 1000.0  # bytes per vertex

#: Two machines of two ranks: 50 GB/s inside a machine, 10 GB/s across.
TWO_MACHINES = {
    "ranks": 4,
    "nodes": [{"name": "m0", "ranks": [0, 1]}, {"name": "m1", "ranks": [2, 3]}],
    "links": [{"a": 0, "b": 1, "bandwidth_gbps": 50.0}, {"a": 2, "b": 3, "bandwidth_gbps": 50.0}]
    + [{"a": a, "b": b, "bandwidth_gbps": 10.0} for a in (0, 1) for b in (2, 3)],
}


def two_machines():
    """Helper: the topology and the relation (two vertices per rank) of the tests.

    Pairs ``(u, r)``: (0, 1), (1, 1), (1, 2), (2, 3), (4, 3), (5, 0); within a machine
    (0, 1), (1, 1), (4, 3); across (1, 2), (2, 3), (5, 0).
    """
    masks = [0b0010, 0b0110, 0b1000, 0, 0b1000, 0b0001, 0, 0]
    return parse_topology(TWO_MACHINES), relation_from_masks([0, 2, 4, 6, 8], masks)


def test_split_by_node():
    topo, rel = two_machines()
    intra, inter = split_by_node(topo, rel)
    assert intra.pair_counts().tolist() == [[0, 2, 0, 0], [0] * 4, [0, 0, 0, 1], [0] * 4]
    assert inter.pair_counts().tolist() == [[0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0], [0] * 4]


def test_replication_ships_every_pair_once_and_exchanges_nothing():
    topo, rel = two_machines()
    m = replication(topo, rel, BPV)
    assert (m.exchange_bytes, m.exchange_s, m.stages) == (0.0, 0.0, 0)
    assert (m.setup_bytes, m.replicated_rows) == (6 * BPV, 6)
    # the set-up is the direct exchange: one row on a 10 GB/s link is the slowest
    assert m.setup_s == pytest.approx(1000 / 10e9)
    assert m.setup_s == plan_cost(topo, plan_p2p(topo, rel), BPV).time_s


def test_swap_dumps_every_row_and_loads_the_needed_ones_through_the_host():
    topo, rel = two_machines()
    m = swap(topo, rel, BPV, host_gbps=10.0)
    # stage 1: 8 owned rows, 2 per rank; stage 2: ranks load 1, 2, 1, 2 rows
    assert m.exchange_bytes == (8 + 6) * BPV and m.stages == 2
    assert m.exchange_s == pytest.approx(2 * 2000 / 10e9)
    assert (m.setup_bytes, m.replicated_rows) == (0.0, 0)
    assert swap(topo, rel, BPV, host_gbps=20.0).exchange_s == pytest.approx(m.exchange_s / 2)
    host = host_topology(topo, 10.0)
    assert host.num_ranks == 5 and len(host.links) == 8


def test_dgcl_r_replicates_across_machines_and_plans_within():
    topo, rel = two_machines()
    m = dgcl_r(topo, rel, BPV)
    # per epoch: rank 0 -> 1 two rows, rank 2 -> 3 one row, at 50 GB/s
    assert m.exchange_bytes == 3 * BPV and m.stages == 1
    assert m.exchange_s == pytest.approx(2000 / 50e9)
    # set-up: the three pairs across machines, one row on each of three 10 GB/s links
    assert (m.setup_bytes, m.replicated_rows) == (3 * BPV, 3)
    assert m.setup_s == pytest.approx(1000 / 10e9)


def test_dgcl_r_on_one_machine_is_spst():
    doc = dict(TWO_MACHINES, nodes=[{"name": "m", "ranks": [0, 1, 2, 3]}])
    topo, rel = parse_topology(doc), two_machines()[1]
    m = dgcl_r(topo, rel, BPV, seed=3)
    spst = plan_method("SPST", topo, plan_spst(topo, rel, seed=3, bytes_per_vertex=BPV), BPV)
    assert (m.exchange_bytes, m.exchange_s, m.stages) == (
        spst.exchange_bytes, spst.exchange_s, spst.stages)
    assert (m.setup_bytes, m.replicated_rows) == (0, 0)
