import pytest

from hpcgnn.errors import InputError
from hpcgnn.planning import load_topology, parse_topology, uniform_topology
from hpcgnn.planning.methods import (
    PAIR_METHODS,
    host_method,
    method_vertices,
    pair_method,
    peer_methods,
)
from hpcgnn.planning.topology import rail_topology
from tests.planning.test_spst import full_topology


def test_dgx1_pairs_use_ipc_in_a_socket_and_pinned_host_memory_across():
    """DGCL 6.2: one socket (node) ipc, the other socket of the server host-staged; the
    shipped file names the cross-socket NVLink pairs ipc (peer access over NVLink)."""
    topo = load_topology("dgx1")
    assert set(topo.node_hosts) == {"dgx1"}
    assert peer_methods(topo, 0) == ["ipc"] * 5 + ["host-staged"] * 3
    assert pair_method(topo, 5, 0) == pair_method(topo, 0, 5) == "host-staged"
    assert pair_method(topo, 1, 5) == "ipc"  # NVLink double link across the sockets
    four = load_topology("dgx1-4")
    assert [pair_method(four, 0, b) for b in (1, 2, 3)] == ["ipc", "ipc", "host-staged"]


def test_pairs_of_different_hosts_go_through_the_nic():
    topo = load_topology("cluster-4x4")
    assert peer_methods(topo, 5) == ["nic"] * 4 + ["ipc"] * 4 + ["nic"] * 8
    rail = parse_topology(rail_topology(2, 2))
    assert [pair_method(rail, 0, b) for b in (1, 2, 3)] == ["ipc", "nic", "nic"]
    assert set(peer_methods(uniform_topology(4), 2)) == {"ipc"}


def test_a_link_may_name_its_method_and_a_node_its_host():
    doc = full_topology(4)
    doc["nodes"] = [{"name": "s0", "ranks": [0, 1], "host": "h"},
                    {"name": "s1", "ranks": [2, 3], "host": "h"}]
    doc["links"][0]["method"] = "nic"  # 0-1
    topo = parse_topology(doc)
    assert [pair_method(topo, 0, b) for b in (1, 2, 3)] == ["nic", "host-staged", "host-staged"]
    assert pair_method(topo, 1, 0) == "nic"  # a link's method holds both ways
    doc["links"][0]["method"] = "carrier-pigeon"
    with pytest.raises(InputError, match="method 'carrier-pigeon' is not one of ipc"):
        parse_topology(doc)


def test_method_vertices_count_each_pairs_tables_by_method():
    topo = load_topology("dgx1-4")
    counts = {(1, 0, 1): 5, (1, 0, 3): 7, (2, 1, 3): 2, (1, 3, 0): 1}
    assert method_vertices(topo, counts) == {"ipc": 7, "host-staged": 8}
    assert set(method_vertices(topo, counts)) <= set(PAIR_METHODS)
    assert (host_method(True), host_method(False)) == ("shared-memory", "network")
