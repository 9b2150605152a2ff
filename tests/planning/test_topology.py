import json
import re

import numpy as np
import pytest

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.planning import load_topology, parse_topology, uniform_topology
from hpcgnn.planning.topology import (
    DEFAULT_LINK_ALPHA_US,
    DEFAULT_STAGE_ALPHA_US,
    rail_topology,
    topology_spec,
)
from tests.planning.test_spst import full_topology

SHIPPED = ["configs/topologies/dgx1.json", "configs/topologies/cluster-4x4.json"]


@pytest.mark.parametrize("path", SHIPPED)
def test_shipped_topologies_load(path):
    topo = load_topology(path)
    assert topo.num_ranks in (8, 16)
    assert len(topo.links) == topo.num_ranks * (topo.num_ranks - 1)
    for (a, b) in [(0, 1), (1, 0), (0, topo.num_ranks - 1)]:
        assert topo.route(a, b) == (topo.link_id(a, b),)


def test_dgx1_shares_qpi_between_cross_socket_links():
    topo = load_topology("configs/topologies/dgx1.json")
    qpi_out = topo.resource_names.index("qpi:out")
    qpi_in = topo.resource_names.index("qpi:in")
    assert qpi_out in topo.link_resources[topo.link_id(0, 5)]
    assert qpi_out in topo.link_resources[topo.link_id(1, 4)]
    assert qpi_in in topo.link_resources[topo.link_id(5, 0)]
    # NVLink pairs do not touch QPI
    assert topo.link_resources[topo.link_id(0, 4)] == (topo.link_id(0, 4),)
    assert topo.links[topo.link_id(0, 3)].bandwidth_gbps == 50.0


def _doc():
    d = full_topology(3)
    d["nodes"] = [{"name": "n0", "ranks": [0, 1]}, {"name": "n1", "ranks": [2]}]
    d["shared"] = [{"name": "nic", "node": "n1", "bandwidth_gbps": 5.0}]
    d["links"][1]["via"] = ["nic"]  # link 0-2
    return d


def test_valid_doc_and_route_without_direct_link():
    topo = parse_topology(_doc())
    assert topo.resource_names[-2:] == ("nic:out", "nic:in")
    chain = parse_topology({"ranks": 3, "links": [{"a": 0, "b": 1, "bandwidth_gbps": 1},
                                                  {"a": 1, "b": 2, "bandwidth_gbps": 1}]})
    assert chain.link_id(0, 2) is None
    assert [chain.links[i].dst for i in chain.route(0, 2)] == [1, 2]
    assert np.all(chain.resource_bw == 1.0)


def _break(mutate):
    d = _doc()
    mutate(d)
    return d


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("ranks"), "missing field 'ranks'"),
        (lambda d: d.update(ranks=0), "'ranks' must be >= 1"),
        (lambda d: d["nodes"][1].update(ranks=[]), "rank 2 is in no node"),
        (lambda d: d["nodes"][1].update(ranks=[2, 7]), "unknown rank 7"),
        (lambda d: d["nodes"][1].update(ranks=[2, 1]), "rank 1 is in two nodes"),
        (lambda d: d["links"].append({"a": 0, "b": 9, "bandwidth_gbps": 1}),
         "refers to unknown rank 9"),
        (lambda d: d["links"][0].update(bandwidth_gbps=0), "non-positive"),
        (lambda d: d["links"][0].update(bandwidth_gbps=-3.0), "non-positive"),
        (lambda d: d["links"][0].pop("bandwidth_gbps"), "no numeric bandwidth"),
        (lambda d: d["links"].append({"a": 1, "b": 1, "bandwidth_gbps": 1}), "to itself"),
        (lambda d: d["links"].append({"a": 1, "b": 0, "bandwidth_gbps": 1}), "appears twice"),
        (lambda d: d["links"][0].update(via=["qpi"]), "unknown shared resource 'qpi'"),
        (lambda d: d["links"][0].update(via=["nic"]), "exactly one end"),
        (lambda d: d["shared"][0].update(node="n9"), "unknown node 'n9'"),
        (lambda d: d["shared"][0].update(bandwidth_gbps=0), "non-positive"),
        (lambda d: d.update(links=[d["links"][0]]), "not connected"),
        (lambda d: d.update(links=[]), "'links' must be a non-empty list"),
        (lambda d: d.update(alpha_us=[3.0]), "'alpha_us' must map link kinds"),
        (lambda d: d.update(alpha_us={"nvlink": -1.0}), "kind 'nvlink' must be finite and >= 0"),
        (lambda d: d.update(stage_alpha_us="10"), "'stage_alpha_us' must be a number"),
        (lambda d: d["links"][0].update(alpha_us=float("nan")), r"link 0 \(0-1\) alpha_us"),
        (lambda d: d.update(endpoint=5.0), "'endpoint' must be an object"),
        (lambda d: d.update(endpoint={"alpha_us": -2}), "endpoint 'alpha_us' must be finite"),
        (lambda d: d.update(endpoint={"bandwidth_gbps": 0}), "'endpoint' has non-positive"),
        (lambda d: d.update(endpoint={"core_pools": {}}), "'core_pools' must be a list"),
        (lambda d: d.update(endpoint={"core_pools": [{"ranks": [0], "cores": 0}]}),
         "core pool 0: 'cores' must be a positive number"),
        (lambda d: d.update(endpoint={"core_pools": [{"ranks": [0, 1], "cores": 1},
                                                     {"ranks": [1], "cores": 1}]}),
         "core pool 1 lists rank 1: unknown or in another pool"),
    ],
)
def test_bad_topologies(mutate, message):
    with pytest.raises(InputError, match=message) as info:
        parse_topology(_break(mutate), "t.json")
    assert "\n" not in str(info.value) and str(info.value).startswith("topology t.json:")


