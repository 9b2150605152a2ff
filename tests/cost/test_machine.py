"""Machine files: every shipped file loads; bad names and files fail in one line."""

import json

import pytest

from hpcgnn.cost.machine import load_machine, machine_names, tiers_from_flag
from hpcgnn.errors import ConfigError


def test_every_shipped_machine_loads_with_its_sources():
    assert {"summit", "perlmutter", "laptop"} <= set(machine_names())
    for name in machine_names():
        m = load_machine(name)
        assert m.name == name and "nominal" in m.comment
        assert m.link(1) is m.links["intra_node"]


def test_summit_uses_the_network_beyond_one_node():
    m = load_machine("summit")
    assert m.gpus_per_node == 6 and m.injection_gbps == 25.0
    assert m.link_kind(6) == "intra_node" and m.link_kind(7) == "inter_node"
    assert m.links["inter_node"].beta == pytest.approx(1 / 12.5e9)  # per socket (CAGNET)
    # every GPU of a node sends at once: 6 share the node's 25 GB/s injection
    assert m.link(64).beta == pytest.approx(6 / 25e9) and m.link(64).alpha == 1e-5
    assert m.link(6).beta == pytest.approx(1 / 50e9)  # one node: NVLink, no injection
    pm = load_machine("perlmutter")  # a NIC per GPU: the link's 25 GB/s stands
    assert pm.link(8).beta == pytest.approx(pm.links["inter_node"].beta)
    assert load_machine("laptop").link_kind(4096) == "intra_node"  # no network


def test_a_cpu_machine_fills_a_node_with_a_rank_per_numa_domain():
    cpu = load_machine("perlmutter-cpu")
    assert cpu.gpus_per_node == 0 and cpu.node_ranks == 8 == cpu.numa_per_node
    assert cpu.link_kind(8) == "intra_node" and cpu.link_kind(9) == "inter_node"
    # 8 ranks share the node's one 25 GB/s NIC
    assert cpu.link(64).beta == pytest.approx(8 / 25e9)
    assert load_machine("perlmutter").node_ranks == 4 and load_machine("laptop").node_ranks == 1


@pytest.mark.parametrize("doc, words", [
    (None, "unknown machine 'nope' (known: laptop, perlmutter, perlmutter-cpu, summit"),
    ("{", "not valid JSON"),
    ([], "top level must be a JSON object"),
    ({"gpus_per_node": 4, "links": {}}, "missing field 'injection_gbps'"),
    ({"gpus_per_node": -1, "injection_gbps": 1, "links": {}}, "'gpus_per_node' must be"),
    ({"gpus_per_node": 4, "injection_gbps": 1, "links": {"inter_node": {}}}, "'intra_node'"),
    ({"gpus_per_node": 4, "injection_gbps": 1,
      "links": {"intra_node": {"alpha": 1e-6, "beta": 0}}}, "'intra_node.beta' must be a positive"),
    ({"gpus_per_node": 4, "injection_gbps": 1,
      "links": {"intra_node": {"alpha": 1e-6, "beta": 1e-9}, "nvlink": {}}}, "unknown link kind"),
    ({"gpus_per_node": 4, "injection_gbps": 1, "links": {"intra_node": {"alpha": 0, "beta": 1}},
      "tier_gbps": {"hd": 0}}, "'tier_gbps.hd' must be a positive"),
    ({"gpus_per_node": 4, "injection_gbps": 1, "links": {"intra_node": {"alpha": 0, "beta": 1}},
      "tier_gbps": {"pcie": 25}}, "'tier_gbps' must be an object of hd, dd, ru"),
    ({"gpus_per_node": 4, "injection_gbps": 1, "links": {"intra_node": {"alpha": 0, "beta": 1}},
      "cores_per_node": 63, "sockets_per_node": 2}, "must be multiples of 'sockets_per_node'"),
    ({"gpus_per_node": 4, "injection_gbps": 1, "links": {"intra_node": {"alpha": 0, "beta": 1}},
      "threads_per_core": 0}, "'threads_per_core' must be an integer >= 1"),
])
def test_bad_machines_fail_in_one_line(tmp_path, doc, words):
    if doc is None:
        name = "nope"
    else:
        path = tmp_path / "m.json"
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        name = str(path)
    with pytest.raises(ConfigError) as err:
        load_machine(name)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_tier_bandwidths_come_from_the_flag_or_a_machine_file():
    assert tiers_from_flag(None) is None and tiers_from_flag("") is None
    assert tiers_from_flag("hd=10,dd=100") == {"hd": 10.0, "dd": 100.0}
    assert tiers_from_flag("perlmutter") == {"hd": 25.0, "dd": 100.0, "ru": 1500.0}
    assert load_machine("summit").tier_gbps == {"hd": 50.0, "dd": 50.0, "ru": 900.0}
    assert load_machine("laptop").tier_gbps is None
    with pytest.raises(ConfigError, match="machine 'laptop' gives no tier_gbps"):
        tiers_from_flag("laptop")
    with pytest.raises(ConfigError, match="unknown machine 'nope'"):
        tiers_from_flag("nope")


