import json
import time

import pytest

from hpcgnn.cli.main import main
from hpcgnn.kinds import layer_kind
from tests.graphs import write_random_graph


def test_model_ranks_choices_for_a_large_p(tmp_path, capsys):
    path = write_random_graph(tmp_path / "g.h5", n=200, features=32, seed=1)
    out = tmp_path / "model.json"
    assert main(["model", str(path), "--procs", "1024", "--json", str(out), "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "P=1024" in text and len(text.strip().splitlines()) == 3 + 3
    (result,) = json.loads(out.read_text())["results"]
    times = [c["time_s"] for c in result["choices"]]
    assert times == sorted(times)
    algos = {c["algo"] for c in result["choices"]}
    assert {"1d", "1.5d"} <= algos
    # 1.5d offers every divisor of 1024 as replication factor
    assert sum(c["algo"] == "1.5d" for c in result["choices"]) == 11


def test_model_ranks_65536_ranks_quickly(tmp_path, capsys):
    path = write_random_graph(tmp_path / "g.h5", n=200, features=32, seed=1)
    start = time.perf_counter()
    assert main(["model", str(path), "--procs", "65536", "--top", "1"]) == 0
    assert time.perf_counter() - start < 60
    assert "P=65536" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["--alpha", "-1"], "--alpha must be finite and >= 0, got -1.0"),
    (["--alpha", "nan"], "--alpha must be finite and >= 0, got nan"),
    (["--beta", "inf"], "--beta must be finite and >= 0, got inf"),
    (["--beta", "-0.5"], "--beta must be finite and >= 0, got -0.5"),
    (["--top", "-1"], "--top must be >= 0"),
])
def test_model_rejects_bad_link_numbers(tmp_path, capsys, argv, words):
    path = write_random_graph(tmp_path / "g.h5", n=20, seed=1)
    assert main(["model", str(path), "--procs", "4", *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


@pytest.mark.parametrize("procs", ["0", "-3", str(2**20 + 1), str(10**9)])
def test_model_rejects_bad_procs(tmp_path, capsys, procs):
    path = write_random_graph(tmp_path / "g.h5", n=20, seed=1)
    assert main(["model", str(path), "--procs", procs]) == 1
    assert f"--procs must be in [1, 1048576], got {procs}" in capsys.readouterr().err


def test_model_takes_alpha_and_beta_from_the_machine(tmp_path, capsys):
    path = write_random_graph(tmp_path / "g.h5", n=50, features=8, seed=1)
    out = tmp_path / "m.json"
    assert main(["model", str(path), "--procs", "64", "--machine", "summit", "--json", str(out),
                 "--top", "1"]) == 0
    text = capsys.readouterr().out
    # 6 GPUs share the node's 25 GB/s injection: 4.2 GB/s each, below the socket's link
    assert "on summit" in text and "P=64 (inter_node) alpha=1e-05 s beta=2.4e-10 s/B" in text
    assert json.loads(out.read_text())["machine"] == "summit"
    assert main(["model", str(path), "--procs", "4", "--machine", "summit", "--beta", "1e-9",
                 "--top", "1"]) == 0
    assert "(intra_node) alpha=5e-06 s beta=1e-09 s/B" in capsys.readouterr().out
    assert main(["model", str(path), "--procs", "4", "--machine", "titan"]) == 1
    assert "unknown machine 'titan'" in capsys.readouterr().err


def test_scaling_study_of_a_shape_without_its_file(tmp_path, capsys):
    out = tmp_path / "scaling.json"
    reddit = "232965,114848857,602,41"
    assert main(["model", "--shape", reddit, "--machine", "perlmutter", "--procs", "4,64,1024",
                 "--out", str(out), "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "P=4 (intra_node)" in text and "P=1024 (inter_node)" in text
    assert "latency=" in text and "dense_bcast=" in text  # per-phase times printed
    doc = json.loads(out.read_text())
    assert (doc["num_nodes"], doc["num_features"], doc["num_classes"]) == (232965, 602, 41)
    assert [r["procs"] for r in doc["results"]] == [4, 64, 1024]
    top = doc["results"][2]["choices"][0]
    assert top["algo"] != "1d" and top["max_rank_bytes"] <= top["total_bytes"]
    assert sum(top["time_by_phase_s"].values()) == pytest.approx(top["time_s"])


@pytest.mark.parametrize("argv, words", [
    (["--shape", "10,20,3", "{graph}"], "give a graph file or --shape n,nnz,f, not both"),
    ([], "give a graph file or --shape"),
    (["--shape", "10,20"], "--shape: expected n,nnz,f or n,nnz,f,classes"),
    (["--shape", "0,20,3"], "--shape must be in [1, "),
    (["--shape", "10,x,3"], "--shape: expected integers separated by commas"),
])
def test_model_rejects_bad_shapes(tmp_path, capsys, argv, words):
    path = write_random_graph(tmp_path / "g.h5", n=20, seed=1)
    argv = [a.replace("{graph}", str(path)) for a in argv]
    assert main(["model", *argv, "--procs", "4,8"]) == 1
    err = capsys.readouterr().err
    assert words in err and len(err.splitlines()) == 1


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_the_advisor_predicts_the_busiest_rank_a_run_measures(
    graph_file, shared_tmp, world, capsys, model
):
    """``model``'s busiest-rank bytes per category = ``train``'s ``comm.busiest_rank_bytes``.

    For GraphSAGE (``--model sage`` of both) too: the aggregation moves the layer input
    over ``A`` without self loops, and two weights per layer double the gradient
    all-reduce and SUMMA's dense steps.
    """
    from hpcgnn.config import TrainConfig
    from hpcgnn.cost.ranking import rank_choices
    from hpcgnn.cost.summa import BlockNnzCounter
    from hpcgnn.io import GraphFile
    from tests.mpi import assert_all

    p = world.size
    path = graph_file(n=61, seed=3, features=7, classes=3)
    with GraphFile(path) as gf:
        meta = gf.meta
    advisor = {
        (r["algo"], r["grid"]): r
        for r in rank_choices(meta, TrainConfig(model=model), p, 1e-6, 1e-10,
                              BlockNnzCounter(path, kind=layer_kind(model)))
    }
    d = min(k for k in range(1, p + 1) if p % k == 0 and (k > 1 or p == 1))
    for algo, grid in [("2d", f"{p // d}x{d}"), ("1.5d", f"1x{p}")]:
        metrics = shared_tmp / f"m-{algo}-{model}.json"
        rc = main(["train", str(path), "--algo", algo, "--grid", grid, "--epochs", "2", "--quiet",
                   "--model", model, "--metrics", str(metrics)])
        assert_all(world, rc == 0)
        out = capsys.readouterr().out
        world.mpi.Barrier()
        comm = json.loads(metrics.read_text())["comm"]
        measured = {k: v for k, v in comm["busiest_rank_bytes"].items() if v and k != "control"}
        predicted = advisor[(algo, grid)]["max_rank_bytes_by_category"]
        assert measured == predicted == comm["predicted_busiest_rank_bytes"], (algo, grid)
        if world.rank == 0 and algo == "1.5d" and p > 1:
            assert f"note: c={p} > sqrt(P): {p - 1} of {p} process columns have no stage" in out


def minibatch_metrics(path, grid="2x2", nnz=1000, measured=6000.0):
    doc = {"config": {"grid": grid, "mode": "minibatch"},
           "sampling": {"sampler": "ladies", "spgemm_nnz": nnz,
                        "measured_spgemm_bytes": measured}}
    path.write_text(json.dumps(doc))
    return path


def test_model_prints_the_papers_spgemm_closed_form_beside_a_runs_bytes(tmp_path, capsys):
    m = minibatch_metrics(tmp_path / "m.json")
    assert main(["model", "--procs", "4,16", "--formulas", "paper",
                 "--minibatch-metrics", str(m)]) == 0
    text = capsys.readouterr().out
    assert "8 N (1/c + c/P)" in text and "N=1000" in text
    rows = {tuple(t.split()[:2]): t.split()[2:] for t in text.splitlines()[2:]}
    # 8 bytes x 1000 nonzeros x (1/c + c/P), by hand; measured only at the run's grid
    assert rows[("4", "2x2")] == ["0.008000", "0.006000", "1.333"]
    assert rows[("4", "4x1")] == ["0.010000", "-", "-"]
    assert rows[("16", "8x2")] == ["0.005000", "-", "-"]
    assert rows[("16", "4x4")] == ["0.004000", "-", "-"]
    assert rows[("16", "16x1")] == ["0.008500", "-", "-"]


@pytest.mark.parametrize(("argv", "words"), [
    (["--formulas", "ours"], "needs --formulas paper"),
    (["--formulas", "paper", "--replicated"], "no sparsity-aware SpGEMM"),
    (["--formulas", "paper", "--broken"], "not a minibatch run's metrics"),
])
def test_model_refuses_metrics_without_the_spgemm(tmp_path, capsys, argv, words):
    m = minibatch_metrics(tmp_path / "m.json", nnz=None if "--replicated" in argv else 5)
    if "--broken" in argv:
        m.write_text("{}")
    flags = [a for a in argv if a not in ("--replicated", "--broken")]
    assert main(["model", "--procs", "4", *flags, "--minibatch-metrics", str(m)]) != 0
    assert words in capsys.readouterr().err


@pytest.mark.parametrize("ranks_per_node", [6, 1])
def test_model_reproduces_cagnets_injection_contention_on_summit(tmp_path, ranks_per_node):
    """CAGNET Sec. 6.1: on Summit 1.5D's broadcasts gain nothing from c = 1 to c = 2 with 6
    GPUs a node (two column rings share a socket's 12.5 GB/s), near-linearly with 1."""
    out = tmp_path / "m.json"
    assert main(["model", "--shape", "232965,114848857,602,41", "--procs", "12,24",
                 "--machine", "summit", "--ranks-per-node", str(ranks_per_node), "--top", "0",
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["ranks_per_node"] == ranks_per_node
    for result in doc["results"]:
        p = result["procs"]
        grids = {c["grid"]: c for c in result["choices"] if c["algo"] == "1.5d"}
        one, two = grids[f"{p}x1"], grids[f"{p // 2}x2"]
        bcast = [r["time_by_phase_s"]["dense_bcast"] for r in (one, two)]
        transfer = [r["time_s"] - r["time_by_phase_s"]["latency"] for r in (one, two)]
        if ranks_per_node == 6:  # half the bytes at half the rate each
            assert bcast[1] >= bcast[0] and transfer[1] >= transfer[0]
        else:  # every ring alone on its node's port: the bytes halve, and so does the time
            assert bcast[1] < 0.6 * bcast[0] and two["time_s"] < one["time_s"]
    if ranks_per_node == 6:  # the whole epoch: c = 2 no faster at P = 12; at P = 24 it
        # saves 68 of 116 message latencies (nominal 10 us), which outweighs its 4% slower
        # broadcasts (docs/communication.md)
        grids = {c["grid"]: c["time_s"] for c in doc["results"][0]["choices"]
                 if c["algo"] == "1.5d"}
        assert grids["6x2"] >= grids["12x1"]


@pytest.mark.parametrize("ranks_per_node", [6, 1])
def test_model_reproduces_cagnets_finding_on_its_bandwidth_bound_amazon(tmp_path,
                                                                       ranks_per_node):
    """CAGNET Sec. 6.1 reports the finding for Amazon and Protein, the bandwidth-bound shapes
    (Reddit is latency bound there, and gains from c through latency): the whole epoch of
    1.5D c = 2 is no faster than c = 1 with 6 GPUs a node, and faster with 1, at P = 12, 24."""
    out = tmp_path / "m.json"
    assert main(["model", "--shape", "14249639,230788269,300,24", "--procs", "12,24",
                 "--machine", "summit", "--ranks-per-node", str(ranks_per_node), "--top", "0",
                 "--out", str(out)]) == 0
    for result in json.loads(out.read_text())["results"]:
        p = result["procs"]
        grids = {c["grid"]: c["time_s"] for c in result["choices"] if c["algo"] == "1.5d"}
        one, two = grids[f"{p}x1"], grids[f"{p // 2}x2"]
        assert (two >= one) if ranks_per_node == 6 else (two < 0.75 * one), (p, one, two)


def test_model_predicts_each_choices_peak_memory_by_part(tmp_path, capsys):
    """Every choice carries the memory check's estimate, whose parts sum to its total."""
    from hpcgnn.cost.ranking import MEMORY_PARTS

    path = write_random_graph(tmp_path / "g.h5", n=200, features=32, seed=1)
    out = tmp_path / "model.json"
    assert main(["model", str(path), "--procs", "1,4", "--hidden", "8", "--out", str(out),
                 "--top", "100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    results = json.loads(out.read_text())["results"]
    for result in results:
        assert result["choices"]
        for choice in result["choices"]:
            parts = choice["memory_parts_bytes"]
            assert list(parts) == list(MEMORY_PARTS)
            assert all(v >= 0 for v in parts.values())
            assert sum(parts.values()) == pytest.approx(choice["memory_per_rank_bytes"])
            assert parts["graph_blocks"] > 0 and parts["activations"] > 0
            row = next(line for line in lines if f" {choice['algo']:>5} {choice['grid']:>10} "
                       in line)
            mib = parts["graph_blocks"] / 2**20
            assert f"| graph_blocks={mib:.4g} " in row, row


@pytest.mark.parametrize("algo, grid", [("1d", "4"), ("1.5d", "2x2"), ("2d", "2x2"),
                                        ("3d", "1x2x2")])
def test_the_memory_check_and_the_advisor_use_one_estimate(algo, grid):
    """``Mode.memory`` (the check before a run) is what ``hpcgnn model`` prints, by part."""
    import numpy as np

    from hpcgnn.config import TrainConfig
    from hpcgnn.cost.ranking import memory_parts, rank_choices
    from hpcgnn.io.reader import GraphMeta
    from hpcgnn.training.modes.fullbatch import FullBatchMode

    meta = GraphMeta("g.h5", 10_000, 160_000, 64, 8, False, "g", np.dtype(np.float32), 1,
                     None, None)
    cfg = TrainConfig(hidden=32)
    mode = FullBatchMode(algo=algo, grid=grid)
    need = mode.memory(cfg, meta, mode.grid_shape(4))
    (row,) = [r for r in rank_choices(meta, cfg, 4, 1e-6, 1e-10)
              if (r["algo"], r["grid"]) == (algo, grid)]
    assert need.bytes == row["memory_per_rank_bytes"] > 0
    assert need.parts == row["memory_parts_bytes"]
    assert need.parts == memory_parts(meta, cfg, mode.grid_shape(4), algo).parts


def test_halo_counts_its_halo_rows():
    """Halo (on a 1D grid) holds its gathered halo rows besides 1D's buffers."""
    import numpy as np

    from hpcgnn.config import TrainConfig
    from hpcgnn.io.reader import GraphMeta
    from hpcgnn.training.modes.fullbatch import FullBatchMode

    meta = GraphMeta("g.h5", 10_000, 160_000, 64, 8, False, "g", np.dtype(np.float32), 1,
                     None, None)
    cfg = TrainConfig(hidden=32)
    one_d, halo = (FullBatchMode(algo=a).memory(cfg, meta, FullBatchMode(algo=a).grid_shape(4))
                   for a in ("1d", "halo"))
    assert one_d.parts is not None and halo.parts is not None
    assert halo.parts["comm_buffers"] > one_d.parts["comm_buffers"]
    assert halo.bytes > one_d.bytes


@pytest.mark.parametrize("flags", [["--sampler", "sage", "--fanout", "5,3", "--bulk", "4"],
                                   ["--sampler", "ladies", "--graph-layout", "partitioned"],
                                   ["--sampler", "cluster", "--clusters", "20"]])
def test_model_prints_the_minibatch_modes_memory_the_check_uses(tmp_path, capsys, flags):
    """``--sampler``: every (P/c) x c grid and layout, each = ``MinibatchMode.memory``."""
    from hpcgnn.config import TrainConfig
    from hpcgnn.io.reader import GraphFile
    from hpcgnn.training.modes.minibatch import MinibatchMode

    graph = write_random_graph(tmp_path / "g.h5", n=200)
    out = tmp_path / "m.json"
    assert main(["model", str(graph), "--procs", "4", "--top", "0", "--out", str(out),
                 *flags]) == 0
    text = capsys.readouterr().out
    assert "minibatch memory per rank (--sampler" in text
    rows = json.loads(out.read_text())["results"][0]["minibatch_memory"]
    layouts = ["partitioned"] if "--graph-layout" in flags else ["replicated", "partitioned"]
    assert [(r["grid"], r["graph_layout"]) for r in rows] == [
        (g, layout) for g in ("1x4", "2x2", "4x1") for layout in layouts]
    options = dict(zip(flags[::2], flags[1::2], strict=True))
    with GraphFile(graph) as gf:
        meta = gf.meta
    for r in rows:
        q, c = (int(x) for x in r["grid"].split("x"))
        mode = MinibatchMode(sampler=options["--sampler"], fanout=options.get("--fanout"),
                             bulk=int(options.get("--bulk", 16)), graph_layout=r["graph_layout"],
                             clusters=int(options["--clusters"]) if "--clusters" in options
                             else None, grid=f"{q}x{c}")
        cfg = TrainConfig()  # the command's model, gcn
        mode = mode.for_run(cfg, 4)
        need = mode.memory(cfg, meta, mode.grid_shape(4))
        assert need.parts == r["memory_parts_bytes"]
        assert need.bytes == pytest.approx(r["memory_per_rank_bytes"], rel=1e-12)
        assert f"{r['grid']:>10} {r['graph_layout']:>12}" in text