def test_bad_files(tmp_path):
    p = tmp_path / "t.json"
    p.write_text("{ranks: 3")
    with pytest.raises(InputError, match="not valid JSON"):
        load_topology(p)
    with pytest.raises(InputError, match="cannot read"):
        load_topology(tmp_path / "missing.json")
    p.write_text(json.dumps([1, 2]))
    with pytest.raises(InputError, match="top level must be a JSON object"):
        load_topology(p)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_uniform_topology(n):
    topo = uniform_topology(n, bandwidth_gbps=12.5)
    assert topo.num_ranks == n and len(set(topo.node_of)) == 1
    assert len(topo.links) == n * (n - 1)
    assert np.all(topo.resource_bw == 12.5)
    for a in range(n):
        for b in range(n):
            if a != b:
                assert topo.route(a, b) == (topo.link_id(a, b),)


@pytest.mark.parametrize("declared", [3, 10**8, 10**30])
def test_a_rank_count_other_than_the_jobs_is_refused_before_building(tmp_path, declared):
    # nothing is built per declared rank: 10^30 ranks fail as fast as 3
    doc = {"name": "huge", "ranks": declared, "links": []}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    message = f"topology {p}: has {declared} ranks but the job has 2"
    with pytest.raises(InputError, match=re.escape(message)):
        load_topology(p, ranks=2)


def test_the_expected_rank_count_is_optional():
    with pytest.raises(InputError, match="has 3 ranks but the job has 2"):
        parse_topology(_doc(), "t.json", ranks=2)
    assert parse_topology(_doc(), "t.json", ranks=3).num_ranks == 3
    assert parse_topology(_doc(), "t.json").num_ranks == 3


def test_one_rank_topology_needs_no_links():
    assert parse_topology({"ranks": 1, "links": []}).links == ()
    with pytest.raises(InputError, match="'links' must be a non-empty list"):
        parse_topology({"ranks": 1})


def test_latencies_per_kind_per_link_and_defaults():
    d = _doc()
    d["links"][0]["kind"] = "nvlink"
    d["links"][2].update(kind="nvlink", alpha_us=1.5)  # link 1-2 overrides its kind
    d["alpha_us"] = {"nvlink": 3.0}
    d["stage_alpha_us"] = 10
    topo = parse_topology(d)
    alpha = {(ln.src, ln.dst): a for ln, a in zip(topo.links, topo.link_alpha_s, strict=True)}
    assert alpha[(0, 1)] == alpha[(1, 0)] == pytest.approx(3e-6)
    assert alpha[(1, 2)] == pytest.approx(1.5e-6)
    assert alpha[(0, 2)] == 0.0  # kind "link" is not listed: DEFAULT_LINK_ALPHA_US
    assert topo.stage_alpha_s == pytest.approx(1e-5)
    plain = parse_topology(_doc())
    assert DEFAULT_LINK_ALPHA_US == DEFAULT_STAGE_ALPHA_US == 0.0
    assert not plain.link_alpha_s.any() and plain.stage_alpha_s == 0.0
    for path in SHIPPED:  # the shipped files give every link and stage a latency
        shipped = load_topology(path)
        assert np.all(shipped.link_alpha_s > 0) and shipped.stage_alpha_s > 0