def test_a_fit_recovers_alpha_and_beta_and_refuses_no_bandwidth():
    from hpcgnn.cost.machine import Link, fit_link

    alpha, beta = 2e-5, 3e-10
    samples = [(m, b, alpha * m + beta * b) for m, b in ((4, 1e3), (4, 1e6), (2, 5e4))]
    got = fit_link(samples)
    assert got.alpha == pytest.approx(alpha, rel=1e-9) and got.beta == pytest.approx(beta)
    # a negative free alpha: the fit through the origin
    low = fit_link([(1, 1e3, 1e-8), (1, 1e6, 1e-4)])
    assert low.alpha == 0.0 and 1e-11 < low.beta < 1e-10
    with pytest.raises(ConfigError, match="no positive per-byte time"):
        fit_link([(1, 1e3, 1e-3), (1, 1e6, 1e-4)])
    assert isinstance(got, Link)


def test_collective_fits_are_per_job_size_and_merge_into_the_file():
    from hpcgnn.cost.machine import Link, measured_machine, parse_machine

    pairs = {(0, 1): (1e-5, 1e-10)}
    first = measured_machine("m", ["h", "h"], pairs, "test", Link(3e-6, 2e-10))
    again = measured_machine("m", ["h"] * 4, {**pairs, (2, 3): (1e-5, 1e-10)}, "test",
                             Link(5e-6, 4e-10), previous=first)
    m = parse_machine(again)
    assert set(m.collectives) == {2, 4}
    assert m.link(2) == Link(3e-6, 2e-10) and m.link(4) == Link(5e-6, 4e-10)
    assert m.link(3) == m.links["intra_node"]
    with pytest.raises(ConfigError, match="'collectives' must map"):
        parse_machine({**again, "collectives": {"x": {"alpha": 1, "beta": 1}}})


def test_group_fits_give_each_grid_axis_its_group_sizes_beta():
    from hpcgnn.cost.machine import Link, measured_machine, parse_machine

    pairs = {(a, b): (1e-5, 1e-10) for a in range(8) for b in range(a + 1, 8)}
    groups = {2: Link(1e-6, 5e-10), 4: Link(2e-6, 4e-10)}
    m = parse_machine(measured_machine("m", ["h"] * 8, pairs, "test", Link(3e-6, 3e-10),
                                       group_fits=groups))
    assert m.groups == {8: groups} and m.link(8) == Link(3e-6, 3e-10)
    # 3D 2x1x4: columns of 2, rows of 1 (no bytes), fibers of 4; the world's all-reduce
    assert m.axis_betas((2, 1, 4)) == {"world": 3e-10, "col": 5e-10, "row": 3e-10,
                                       "fiber": 4e-10}
    assert m.axis_betas((8,)) == {"world": 3e-10, "col": 3e-10, "row": 3e-10, "fiber": 3e-10}
    doc = measured_machine("m", ["h"] * 8, pairs, "test", Link(3e-6, 3e-10), group_fits=groups)
    doc["collectives"]["8"]["groups"]["3"] = {"alpha": 1, "beta": 1}
    with pytest.raises(ConfigError, match="groups' must map group sizes dividing 8"):
        parse_machine(doc)


def test_group_fits_stay_inside_a_node_where_the_calibration_measured_them():
    from hpcgnn.cost.machine import Link, measured_machine, parse_machine

    hosts = ["a"] * 4 + ["b"] * 4
    pairs = {(a, b): (1e-5, 1e-10 if hosts[a] == hosts[b] else 1e-9)
             for a in range(8) for b in range(a + 1, 8)}
    m = parse_machine(measured_machine("m", hosts, pairs, "test", Link(3e-6, 3e-9),
                                       group_fits={2: Link(1e-6, 5e-10)}))
    # 2x4: the columns of 2 pair rank i with i + 4 on the other node; the calibration's
    # groups of 2 were consecutive ranks of one node, so the columns take the job's fit
    assert m.axis_betas((2, 4)) == {"world": 3e-9, "col": 3e-9, "row": 3e-9, "fiber": 3e-9}
    assert m.axis_betas((4, 2))["row"] == 5e-10  # rows of 2 consecutive ranks: in a node


