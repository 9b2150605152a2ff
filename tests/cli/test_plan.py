import json

import numpy as np
import pytest

from hpcgnn.cli.main import main
from hpcgnn.planning import load_topology
from tests.graphs import write_random_graph
from tests.mpi import assert_all, error_output

DGX1 = "configs/topologies/dgx1.json"


def test_plan_round_trip(tmp_path, capsys):
    path = write_random_graph(tmp_path / "g.h5", n=300, avg_degree=6, seed=2)
    out = tmp_path / "plan.json"
    argv = ["plan", str(path), "--parts", "8", "--topology", DGX1, "--feature-dim", "32",
            "--out", str(out), "--tables", "--chunks", "4"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "p2p:" in text and "planned (SPST):" in text and "reduction" in text
    assert "even blocks" in text
    doc = json.loads(out.read_text())
    assert doc["parts"] == 8 and doc["bytes_per_vertex"] == 128
    assert 0 < doc["planned"]["time_s"] <= doc["p2p"]["time_s"]
    assert doc["reduction"] == 1 - doc["planned"]["time_s"] / doc["p2p"]["time_s"]
    stages = doc["planned"]["stages"]
    assert abs(sum(s["time_s"] for s in stages) - doc["planned"]["time_s"]) < 1e-12
    assert len(doc["p2p"]["stages"]) == 1
    tables = np.load(doc["tables_file"])
    counts = {f"s{t['stage']}_{t['src']}_{t['dst']}": t["count"]
              for t in doc["planned"]["tables"]}
    assert {k: len(tables[k]) for k in tables.files} == counts
    pairs = np.array(doc["relation_pairs"])
    assert pairs.sum() == sum(t["count"] for t in doc["p2p"]["tables"])


def test_plan_rejects_parts_not_matching_topology(tmp_path, capsys):
    path = write_random_graph(tmp_path / "g.h5", n=40, seed=1)
    assert main(["plan", str(path), "--parts", "4", "--topology", DGX1]) == 1
    err = capsys.readouterr().err
    assert f"topology {DGX1}: has 8 ranks but the job has 4" in err


@pytest.mark.parametrize("depth", ["0", "-1"])
def test_plan_refuses_a_depth_below_one(tmp_path, capsys, depth):
    path = write_random_graph(tmp_path / "g.h5", n=40, seed=1)
    assert main(["plan", str(path), "--parts", "8", "--topology", DGX1,
                 "--max-stages", depth]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"hpcgnn: error: --max-stages must be >= 1, got {depth}"]


def test_plan_reports_bad_topology(tmp_path, capsys):
    path = write_random_graph(tmp_path / "g.h5", n=40, seed=1)
    topo = tmp_path / "t.json"
    topo.write_text('{"ranks": 2, "links": [{"a": 0, "b": 1, "bandwidth_gbps": 0}]}')
    assert main(["plan", str(path), "--parts", "2", "--topology", str(topo)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("hpcgnn: error: topology") and "non-positive" in err
    assert len(err.splitlines()) == 1


@pytest.fixture
def steady_timings(monkeypatch):
    """The calibration's messages still move, but are timed as an idle machine would time
    them (2 us + 0.1 ns per byte), so a busy test machine cannot make it refuse its fits;
    the refusal itself is tested with injected timings too."""
    import functools

    import hpcgnn.comm.calibrate as cal

    real_round_trip, real_all_to_all, real_synced = cal._round_trip, cal._all_to_all, cal._synced

    def seconds(nbytes):
        return 2e-6 + 1e-10 * nbytes

    def round_trip(comm, a, b, buf, repeats):
        real_round_trip(comm, a, b, buf, 1)
        return 2 * seconds(buf.numel() * buf.element_size())

    def all_to_all(comm, row_bytes, rows_per_peer, repeats):
        real_all_to_all(comm, row_bytes, rows_per_peer, 1)
        return seconds(2 * (comm.size - 1) * row_bytes * rows_per_peer)

    def synced(comm, call):
        real_synced(comm, call)
        buf = call.args[0] if isinstance(call, functools.partial) else None
        return seconds(0 if buf is None else buf.numel() * buf.element_size())

    monkeypatch.setattr(cal, "_round_trip", round_trip)
    monkeypatch.setattr(cal, "_all_to_all", all_to_all)
    monkeypatch.setattr(cal, "_synced", synced)


@pytest.mark.mpi
def test_calibrate_writes_a_topology_of_the_job(shared_tmp, world, capsys, steady_timings):
    out = shared_tmp / "measured.json"
    assert_all(world, main(["plan", "--calibrate", "--out", str(out)]) == 0)
    world.mpi.Barrier()
    topo = load_topology(out, world.size)
    ok = (topo.num_ranks == world.size and len(topo.links) == world.size * (world.size - 1)
          and all(ln.bandwidth_gbps > 0 and ln.kind == "intra-node" for ln in topo.links)
          and (world.size == 1 or 0 < topo.endpoint_gbps < np.inf)
          and sum(len(r) for r, c in topo.core_pools) == world.size * (world.size > 1))
    assert_all(world, ok, str(topo))
    capsys.readouterr()
    assert_all(world, main(["plan", "--calibrate"]) == 1)
    assert "--calibrate takes --out" in error_output(world, capsys.readouterr().err)


@pytest.mark.mpi
@pytest.mark.ranks(2, 3, 4)
def test_calibrate_measures_each_hosts_way_out_as_a_shared_resource(
    shared_tmp, world, monkeypatch, steady_timings
):
    """Ranks on two hosts (named so here): the pairs across them measured at once give
    each host a ``nic-<host>`` resource that every inter-node link passes through."""
    from hpcgnn.comm import calibrate as cal_mod

    monkeypatch.setattr(cal_mod.MPI, "Get_processor_name", lambda: f"h{world.rank % 2}")
    out = shared_tmp / "two-hosts.json"
    assert_all(world, main(["plan", "--calibrate", "--out", str(out)]) == 0)
    world.mpi.Barrier()
    topo = load_topology(out, world.size)
    nics = [n for n in topo.resource_names if n.startswith("nic-")]
    across = [ln for ln in topo.links if ln.kind == "inter-node"]
    ok = (sorted(nics) == ["nic-h0:in", "nic-h0:out", "nic-h1:in", "nic-h1:out"]
          and len(across) == 2 * (world.size // 2) * ((world.size + 1) // 2)
          and all(len(topo.link_resources[topo.links.index(ln)]) == 3 for ln in across)
          and bool(np.all(topo.resource_bw > 0)))
    assert_all(world, ok, f"{topo.resource_names}")


@pytest.mark.mpi
@pytest.mark.ranks(2, 3, 4)
def test_calibrate_writes_a_machine_file_the_model_reads(
    shared_tmp, world, capsys, steady_timings
):
    """``--out-machine``: the pairs' medians as a machine file; ``hpcgnn model`` takes it."""
    from hpcgnn.cost.machine import load_machine

    out, machine = shared_tmp / "t.json", shared_tmp / "here.json"
    rc = main(["plan", "--calibrate", "--out", str(out), "--out-machine", str(machine)])
    assert_all(world, rc == 0, "the calibration refused its fit")
    world.mpi.Barrier()
    m = load_machine(str(machine))
    topo = load_topology(out, world.size)
    betas = sorted(1 / (ln.bandwidth_gbps * 1e9) for ln in topo.links)  # the pairs' fits
    beta = m.links["intra_node"].beta
    ok = (m.name == "here" and m.gpus_per_node == world.size and set(m.links) == {"intra_node"}
          and betas[0] * (1 - 1e-4) <= beta <= betas[-1] * (1 + 1e-4)  # the file rounds
          and m.links["intra_node"].alpha > 0)
    assert_all(world, ok, f"{m} vs {betas}")
    # the busy collectives' fit for this job size, which the model takes at this P
    fit = m.collectives.get(world.size)
    ok = fit is not None and fit.beta > 0 and m.link(world.size) == fit
    assert_all(world, ok, f"no collective fit at P = {world.size}: {m.collectives}")
    assert_all(world, m.link(world.size + 1) == m.links["intra_node"], "another P: the link")
    # every smaller group size that divides P has its own fit, which its grid axes take
    groups = m.groups.get(world.size, {})
    ok = set(groups) == {q for q in range(2, world.size) if world.size % q == 0}
    ok = ok and all(g.beta > 0 for g in groups.values())
    if ok and 2 in groups:
        ok = m.axis_betas((2, world.size // 2)) == {"world": fit.beta, "col": groups[2].beta,
                                                    "row": groups[2].beta, "fiber": fit.beta}
    assert_all(world, ok, f"group fits at P = {world.size}: {m.groups}")
    printed = capsys.readouterr().out  # rank 0 says the fit it wrote
    ok = world.rank != 0 or (f"at P = {world.size} alpha " in printed
                             and " GB/s per byte received" in printed)
    assert_all(world, ok, printed)
    if world.rank == 0:
        assert main(["model", "--shape", "1000,10000,16,4", "--procs", str(world.size),
                     "--machine", str(machine), "--top", "1"]) == 0
        shown = capsys.readouterr().out
        assert "on here" in shown
        assert ("calibrated grid axes of fewer ranks, by size: 2: beta=" in shown) == (
            world.size == 4)
        assert main(["plan", "--out-machine", str(machine)]) == 1
        assert "--out-machine writes what --calibrate measures" in capsys.readouterr().err
        assert main(["plan", "--device", "cpu", "--out", str(machine)]) == 1
        assert "plan measures buffers only with --calibrate" in capsys.readouterr().err


def test_write_topology_then_plan_on_it(tmp_path, capsys):
    topo = tmp_path / "rail.json"
    assert main(["plan", "--write-topology", "rail:2x4,net_us=8", "--out", str(topo)]) == 0
    assert "rail-2x4, 8 ranks on 2 node(s)" in capsys.readouterr().out
    t = load_topology(topo, 8)
    assert len(t.links) == 2 * (2 * 6 + 4) and t.link_id(0, 5) is None
    path = write_random_graph(tmp_path / "g.h5", n=200, avg_degree=6, seed=3)
    out = tmp_path / "plan.json"
    assert main(["plan", str(path), "--parts", "8", "--topology", str(topo),
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["topology"] == "rail-2x4" and doc["relation_time_s"] >= 0
    assert doc["planned"]["time_s"] <= doc["p2p"]["time_s"]


@pytest.mark.parametrize("argv, message", [
    (["--write-topology", "rail:2x", "--out", "T"], "topology spec 'rail:2x': shape"),
    (["--write-topology", "rail:10000x10000", "--out", "T"],
     "1999800000000 links, more than the 10000000 a topology may have"),
    (["--write-topology", "rail:2x2"], "--write-topology takes --out T.json"),
    (["g.h5", "--write-topology", "rail:2x2", "--out", "T"], "--write-topology takes --out"),
    (["--write-topology", "rail:2x2", "--calibrate", "--out", "T"], "and no graph"),
])
def test_write_topology_refuses_bad_use(tmp_path, capsys, argv, message):
    argv = [str(tmp_path / a) if a == "T" else a for a in argv]
    assert main(["plan", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "T").exists()


def test_plan_lists_the_slowest_links_of_a_busy_stage(tmp_path, capsys):
    from hpcgnn.cli.plan import SHOWN_LINKS

    topo = tmp_path / "rail.json"
    assert main(["plan", "--write-topology", "rail:4x8", "--out", str(topo)]) == 0
    path = write_random_graph(tmp_path / "g.h5", n=400, avg_degree=8, seed=4)
    capsys.readouterr()
    assert main(["plan", str(path), "--parts", "32", "--topology", str(topo)]) == 0
    stage1 = next(ln for ln in capsys.readouterr().out.splitlines() if "stage 1:" in ln)
    busy = int(stage1.split(" links:")[0].rsplit(" ", 1)[1])
    assert busy > SHOWN_LINKS and stage1.endswith(f" ... {busy - SHOWN_LINKS} more")
    assert len(stage1.split(" links: ")[1].split()) == SHOWN_LINKS + 3


@pytest.mark.mpi
def test_calibration_refuses_a_bandwidth_it_cannot_fit(shared_tmp, world, capsys, monkeypatch):
    import hpcgnn.comm.calibrate as cal

    if world.size < 2:
        pytest.skip("no pair of ranks to time")
    # the 1 MiB ping-pong timed no slower than the 8-byte one (a busy machine): the fit
    # used to clamp beta to 10^-12 s/B, i.e. 10^9 GB/s
    monkeypatch.setattr(cal, "_round_trip", lambda comm, a, b, buf, repeats: 1e-3)
    out = shared_tmp / "cal.json"
    rc = main(["plan", "--calibrate", "--out", str(out)])
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc == 1 and len(err) == 1 and "timed no slower" in err[0], err)
    assert_all(world, not out.exists(), "a calibration was written")


def test_plan_baselines_lists_every_method(tmp_path, capsys):
    path = write_random_graph(tmp_path / "g.h5", n=300, avg_degree=6, seed=2)
    out = tmp_path / "plan.json"
    argv = ["plan", str(path), "--parts", "8", "--topology", DGX1, "--feature-dim", "32"]
    assert main([*argv, "--out", str(out)]) == 0
    plain = capsys.readouterr().out
    assert "methods" not in plain and "baselines" not in json.loads(out.read_text())
    assert main([*argv, "--baselines", "--host-gbps", "6", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(plain.rsplit("reduction", 1)[0])  # the plans' report unchanged
    rows = {ln.split()[0]: ln.split()[1:] for ln in text.split("set-up once")[1].splitlines()
            if ln.startswith("  ") and not ln.strip().startswith("method")}
    assert list(rows) == ["p2p", "SPST", "Swap", "Replication", "DGCL-R"]
    doc = json.loads(out.read_text())
    by = {m["method"]: m for m in doc["baselines"]}
    pairs = [c for row in doc["relation_pairs"] for c in row]
    assert by["p2p"]["exchange_bytes"] == sum(pairs) * 128
    assert by["p2p"]["exchange_s"] == doc["p2p"]["time_s"]
    assert by["SPST"]["exchange_s"] == doc["planned"]["time_s"]
    assert by["Replication"]["exchange_bytes"] == 0
    assert by["Replication"]["setup_bytes"] == by["p2p"]["exchange_bytes"]
    assert by["Swap"]["exchange_bytes"] == (300 + sum(pairs)) * 128
    r = by["DGCL-R"]
    assert r["setup_bytes"] == r["replicated_rows"] * 128 < by["Replication"]["setup_bytes"]
    assert r["exchange_bytes"] >= (sum(pairs) - r["replicated_rows"]) * 128 > 0
    assert float(rows["Swap"][1]) == pytest.approx(by["Swap"]["exchange_s"] * 1e3, abs=1e-4)


def test_plan_host_gbps_needs_baselines(tmp_path, capsys):
    path = write_random_graph(tmp_path / "g.h5", n=40, seed=1)
    argv = ["plan", str(path), "--parts", "8", "--topology", DGX1]
    assert main([*argv, "--host-gbps", "6"]) == 1
    assert "--host-gbps sets Swap's host link (add --baselines)" in capsys.readouterr().err
    assert main([*argv, "--baselines", "--host-gbps", "0"]) == 1
    assert "--host-gbps must be a positive finite number" in capsys.readouterr().err


def test_plan_records_each_pairs_method(tmp_path):
    """DGCL 6.2 in plan.json: each table names its pair's method (DGX-1: ipc within a
    socket and over NVLink, pinned host memory across the sockets otherwise)."""
    from hpcgnn.planning.methods import pair_method

    path = write_random_graph(tmp_path / "g.h5", n=300, avg_degree=6, seed=2)
    out = tmp_path / "plan.json"
    assert main(["plan", str(path), "--parts", "8", "--topology", DGX1, "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    topo = load_topology(DGX1)
    for plan in ("p2p", "planned"):
        tables = doc[plan]["tables"]
        assert all(t["method"] == pair_method(topo, t["src"], t["dst"]) for t in tables)
        by: dict[str, int] = {}
        for t in tables:
            by[t["method"]] = by.get(t["method"], 0) + t["count"]
        assert doc[plan]["method_vertices"] == by
    assert set(doc["p2p"]["method_vertices"]) == {"ipc", "host-staged"}


@pytest.mark.mpi
@pytest.mark.ranks(2, 3, 4)
@pytest.mark.parametrize(("contend", "cores"), [(False, 4), (True, 4), (True, 1)])
def test_calibrate_times_the_pairs_of_a_host_two_at_once(
    shared_tmp, world, monkeypatch, steady_timings, contend, cores
):
    """Every two disjoint pairs of a host are timed alone and at once and recorded
    (``contention``); where they slow each other down (injected here: this machine's
    timings are not checked), the ranks behind the shared resource get a ``within`` bus
    that their pairs' links pass through, unless the host's ranks share cores (set here),
    which its core pool charges already."""
    import hpcgnn.comm.calibrate as cal

    real, real_cores = cal._pairs_at_once, cal.host_cores

    def host_cores(comm, category):
        hosts, _ = real_cores(comm, category)
        return hosts, dict.fromkeys(hosts, cores)

    monkeypatch.setattr(cal, "host_cores", host_cores)
    if contend:  # the pairs move their bytes, and take 1 ms per pair running at once
        def at_once(comm, pairs, buf, repeats):
            real(comm, pairs, buf, 1)
            return 1e-3 * len(pairs)

        monkeypatch.setattr(cal, "_pairs_at_once", at_once)
    out = shared_tmp / f"contention-{contend}-{cores}.json"
    assert_all(world, main(["plan", "--calibrate", "--out", str(out)]) == 0)
    world.mpi.Barrier()
    doc = json.loads(out.read_text())
    p = world.size
    records = doc["contention"]
    ok = len(records) == (3 if p == 4 else 0) and all(
        set(r) == {"host", "pairs", "alone_us", "together_us", "slowdown", "shared"}
        and len({x for pq in r["pairs"] for x in pq}) == 4 and r["shared"] == contend
        for r in records)
    assert_all(world, ok, str(records))
    buses = [sh for sh in doc.get("shared", []) if sh.get("within")]
    topo = load_topology(out, p)
    through = [ln for li, ln in enumerate(topo.links) if len(topo.link_resources[li]) > 1]
    want = 1 if contend and p == 4 and cores >= p else 0
    ok = len(buses) == want and len(through) == 12 * want and all(
        b["node"] == doc["nodes"][0]["name"] and b["bandwidth_gbps"] > 0 for b in buses)
    assert_all(world, ok, f"{buses} {len(through)}")