def test_a_measured_topology_reads_back_with_its_latencies():
    from hpcgnn.planning.topology import measured_topology

    hosts = ["n0", "n0", "n1", "n1"]
    pairs = {(a, b): ((2e-6 if hosts[a] == hosts[b] else 9e-6), 1e-10)
             for a in range(4) for b in range(a + 1, 4)}
    doc = measured_topology("m", hosts, pairs, 5e-5, "test")
    assert doc["alpha_us"] == {"inter-node": 9.0, "intra-node": 2.0}
    assert [n["ranks"] for n in doc["nodes"]] == [[0, 1], [2, 3]]
    topo = parse_topology(doc, "<m>", 4)
    assert topo.stage_alpha_s == pytest.approx(5e-5)
    assert {ln.bandwidth_gbps for ln in topo.links} == {10.0}
    assert topo.endpoint_alpha_s == 0.0 and topo.endpoint_gbps == np.inf
    doc = measured_topology("m", hosts, pairs, 5e-5, "test", endpoint=(3e-5, 2e-9),
                            cores={"n0": 2, "n1": 1})
    assert doc["endpoint"] == {"alpha_us": 30.0, "bandwidth_gbps": 0.5, "core_pools": [
        {"ranks": [0, 1], "cores": 2}, {"ranks": [2, 3], "cores": 1}]}
    topo = parse_topology(doc, "<m>", 4)
    assert topo.endpoint_alpha_s == pytest.approx(3e-5) and topo.endpoint_gbps == 0.5
    assert topo.core_pools == (((0, 1), 2.0), ((2, 3), 1.0))
    assert len(topo.links) == 12 and len(parse_topology(
        measured_topology("one", ["n0"], {}, 0.0), "<1>", 1).links) == 0


def _reference_route(topo, a: int, b: int) -> tuple[int, ...]:
    """Helper: fewest-hop route by a plain FIFO search over sorted neighbours."""
    adj = {}
    for ln in topo.links:
        adj.setdefault(ln.src, []).append(ln.dst)
    prev, queue = {a: -1}, [a]
    for x in queue:
        for y in sorted(adj.get(x, [])):
            if y not in prev:
                prev[y] = x
                queue.append(y)
    hops = []
    while prev[b] != -1:
        hops.append(topo.link_id(prev[b], b))
        b = prev[b]
    return tuple(reversed(hops))


@pytest.mark.parametrize("doc", [
    rail_topology(3, 4),
    {"ranks": 6, "links": [{"a": a, "b": b, "bandwidth_gbps": 1.0}
                           for a, b in [(0, 4), (4, 2), (2, 5), (5, 1), (1, 3), (0, 3)]]},
])
def test_routes_are_the_fewest_hop_search_paths(doc):
    topo = parse_topology(doc)
    n = topo.num_ranks
    for a in range(n):
        for b in range(n):
            if a != b:
                assert topo.route(a, b) == _reference_route(topo, a, b), (a, b)


def test_rail_topology_shape():
    topo = parse_topology(rail_topology(4, 8, nvlink_us=3, net_us=8, stage_us=10,
                                        endpoint_us=2))
    assert topo.num_ranks == 32 and topo.name == "rail-4x8"
    # 4 nodes x C(8, 2) NVLink pairs, 8 rails x C(4, 2) node pairs, both directions
    assert len(topo.links) == 2 * (4 * 28 + 8 * 6)
    assert topo.link_id(0, 7) is not None and topo.link_id(0, 8) is not None
    assert topo.link_id(0, 9) is None  # other node, other rail: two hops
    assert len(topo.route(0, 9)) == 2
    nic = topo.resource_names.index("nic0:out")
    assert nic in topo.link_resources[topo.link_id(0, 8)]
    assert topo.stage_alpha_s == pytest.approx(1e-5)
    assert topo.endpoint_alpha_s == pytest.approx(2e-6)
    plain = parse_topology(rail_topology(2, 2))
    assert not plain.link_alpha_s.any() and plain.stage_alpha_s == 0.0
    assert plain.endpoint_alpha_s == 0.0
    assert parse_topology(rail_topology(1, 1)).links == ()


def test_topology_spec():
    doc = topology_spec("rail:2x4,net_us=8,stage_us=10,nic_gbps=50")
    assert doc == rail_topology(2, 4, net_us=8.0, stage_us=10.0, nic_gbps=50.0)
    assert topology_spec("rail:16x8")["ranks"] == 128


