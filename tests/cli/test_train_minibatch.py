import json

import h5py
import numpy as np
import pytest

from hpcgnn.cli.main import main
from hpcgnn.io import EdgeSorter, GraphFileWriter
from tests.devices import assert_same_training, train_on_both_devices
from tests.mpi import assert_all, error_output


def write_sbm(path, n=800, classes=4, avg_degree=10.0, intra=0.6, features=16, noise=3.0, seed=0):
    """A stochastic block model: classes are blocks, features a noisy class centre."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    members = [np.flatnonzero(labels == c) for c in range(classes)]
    m = int(n * avg_degree / 2)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    same = rng.random(m) < intra
    for c in range(classes):
        pick = same & (labels[src] == c)
        dst[pick] = members[c][rng.integers(0, len(members[c]), pick.sum())]
    keep = src != dst
    centres = rng.normal(size=(classes, features))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = (centres[labels] + rng.normal(scale=noise / np.sqrt(features), size=(n, features)))
    split = rng.permutation(n)
    masks = [np.zeros(n, bool) for _ in range(3)]
    masks[0][split[: 2 * n // 5]] = True  # 40% train, 10% validation, 50% test
    masks[1][split[2 * n // 5 : n // 2]] = True
    masks[2][split[n // 2 :]] = True
    with EdgeSorter(n, False, int(keep.sum())) as sorter:
        sorter.add(src[keep], dst[keep])
        with GraphFileWriter(path, num_nodes=n, num_features=features, num_classes=classes,
                             directed=False, name="sbm", show_progress=False) as w:
            w.write_adjacency(sorter)
            w.write_features(0, x.astype(np.float32))
            w.write_labels(labels)
            w.write_masks(*masks)
    return path


@pytest.fixture
def sbm(shared_tmp, world):
    path = shared_tmp / "sbm.h5"
    if world.rank == 0:
        write_sbm(path, seed=0)
    world.mpi.Barrier()
    return path


def train_metrics(path, out, *flags):
    rc = main(["train", str(path), "--quiet", "--threads", "1", "--hidden", "16",
               "--metrics", str(out), *flags])
    return rc, out


@pytest.mark.mpi
@pytest.mark.ranks(1, 4)
def test_minibatch_accuracy_within_two_points_of_fullbatch(sbm, shared_tmp, world):
    rc, out = train_metrics(sbm, shared_tmp / "full.json", "--epochs", "100", "--eval-every", "0")
    assert_all(world, rc == 0)
    world.mpi.Barrier()
    full = json.loads(out.read_text())["final"]["test_acc"]
    # Each step trains one batch per rank (data-parallel on their union): split a global
    # batch of 64 over the P ranks, so every P takes the same steps on the same data volume.
    batch = str(64 // world.size)
    runs = {
        "sage": ["--fanout", "10,10", "--lr", "0.02"],
        "ladies": ["--sampler", "ladies", "--layer-size", "256", "--layers", "2"],
    }
    for name, flags in runs.items():
        rc, out = train_metrics(sbm, shared_tmp / f"{name}.json", "--mode", "minibatch",
                                "--batch-size", batch, "--bulk", "10", "--epochs", "30",
                                "--eval-every", "0", *flags)
        assert_all(world, rc == 0)
        world.mpi.Barrier()
        acc = json.loads(out.read_text())["final"]["test_acc"]
        assert full > 0.9
        assert acc >= full - 0.02, f"{name}: minibatch {acc:.4f} vs full-batch {full:.4f}"


@pytest.mark.mpi
@pytest.mark.parametrize("sampler", ["sage", "ladies"])
def test_metrics_trace_and_layouts_agree(graph_file, shared_tmp, world, sampler):
    path = graph_file(n=120, avg_degree=5, seed=11, directed=True)
    flags = ["--fanout", "4,3", "--model", "sage"]  # --model may repeat the sampler's layers
    if sampler == "ladies":
        flags = ["--sampler", "ladies", "--layer-size", "20,10"]
    docs = {}
    for layout in ("replicated", "partitioned"):
        metrics, trace = shared_tmp / f"{layout}.json", shared_tmp / f"{layout}-trace.json"
        rc = main(["train", str(path), "--mode", "minibatch", "--epochs", "3", "--hidden", "8",
                   "--batch-size", "10", "--bulk", "3", "--graph-layout", layout, "--quiet",
                   "--threads", "1", "--metrics", str(metrics), "--trace", str(trace), *flags])
        assert_all(world, rc == 0)
        world.mpi.Barrier()
        docs[layout] = json.loads(metrics.read_text())
        assert docs[layout]["config"]["model"] == ("sage" if sampler == "sage" else "gcn")
        events = json.loads(trace.read_text())["traceEvents"]
        assert {e["tid"] for e in events if e.get("ph") == "X"} == set(range(world.size))
        assert {"sample", "fetch", "propagate"} <= {e["name"] for e in events}
        if layout == "partitioned" and world.size > 1:  # the SpGEMM's stage loop is traced
            staged = {e["args"].get("stage") for e in events if e["name"] == "sample_rows"}
            assert_all(world, staged and None not in staged, "stage loop events untagged")
    rep, part = docs["replicated"], docs["partitioned"]
    # identical samples, so identical training whatever the layout
    assert rep["params_sha256"] == part["params_sha256"]
    assert [e["loss"] for e in rep["epochs"]] == [e["loss"] for e in part["epochs"]]
    for doc in (rep, part):
        assert doc["config"]["mode"] == "minibatch" and doc["config"]["sampler"] == sampler
        assert doc["config"]["layers"] == 2 and doc["world_size"] == world.size
        s = doc["sampling"]
        keys = {"edges_sampled", "sample_time_s", "bytes_sparsity_aware", "bytes_oblivious"}
        assert set(s) >= keys
        assert s["edges_sampled"] > 0 and s["sample_time_s"] > 0
        ours = (s["bytes_sparsity_aware"] + s["bytes_row_combine"]  # every category counted
                + s["bytes_sampling_control"])
        assert s["oblivious_over_aware"] == (s["bytes_oblivious"] / ours if ours else None)
        assert set(doc["time"]["minibatch_phases"]) == {"sample", "fetch", "propagate"}
        assert doc["time"]["minibatch_phases"]["propagate"] > 0
        assert set(doc["final"]) >= {"loss", "train_acc", "val_acc", "test_acc"}
    assert rep["sampling"]["edges_sampled"] == part["sampling"]["edges_sampled"]
    assert rep["sampling"]["bytes_sparsity_aware"] == rep["sampling"]["bytes_oblivious"] == 0
    grid_rows = int(part["config"]["grid"].split("x")[0])
    if grid_rows > 1:
        assert part["sampling"]["bytes_sparsity_aware"] > 0
        assert part["comm"]["measured_bytes"]["sample_rows"] > 0
    if world.size > 1:
        assert part["comm"]["measured_bytes"]["feature_fetch"] > 0


@pytest.mark.mpi
def test_global_batch_is_split_over_the_ranks_and_the_steps_are_stated(
    graph_file, shared_tmp, world, monkeypatch
):
    from hpcgnn.training.minibatch import MinibatchTrainer

    steps = []
    step = MinibatchTrainer._step
    monkeypatch.setattr(MinibatchTrainer, "_step",
                        lambda self, *a: steps.append(1) or step(self, *a))
    path, p = graph_file(n=80, seed=2), world.size
    flags = ["--mode", "minibatch", "--fanout", "3,2", "--epochs", "2"]
    _, split = train_metrics(path, shared_tmp / "g.json", *flags, "--global-batch", str(4 * p))
    took = len(steps)
    bulk = p * -(-16 // p)
    _, same = train_metrics(path, shared_tmp / "b.json", *flags, "--batch-size", "4",
                            "--bulk", str(bulk))
    world.mpi.Barrier()
    a, b = (json.loads(f.read_text()) for f in (split, same))
    assert_all(world, a["params_sha256"] == b["params_sha256"], "not the same training")
    s = a["sampling"]
    with h5py.File(path) as f:
        num_train = int(f["masks/train"][()].sum())
    ok = (s["batch_size"] == 4 and s["global_batch"] == 4 * p and s["bulk"] == bulk
          and took == 2 * s["optimizer_steps_per_epoch"]
          and s["batches_per_epoch"] == -(-num_train // 4))
    assert_all(world, ok, f"{s}, {took} steps taken")


@pytest.mark.mpi
def test_resume_gives_identical_parameters(graph_file, shared_tmp, world, capsys):
    path = graph_file(n=80, seed=2)
    flags = ["--mode", "minibatch", "--fanout", "3,2", "--batch-size", "6", "--bulk", "2"]
    _, straight = train_metrics(path, shared_tmp / "straight.json", *flags, "--epochs", "4")
    ckpt = shared_tmp / "ckpt"
    rc, _ = train_metrics(path, shared_tmp / "first.json", *flags, "--epochs", "2",
                          "--checkpoint-dir", str(ckpt), "--checkpoint-every", "2")
    assert_all(world, rc == 0, "the checkpointing run failed")
    _, resumed = train_metrics(path, shared_tmp / "resumed.json", *flags, "--epochs", "4",
                               "--resume", str(ckpt))
    world.mpi.Barrier()
    a, b = (json.loads(f.read_text()) for f in (straight, resumed))
    assert_all(world, a["params_sha256"] == b["params_sha256"], "resumed run differs")
    assert_all(world, [e["loss"] for e in a["epochs"]] == [e["loss"] for e in b["epochs"]])
    capsys.readouterr()
    rc, _ = train_metrics(path, shared_tmp / "other.json", *flags[:-2], "--bulk", "4",
                          "--epochs", "4", "--resume", str(ckpt))
    err = error_output(world, capsys.readouterr().err)
    assert_all(world, rc == 1 and "other settings" in err and "sampling" in err, err[-500:])


@pytest.mark.mpi
def test_measured_bytes_equal_the_cost_model_in_every_category(graph_file, shared_tmp, world):
    from hpcgnn.layout.shapes import admissible_shapes

    path = graph_file(n=200, avg_degree=5, seed=7, directed=True)
    reps = [shape.dims[1] for shape in admissible_shapes("1.5d", world.size)]
    # the replicated layout's traffic does not depend on the sampler; the partitioned
    # layout's SpGEMM at the smallest and largest replication (sage) and a middle one
    # (ladies: at P = 4 the 2 x 2 grid, where both the stage loop and the row all-reduce run)
    runs = [("sage", "replicated", reps[-1]), ("ladies", "partitioned", reps[len(reps) // 2])]
    runs += [("sage", "partitioned", c) for c in sorted({reps[0], reps[-1]})]
    # GIN's and GAT's layers on the node-wise blocks: their gradients all-reduce
    runs += [("sage-gin", "replicated", reps[0]), ("sage-gat", "partitioned", reps[-1])]
    runs += [("ladies-gin", "partitioned", reps[0]), ("ladies-gat", "replicated", reps[-1])]
    runs += [("cluster-gat", "partitioned", reps[-1])]
    models = {"gin": ["--model", "gin"], "gat": ["--model", "gat", "--heads", "2"]}
    for name, layout, c in runs:
        sampler = name.split("-")[0]
        flags = {"sage": ["--fanout", "4,3", "--batch-size", "9"],
                 "ladies": ["--layer-size", "20,10", "--batch-size", "9"],
                 "cluster": ["--clusters", "12", "--clusters-per-batch", "2"]}[sampler]
        flags += models.get(name.split("-")[-1], [])
        where = f"{layout} {name} at c={c}"
        rc, out = train_metrics(
            path, shared_tmp / "mb.json", "--mode", "minibatch", "--sampler", sampler, *flags,
            "--bulk", "3", "--epochs", "2", "--graph-layout", layout,
            "--replication", str(c),
        )
        assert_all(world, rc == 0, where)
        world.mpi.Barrier()
        comm = json.loads(out.read_text())["comm"]
        assert_all(world, comm["measured_bytes"] == comm["predicted_bytes"], where)
        assert_all(world, comm["busiest_rank_bytes"] == comm["predicted_busiest_rank_bytes"],
                   where)
        assert_all(world, set(comm["predicted_seconds"]) == set(comm["predicted_bytes"]))
        world.mpi.Barrier()


@pytest.mark.gpu
@pytest.mark.parametrize("flags", [["--sampler", "sage", "--fanout", "4,3"],
                                   ["--sampler", "ladies", "--layer-size", "16"],
                                   ["--sampler", "ladies", "--layer-size", "16", "--graph-layout",
                                    "partitioned", "--ladies-reduction", "partial-products"]])
def test_cuda_trains_like_the_cpu(graph_file, shared_tmp, world, flags):
    path = graph_file(n=90, avg_degree=5, seed=11)
    docs = train_on_both_devices(world, shared_tmp, [
        str(path), "--mode", "minibatch", "--epochs", "3", "--hidden", "8", "--dropout", "0.5",
        "--batch-size", "12", "--bulk", "2", "--threads", "1", *flags])
    assert_same_training(docs, ("feature_fetch", "allreduce"))
    np.testing.assert_allclose(docs["cuda"]["final"]["loss"], docs["cpu"]["final"]["loss"],
                               rtol=1e-4)


@pytest.mark.mpi
def test_sample_memory_sets_the_chunks_and_changes_no_sample(graph_file, shared_tmp, world):
    """A hop over ``--sample-memory`` is sampled in chunks: the same training, stated."""
    path = graph_file(n=120, seed=4)
    flags = ["--mode", "minibatch", "--fanout", "4,3", "--batch-size", "8", "--bulk", "8",
             "--epochs", "2"]
    _, whole = train_metrics(path, shared_tmp / "whole.json", *flags, "--sample-memory", "1G")
    _, tiny = train_metrics(path, shared_tmp / "tiny.json", *flags, "--sample-memory", "2K")
    world.mpi.Barrier()
    a, b = (json.loads(f.read_text()) for f in (whole, tiny))
    sa, sb = a["sampling"], b["sampling"]
    ok = (a["params_sha256"] == b["params_sha256"] and sa["sample_memory_bytes"] == 2**30
          and sa["spgemm_chunks_per_hop"] == 1.0 and sb["sample_memory_bytes"] == 2048
          and sb["spgemm_chunks_per_hop"] > 1.0 and a["config"].get("sample_memory") is None)
    assert_all(world, ok, f"{sa} / {sb}")


@pytest.mark.mpi
def test_metrics_carry_the_papers_spgemm_closed_form_beside_the_measured(
        graph_file, shared_tmp, world, capsys):
    if world.size != 4:
        pytest.skip("LADIES on the 2 x 2 grid: the stage loop and the row all-reduce both run")
    path = graph_file(n=200, avg_degree=5, seed=7, directed=True)
    rc, out = train_metrics(
        path, shared_tmp / "paper.json", "--mode", "minibatch", "--sampler", "ladies",
        "--layer-size", "20,10", "--batch-size", "9", "--bulk", "3", "--epochs", "1",
        "--graph-layout", "partitioned", "--replication", "2")
    assert_all(world, rc == 0)
    world.mpi.Barrier()
    doc = json.loads(out.read_text())
    s, measured = doc["sampling"], doc["comm"]["measured_bytes"]
    p, c, n = 4, 2, s["spgemm_nnz"]
    rows = measured["sample_rows"]  # one epoch: the run's bytes
    assert_all(world, s["paper_spgemm_bytes"] == 8 * n * (1 / c + c / p))
    # docs/sampling.md: ours is rows / c + (c - 1) rows / P in the paper's accounting
    assert_all(world, s["measured_spgemm_bytes"] == rows / c + (c - 1) * rows / p)
    relation = (n * (1 / c + c / p)) / (rows / 8 * (1 / c + (c - 1) / p))
    assert_all(world, abs(s["paper_over_measured"] - relation) < 1e-12 * relation)
    # here the local block outweighs the row lengths: N > fetched nonzeros + rows
    assert_all(world, s["paper_over_measured"] > 4 / 3)
    if world.rank == 0:
        capsys.readouterr()
        assert main(["model", "--procs", "4", "--formulas", "paper",
                     "--minibatch-metrics", str(out)]) == 0
        text = capsys.readouterr().out
        line = next(t for t in text.splitlines() if t.split()[:2] == ["4", "2x2"])
        paper, ours, ratio = (float(v) for v in line.split()[2:])
        assert paper == pytest.approx(s["paper_spgemm_bytes"] / 1e6, abs=1e-6)
        assert ours == pytest.approx(s["measured_spgemm_bytes"] / 1e6, abs=1e-6)
        assert ratio == pytest.approx(s["paper_over_measured"], abs=1e-3)
    world.mpi.Barrier()


@pytest.mark.mpi
def test_the_papers_ladies_reduction_trains_the_same_and_predicts_its_bytes(
    graph_file, shared_tmp, world
):
    from hpcgnn.layout.shapes import admissible_shapes

    path = graph_file(n=200, avg_degree=5, seed=7, directed=True)
    for shape in admissible_shapes("1.5d", world.size):
        c = shape.replication
        docs = {}
        for reduction in ("rows", "partial-products"):
            rc, out = train_metrics(
                path, shared_tmp / f"ladies-{reduction}.json", "--mode", "minibatch",
                "--sampler", "ladies", "--layer-size", "20,10", "--batch-size", "9", "--bulk",
                "3", "--epochs", "2", "--graph-layout", "partitioned", "--replication", str(c),
                "--ladies-reduction", reduction,
            )
            assert_all(world, rc == 0, f"{reduction} at c={c}")
            world.mpi.Barrier()
            docs[reduction] = json.loads(out.read_text())
            world.mpi.Barrier()
        ours, paper = docs["rows"], docs["partial-products"]
        where = f"{shape}"
        assert_all(world, paper["params_sha256"] == ours["params_sha256"], where)
        losses = [[e["loss"] for e in doc["epochs"]] for doc in (ours, paper)]
        assert_all(world, losses[0] == losses[1], where)
        comm = paper["comm"]
        assert_all(world, comm["measured_bytes"] == comm["predicted_bytes"], where)
        assert_all(world, comm["busiest_rank_bytes"] == comm["predicted_busiest_rank_bytes"],
                   where)
        partial = comm["measured_bytes"].get("sample_partial_products", 0)
        assert_all(world, (partial > 0) == (c > 1), f"{where}: {partial}")
        s = paper["sampling"]
        assert_all(world, s["ladies_reduction"] == "partial-products")
        # the sampling section sums the run (2 epochs), the comm section one epoch
        assert_all(world, s["bytes_partial_products"] == 2 * partial, where)
        assert_all(world, "sample_partial_products" not in ours["comm"]["measured_bytes"])


def test_the_papers_ladies_reduction_is_refused_where_nothing_is_reduced(tmp_path, capsys):
    for flags in (["--sampler", "sage", "--graph-layout", "partitioned"],
                  ["--sampler", "ladies"], ["--mode", "fullbatch"]):
        rc = main(["train", str(tmp_path / "none.h5"), "--mode", "minibatch", *flags,
                   "--ladies-reduction", "partial-products", "--quiet"])
        err = capsys.readouterr().err
        assert rc != 0 and "--ladies-reduction" in err, err
    rc = main(["sample", str(tmp_path / "none.h5"), "--sampler", "sage", "--graph-layout",
               "partitioned", "--ladies-reduction", "partial-products", "--out",
               str(tmp_path / "s.h5")])
    err = capsys.readouterr().err
    assert rc != 0 and "--ladies-reduction partial-products applies to --sampler ladies" in err