def test_axis_betas_follow_the_nodes():
    from hpcgnn.cli.model import shape_meta
    from hpcgnn.config import TrainConfig
    from hpcgnn.cost.ranking import rank_choices

    m = load_machine("summit")
    inside, network = m.links["intra_node"].beta, m.link(64).beta
    one, two = m.stream_beta(1), m.stream_beta(2)  # ring streams on a socket's port
    # 32x2: the row pairs inside a node; the 2 column rings leave each node from ranks 4
    # and 5, one socket; the world's one ring leaves it once
    assert m.axis_betas((32, 2)) == {"world": one, "col": two, "row": inside,
                                     "fiber": inside}
    assert one == pytest.approx(1 / 12.5e9) and two == pytest.approx(2 / 12.5e9)
    assert two < network
    assert m.axis_betas((16, 4))["row"] == one  # rows of 4 straddle nodes of 6: one ring out
    assert set(m.axis_betas((3, 2)).values()) == {m.link(6).beta}  # one node
    meta = shape_meta("232965,114848857,602,41")
    cfg = TrainConfig(layers=3, hidden=16)
    uniform = {(r["algo"], r["grid"]): r for r in rank_choices(meta, cfg, 64, 1e-5, network)}
    nodes = {(r["algo"], r["grid"]): r
             for r in rank_choices(meta, cfg, 64, 1e-5, network, None, m.axis_betas)}
    # 1.5D 32x2: the row all-reduce inside a node, the column broadcasts across nodes at
    # two streams a port where the uniform charge assumes three (every GPU of a socket)
    a, b = uniform["1.5d", "32x2"], nodes["1.5d", "32x2"]
    assert b["time_s"] < a["time_s"]
    assert b["time_by_phase_s"]["dense_bcast"] == pytest.approx(
        a["time_by_phase_s"]["dense_bcast"] * two / network)
    assert b["time_by_phase_s"]["allreduce"] < a["time_by_phase_s"]["allreduce"]
    assert abs(sum(b["time_by_phase_s"].values()) - b["time_s"]) < 1e-12
    # 1D: every collective is the world's one ring, a stream per node at the link's rate
    c, d = uniform["1d", "64"], nodes["1d", "64"]
    assert d["time_by_phase_s"]["dense_bcast"] == pytest.approx(
        c["time_by_phase_s"]["dense_bcast"] * one / network)
    assert d["time_by_phase_s"]["latency"] == c["time_by_phase_s"]["latency"]


def test_contention_counts_the_streams_sharing_a_port():
    """Summit, 2 nodes x 6 ranks (12): 1.5D c = 1 sends one ring a node, c = 2 two on a socket."""
    m = load_machine("summit")
    assert m.nics_per_node == 2 and m.node_ranks == 6
    assert m.axis_betas((12, 1))["col"] == pytest.approx(1 / 12.5e9)  # 12.5 GB/s
    assert m.axis_betas((6, 2))["col"] == pytest.approx(2 / 12.5e9)  # 6.25 GB/s each
    assert m.axis_betas((4, 3))["col"] == pytest.approx(3 / 12.5e9) == m.link(12).beta
    # a rank per node: every ring leaves its node alone, at the link's 12.5 GB/s
    single = m.placed(1)
    assert single.node_ranks == 1 and single.link(12).beta == pytest.approx(1 / 12.5e9)
    for dims in ((12, 1), (6, 2), (4, 3)):
        got = single.axis_betas(dims)
        assert got["fiber"] == 2e-11  # no fiber on a 2D grid: nothing leaves a node
        assert got["row"] == (2e-11 if dims[1] == 1 else single.stream_beta(1))
        assert got["world"] == got["col"] == single.stream_beta(1)
    # Perlmutter: a NIC per GPU, so no two streams share one; the link's 25 GB/s stands
    pm = load_machine("perlmutter")
    assert {pm.axis_betas((8, 4))[a] for a in ("col", "world")} == {pm.links["inter_node"].beta}
    with pytest.raises(ConfigError, match=r"--ranks-per-node must be in \[1, 6\]"):
        m.placed(7)
    assert m.placed(None) is m


def test_names_from_a_machine_file_are_escaped(tmp_path):
    """A machine's name and the fields it names are data: never printed raw."""
    hostile = "m\nhpcgnn: error: forged\x1b[2J"
    path = tmp_path / "m.json"
    doc = {"name": hostile, "gpus_per_node": 4, "injection_gbps": 1,
           "links": {"intra_node": {"alpha": 0, "beta": 1}}}
    path.write_text(json.dumps(doc))
    assert load_machine(str(path)).name == "m\\nhpcgnn: error: forged\\x1b[2J"
    doc["links"][hostile] = {}
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as err:
        load_machine(str(path))
    assert "unknown link kind" in str(err.value)
    assert "\n" not in str(err.value) and "\x1b" not in str(err.value)