@pytest.mark.parametrize("spec, message", [
    ("mesh:2x2", "expected rail:NODESxGPUS"),
    ("rail:", "expected rail:NODESxGPUS"),
    ("rail:4", "shape '4' is not NODESxGPUS"),
    ("rail:0x8", "shape '0x8' is not NODESxGPUS"),
    ("rail:2x-1", "is not NODESxGPUS"),
    ("rail:2x2,foo=1", "'foo=1' is not key=value"),
    ("rail:2x2,net_us", "'net_us' is not key=value"),
    ("rail:2x2,net_us=-1", "net_us must be a finite number >= 0, got '-1'"),
    ("rail:2x2,net_us=nan", "net_us must be a finite number >= 0"),
    ("rail:2x2,nic_gbps=0", "nic_gbps must be a finite number > 0"),
])
def test_bad_topology_specs(spec, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        topology_spec(spec)
    assert "\n" not in str(info.value)


def test_names_from_a_topology_file_are_escaped(tmp_path):
    """A node or topology name is data: in errors and in the name shown, never raw."""
    hostile = "n\nhpcgnn: error: forged\x1b[2J"
    d = _doc()
    d["name"] = hostile
    assert parse_topology(d).name == "n\\nhpcgnn: error: forged\\x1b[2J"
    d["nodes"][1]["name"] = d["nodes"][0]["name"] = hostile
    with pytest.raises(InputError) as err:
        parse_topology(d, "t.json")
    assert "appears twice" in str(err.value)
    assert "\n" not in str(err.value) and "\x1b" not in str(err.value)


def test_a_shipped_topology_is_found_by_its_name_from_anywhere(tmp_path, monkeypatch):
    from hpcgnn.planning.topology import load_topology

    monkeypatch.chdir(tmp_path)  # as from an installed wheel: no configs/ below the cwd
    assert load_topology("dgx1").num_ranks == load_topology("dgx1", ranks=8).num_ranks == 8
    with pytest.raises(InputError, match=r"unknown topology 'dgx9' \(known: .*dgx1"):
        load_topology("dgx9")


def _bus_doc(within: bool) -> dict:
    """Helper: 4 ranks of one node whose pairs 0-2 and 1-3 pass through a bus inside it."""
    doc = {"ranks": 4, "nodes": [{"name": "n", "ranks": [0, 1, 2, 3]}],
           "shared": [{"name": "bus", "node": "n", "bandwidth_gbps": 5.0, "within": within}],
           "links": [{"a": a, "b": b, "bandwidth_gbps": 10.0}
                     for a in range(4) for b in range(a + 1, 4)]}
    for ln in doc["links"]:
        if (ln["a"], ln["b"]) in ((0, 2), (1, 3)):
            ln["via"] = ["bus"]
    return doc


def test_a_shared_resource_within_a_node_carries_links_inside_it():
    topo = parse_topology(_bus_doc(True))
    out = topo.resource_names.index("bus:out")
    for a, b in [(0, 2), (2, 0), (1, 3), (3, 1)]:
        assert topo.link_resources[topo.link_id(a, b)] == (topo.link_id(a, b), out)
    assert topo.link_resources[topo.link_id(0, 1)] == (topo.link_id(0, 1),)
    with pytest.raises(InputError, match="does not have exactly one end in its node 'n'"):
        parse_topology(_bus_doc(False))
    bad = _bus_doc(True)
    bad["shared"][0]["within"] = "yes"
    with pytest.raises(InputError, match="'within' must be true or false"):
        parse_topology(bad)


def test_a_measured_topology_records_buses_inside_a_host_and_their_timings():
    from hpcgnn.planning.contention import PairTiming, shared_buses
    from hpcgnn.planning.topology import measured_topology

    hosts = ["n0"] * 4 + ["n1"] * 2
    pairs = {(a, b): (2e-6, 1e-10) for a in range(6) for b in range(a + 1, 6)}
    timings = [PairTiming("n0", ((0, 1), (2, 3)), (1e-3, 1e-3), 1e-3),
               PairTiming("n0", ((0, 2), (1, 3)), (1e-3, 1e-3), 2e-3),
               PairTiming("n0", ((0, 3), (1, 2)), (1e-3, 1e-3), 1e-3)]
    doc = measured_topology("m", hosts, pairs, 5e-5, nics={"n0": 1e9, "n1": 1e9},
                            buses=shared_buses(timings, 1 << 20), contention=timings)
    assert doc["name"] == "m"
    assert doc["shared"][-1] == {"name": "bus-n0-0", "node": "n0", "within": True,
                                 "bandwidth_gbps": round(4 * (1 << 20) / 2e-3 / 1e9, 4)}
    assert [c["shared"] for c in doc["contention"]] == [False, True, False]
    topo = parse_topology(doc, "<m>", 6)
    bus = topo.resource_names.index("bus-n0-0:out")
    through = sorted((ln.src, ln.dst) for li, ln in enumerate(topo.links)
                     if bus in topo.link_resources[li])
    assert through == [(0, 2), (1, 3), (2, 0), (3, 1)]
    nic = topo.resource_names.index("nic-n0:out")
    assert nic in topo.link_resources[topo.link_id(0, 4)]
    assert "contention" not in measured_topology("m", hosts, pairs, 0.0)
