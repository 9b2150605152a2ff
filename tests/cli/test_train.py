import json

import h5py
import numpy as np
import pytest

from hpcgnn.cli.main import main
from tests.mpi import assert_all, error_output, on_rank0


def run_train(path, *extra):
    return main(["train", str(path), "--epochs", "4", "--hidden", "8", "--quiet", *extra])


@pytest.mark.mpi
@pytest.mark.parametrize(
    "algo,model",
    [("1d", "gcn"), ("2d", "gcn"), ("halo", "gcn"), ("1d", "sage"), ("2d", "sage"),
     ("halo", "sage")],
)
def test_metrics_and_trace_files(graph_file, shared_tmp, world, algo, model):
    path = graph_file(n=80, seed=1)
    metrics, trace = shared_tmp / f"m-{algo}-{model}.json", shared_tmp / f"t-{algo}-{model}.json"
    rc = run_train(
        path, "--algo", algo, "--model", model, "--metrics", str(metrics), "--trace", str(trace),
        "--eval-every", "2",
    )
    assert_all(world, rc == 0)
    world.mpi.Barrier()
    doc = json.loads(metrics.read_text())
    for key in ("world_size", "config", "epochs", "final", "time", "comm", "params_sha256"):
        assert key in doc
    assert doc["world_size"] == world.size
    assert doc["config"]["model"] == model
    assert set(doc["epochs"][0]) >= {"epoch", "loss", "train_acc", "val_acc", "time_s"}
    assert set(doc["final"]) >= {"loss", "train_acc", "val_acc", "test_acc"}
    assert doc["time"]["epoch_median_s"] > 0 and "local_spmm" in doc["time"]["phases"]
    measured, predicted = doc["comm"]["measured_bytes"], doc["comm"]["predicted_bytes"]
    assert {c: v for c, v in measured.items() if v and c != "control"} == {
        c: v for c, v in predicted.items() if v
    }  # every category exact, and nothing unpredicted
    busiest = doc["comm"]["busiest_rank_bytes"]
    assert {c: v for c, v in busiest.items() if v and c != "control"} == {
        c: v for c, v in doc["comm"]["predicted_busiest_rank_bytes"].items() if v
    }
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["tid"] for e in events if e.get("ph") == "X"}
    assert tracks == set(range(world.size))
    assert any(e["name"] == "epoch 1" for e in events)
    comm = [e for e in events if e.get("cat") == "comm"]
    assert comm and all(e["args"]["bytes"] >= 0 and "comm" in e["args"] for e in comm)
    tagged = [e.get("args", {}) for e in events if "layer" in e.get("args", {})]
    assert {a["direction"] for a in tagged} == {"forward", "backward"}
    assert {a["layer"] for a in tagged} == {0, 1}
    if algo == "2d" and world.size > 1:  # SUMMA steps
        assert any("step" in e.get("args", {}) for e in comm if e["name"] == "dense_bcast")
    if algo == "halo" and world.size > 1:
        assert any(e["args"].get("bytes", 0) > 0 for e in comm if e["name"].startswith("halo"))


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_resume_gives_identical_parameters(graph_file, shared_tmp, world, model):
    path = graph_file(n=70, seed=2)
    full, resumed = shared_tmp / f"full-{model}.json", shared_tmp / f"resumed-{model}.json"
    ckpt = shared_tmp / f"ckpt-{model}"
    args = ["--epochs", "6", "--dropout", "0.5", "--model", model]
    assert_all(world, main(["train", str(path), *args, "--quiet", "--metrics", str(full)]) == 0)
    # interrupted run: stops after 3 epochs, having checkpointed after epochs 2 and 3
    assert_all(
        world,
        main(
            [
                "train",
                str(path),
                "--epochs",
                "3",
                "--dropout",
                "0.5",
                "--model",
                model,
                "--quiet",
                "--checkpoint-dir",
                str(ckpt),
                "--checkpoint-every",
                "2",
            ]
        )
        == 0,
    )
    assert_all(
        world,
        main(
            ["train", str(path), *args, "--quiet", "--resume", str(ckpt), "--metrics", str(resumed)]
        )
        == 0,
    )
    world.mpi.Barrier()
    manifest = json.loads((ckpt / "checkpoint.json").read_text())  # after epoch 3 of 1..3
    assert (manifest["epoch"], manifest["arrays_file"]) == (3, "checkpoint-e3.npz")
    assert [r["epoch"] for r in manifest["history"]] == [1, 2, 3]
    a, b = json.loads(full.read_text()), json.loads(resumed.read_text())
    assert a["params_sha256"] == b["params_sha256"]
    assert [e["loss"] for e in a["epochs"]] == [e["loss"] for e in b["epochs"]]
    assert [e["epoch"] for e in a["epochs"]] == [e["epoch"] for e in b["epochs"]] == [
        1, 2, 3, 4, 5, 6]  # the resumed run went on with epoch 4
    other = "gcn" if model == "sage" else "sage"  # the fingerprint holds the model
    rc = main(["train", str(path), *args[:-1], other, "--quiet", "--resume", str(ckpt)])
    assert_all(world, rc == 1)


@pytest.mark.mpi
def test_resume_with_other_settings_is_refused(graph_file, shared_tmp, world, capsys):
    path = graph_file(n=40, seed=3)
    ckpt = shared_tmp / "ck"
    assert_all(
        world, run_train(path, "--checkpoint-dir", str(ckpt), "--checkpoint-every", "2") == 0
    )
    rc = run_train(path, "--resume", str(ckpt), "--lr", "0.5")
    assert_all(world, rc == 1)
    err = error_output(world, capsys.readouterr().err)
    assert_all(world, "written with other settings (lr" in err, f"rank {world.rank}: {err!r}")


@pytest.mark.mpi
def test_replication_that_does_not_divide_is_refused_on_every_rank(graph_file, world, capsys):
    path = graph_file(n=30, seed=4)
    rc = run_train(path, "--algo", "1.5d", "--replication", str(world.size + 1))
    assert_all(world, rc == 1)
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    valid = ", ".join(str(d) for d in range(1, world.size + 1) if world.size % d == 0)
    expected = [
        f"hpcgnn: error: 1.5d replication {world.size + 1} does not divide "
        f"{world.size} processes (valid: {valid})"
    ]
    assert_all(world, err == expected, f"rank {world.rank} stderr: {err}")


@pytest.mark.mpi
def test_too_little_memory_is_refused_on_every_rank(graph_file, world, capsys, monkeypatch):
    path = graph_file(n=30, seed=5)
    monkeypatch.setenv("HPCGNN_MEMORY_LIMIT", "1000")
    assert_all(world, run_train(path) == 1)
    err = error_output(world, capsys.readouterr().err)
    assert_all(world, "not enough memory" in err, f"rank {world.rank}: {err!r}")


@pytest.mark.mpi
@pytest.mark.parametrize("command", ["train", "sample"])  # sample reads them in its check
def test_nan_features_fail_on_every_rank(graph_file, shared_tmp, world, capsys, command):
    path = graph_file("nan.h5", n=40, seed=6)

    def spoil() -> None:
        with h5py.File(path, "r+") as f:
            f["features"][39, 0] = np.nan  # only the last rank's block is bad

    on_rank0(world, spoil)
    if command == "train":
        rc = run_train(path)
    else:
        rc = main(["sample", str(path), "--batch-size", "4", "--fanout", "3",
                   "--out", str(shared_tmp / "nan-samples.h5"), "--quiet"])
    assert_all(world, rc == 1)
    err = error_output(world, capsys.readouterr().err)
    message = "features contain NaN or Inf (first at vertex 39)"
    assert_all(world, message in err, f"rank {world.rank}: {err!r}")


@pytest.mark.mpi
def test_missing_graph_fails_on_every_rank(shared_tmp, world, capsys):
    assert_all(world, run_train(shared_tmp / "nope.h5") == 1)
    err = error_output(world, capsys.readouterr().err)
    assert_all(world, "no such file" in err, f"rank {world.rank}: {err!r}")


def read_metrics(path, world):
    world.mpi.Barrier()
    doc = json.loads(path.read_text())
    measured, predicted = doc["comm"]["measured_bytes"], doc["comm"]["predicted_bytes"]
    for cat, value in predicted.items():
        assert abs(measured.get(cat, 0) - value) < 1e-6, (cat, measured, predicted)
    return doc


@pytest.mark.mpi
def test_offload_metrics_have_the_exchange_section(graph_file, shared_tmp, world):
    path = graph_file(n=90, seed=3)
    m = shared_tmp / "offload.json"
    rc = run_train(path, "--mode", "offload", "--chunks", "3", "--dedup", "full",
                   "--reorganize", "--tier-gbps", "hd=10,dd=100", "--metrics", str(m))
    assert_all(world, rc == 0)
    doc = read_metrics(m, world)
    ex = doc["exchange"]
    assert doc["config"]["mode"] == "offload" and doc["config"]["dedup"] == "full"
    assert ex["V_ru"] <= ex["V_p2p"] <= ex["V_ori"]
    assert set(ex["bytes_per_tier"]) == {"h2d", "d2d", "d2h", "ckpt"}
    assert ex["bytes_per_tier"] == ex["predicted_bytes_per_tier"]
    assert ex["tier_gbps"] == {"hd": 10.0, "dd": 100.0, "ru": 1500.0} and ex["C_s"] > 0
    reorg = ex["reorganization"]  # kept only where C, at the run's tiers, is no more
    c = reorg["C_s_per_vertex_byte"]
    assert reorg["accepted"] == (c["after"] <= c["before"])
    assert ex["V_ru"] == reorg["after" if reorg["accepted"] else "before"]["V_ru"]
    assert ex["exchange"] == "p2p" and "planner" not in ex
    assert ex["transfers"] == ex["remote_rows"] and ex["C_moved_s"] > 0


def _offload_runs(path, shared_tmp, world, configs: dict[str, list[str]]) -> dict:
    """The metrics of an offload run (3 chunks, ``--dedup full``) per named set of flags."""
    docs = {}
    for name, flags in configs.items():
        m = shared_tmp / f"{name}.json"
        rc = run_train(path, "--mode", "offload", "--chunks", "3", "--dedup", "full",
                       "--metrics", str(m), *flags)
        assert_all(world, rc == 0)
        docs[name] = read_metrics(m, world)
    return docs


@pytest.mark.mpi
@pytest.mark.ranks(1, 3)
def test_offload_device_paths_flags_keep_the_parameters(graph_file, shared_tmp, world):
    # HongTu's device paths (issue 43): the same parameters as today's path, reported
    path = graph_file(n=60, seed=4)
    docs = _offload_runs(path, shared_tmp, world, {
        "today": ["--no-in-place"], "paths": ["--interleave", "--zero-copy"]})
    today, paths = docs["today"], docs["paths"]
    assert today["params_sha256"] == paths["params_sha256"]
    assert today["comm"]["measured_bytes"] == paths["comm"]["measured_bytes"]
    ex = paths["exchange"]
    assert ex["device_paths"] == {"in_place": True, "interleave": True, "zero_copy": True,
                                  "merged": False}
    assert ex["rounds"] == world.size - 1 and today["exchange"]["rounds"] == 1
    assert paths["config"]["interleave"] and not today["config"]["in_place"]
    assert ex["device_buffers_allocated"] < today["exchange"]["device_buffers_allocated"]
    rc = run_train(path, "--mode", "offload", "--dedup", "none", "--interleave")
    assert_all(world, rc != 0, "--interleave with --dedup none was accepted")


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 4)
def test_merged_buffer_flag_keeps_the_parameters_in_fewer_buffer_bytes(graph_file, shared_tmp,
                                                                       world):
    # HongTu's merged transition + neighbour buffer (issue 43 item 7): the same parameters
    # and bytes moved as the separate buffers, its buffers' bytes fewer, reported
    path = graph_file(n=60, seed=4)
    docs = _offload_runs(path, shared_tmp, world, {"apart": [], "merged": ["--merged-buffer"]})
    apart, merged = docs["apart"], docs["merged"]
    assert apart["params_sha256"] == merged["params_sha256"]
    assert apart["comm"]["measured_bytes"] == merged["comm"]["measured_bytes"]
    ex = merged["exchange"]
    assert ex["device_paths"]["merged"] and merged["config"]["merged"]
    assert not apart["exchange"]["device_paths"]["merged"]
    assert ex["device_buffer_bytes"] < apart["exchange"]["device_buffer_bytes"]
    assert ex["device_peak_rows"] < apart["exchange"]["device_peak_rows"]
    for refused in (["--dedup", "none"], ["--no-in-place"]):
        rc = run_train(path, "--mode", "offload", "--merged-buffer", *refused)
        assert_all(world, rc != 0, f"--merged-buffer with {refused} was accepted")


@pytest.mark.mpi
@pytest.mark.ranks(2, 4)
def test_planned_offload_metrics_report_hongtu_volumes_and_plans(graph_file, shared_tmp, world):
    path = graph_file(n=90, seed=3)
    m = shared_tmp / "offload-planned.json"
    rc = run_train(path, "--mode", "offload", "--chunks", "2", "--dedup", "full",
                   "--exchange", "planned", "--epochs", "1", "--tier-gbps", "summit",
                   "--metrics", str(m))
    assert_all(world, rc == 0)
    doc = read_metrics(m, world)
    ex = doc["exchange"]
    assert doc["config"]["exchange"] == "planned"
    assert ex["exchange"] == "planned" and ex["topology"] == f"uniform-{world.size}"
    assert ex["V_ru"] <= ex["V_p2p"] <= ex["V_ori"]
    assert ex["bytes_per_tier"] == ex["predicted_bytes_per_tier"]
    # a forwarded row counts at every hop: never fewer transfers than remote rows
    assert ex["transfers"]["forward"] >= ex["remote_rows"]["forward"] > 0
    assert ex["tier_gbps"] == {"hd": 50.0, "dd": 50.0, "ru": 900.0}  # the machine file's
    assert ex["C_moved_s"] > 0
    pl = ex["planner"]
    assert [(t["batch"], t["use"]) for t in pl["tables"]] == [
        (0, "fetch"), (0, "push"), (1, "fetch"), (1, "push")
    ]
    assert sum(t["transfers"] for t in pl["tables"] if t["use"] == "fetch") == (
        ex["transfers"]["forward"]
    )
    for t in pl["tables"]:
        assert len(t["stages"]) == t["num_stages"] <= pl["num_stages"]
        for st in t["stages"]:
            assert st["vertices"] > 0 and st["modelled_s"] > 0 and st["measured_s"] >= 0
    assert pl["modelled_s"] <= pl["p2p_modelled_s"] + 1e-15


@pytest.mark.mpi
@pytest.mark.parametrize("exchange", ["p2p", "planned"])
def test_halo_metrics_report_planner_stages(graph_file, shared_tmp, world, exchange):
    path = graph_file(n=90, seed=4)
    m = shared_tmp / f"halo-{exchange}.json"
    rc = run_train(path, "--algo", "halo", "--exchange", exchange, "--metrics", str(m))
    assert_all(world, rc == 0)
    doc = read_metrics(m, world)
    ex = doc["exchange"]
    assert ex["strategy"] == exchange and ex["topology"] == f"uniform-{world.size}"
    assert ex["V_p2p"] == ex["V_ru"] == 90 and ex["V_ori"] == 90 + ex["pairs"]
    pl = ex["planner"]
    assert len(pl["stages"]) == pl["num_stages"]
    assert (pl["num_stages"] == 0) == (world.size == 1)
    for st in pl["stages"]:
        assert st["modelled_s"] >= 0 and st["measured_s"] >= 0 and st["vertices"] > 0
    if exchange == "planned":  # on equal links the direct plan is optimal
        assert pl["modelled_s"] <= pl["p2p_modelled_s"] + 1e-15
        # one node: every pair ipc, in the plan and in the bytes the run counted
        ipc = {"ipc": 1} if world.size > 1 else {}
        assert pl["method_vertices"].keys() == ipc.keys()
        assert doc["comm"].get("method_bytes", {}).get("halo", {}).keys() == ipc.keys()


@pytest.mark.mpi
@pytest.mark.parametrize(
    "args,message",
    [
        (["--exchange", "planned"],
         "--exchange and --topology apply to --algo halo and --mode offload only"),
        (["--mode", "offload", "--dedup", "none", "--exchange", "planned"],
         "--exchange planned plans the device-to-device fetches of --dedup inter or full"),
        (["--mode", "offload", "--topology", "configs/topologies/dgx1.json"],
         "--topology in --mode offload needs --exchange planned"),
        (["--reorganize"], "--reorganize applies to --mode offload only"),
        (["--mode", "offload", "--chunks", "0"], "--chunks must be >= 1, got 0"),
        (["--mode", "offload", "--algo", "2d"], "cannot run --algo 2d"),
        (["--mode", "offload", "--tier-gbps", "hd=0"], "--tier-gbps: expected hd="),
        (["--algo", "halo", "--exchange", "planned", "--topology", "configs/topologies/dgx1.json"],
         "topology configs/topologies/dgx1.json: has 8 ranks but the job has"),
        (["--algo", "halo", "--topology", "missing.json"], "topology missing.json: cannot read"),
        (["--lr", "nan"], "--lr and --weight-decay must be finite and >= 0"),
        (["--weight-decay", "inf"], "--lr and --weight-decay must be finite and >= 0"),
        (["--seed", "-1"], "--seed must be in [0, 2^63), got -1"),
        (["--mode", "offload", "--chunks", "100000"], "--chunks 100000 is more than the graph's"),
        (["--lr", "1e30", "--epochs", "6"], "training diverged (try a smaller --lr)"),
        (["--lr", "1e30", "--epochs", "1"], "training diverged in its last step (try a"),
        (["--epochs", str(2**63)], "--epochs must be in [0, 2^63), got 9223372036854775808"),
        (["--epochs", "-1"], "--epochs must be in [0, 2^63), got -1"),
        (["--threads", "1000000000"], "--threads must be in [1, 4096], got 1000000000"),
        (["--metrics", ""], "--metrics: an empty path"),
        (["--trace", ""], "--trace: an empty path"),
        (["--mode", "minibatch", "--algo", "2d"],
         "--algo 2d names a full-batch algorithm: --mode minibatch samples on"),
        (["--model", "gcn", "--mode", "minibatch", "--sampler", "sage"],
         "--model gcn does not exist with --sampler sage"),
        (["--model", "sage", "--mode", "minibatch", "--sampler", "ladies", "--layer-size", "8"],
         "--model sage does not exist with --sampler ladies"),
    ],
)
def test_bad_exchange_flags_fail_on_every_rank(graph_file, world, capsys, args, message):
    path = graph_file(n=30, seed=4)
    assert_all(world, run_train(path, *args) == 1)
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, len(err) == 1 and message in err[0], f"rank {world.rank} stderr: {err}")


@pytest.mark.mpi
@pytest.mark.parametrize("flag", ["--metrics", "--trace", "--checkpoint-dir"])
def test_unwritable_outputs_fail_before_training(graph_file, shared_tmp, world, capsys, flag):
    path = graph_file(n=40, seed=4)
    blocker = shared_tmp / f"file-{flag.strip('-')}"
    if world.rank == 0:
        blocker.write_text("a file where a directory is needed")
    world.mpi.Barrier()
    extra = ["--checkpoint-every", "1"] if flag == "--checkpoint-dir" else []
    rc = run_train(path, flag, str(blocker / "sub" / "out"), *extra)
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc == 1 and len(err) == 1 and "not a writable directory" in err[0], str(err))


@pytest.mark.mpi
def test_a_symlinked_metrics_file_is_refused_and_its_target_kept(
    graph_file, shared_tmp, world, capsys
):
    path = graph_file(n=40, seed=4)
    victim, link = shared_tmp / "victim.txt", shared_tmp / "m-link.json"
    if world.rank == 0:
        victim.write_text("precious")
        link.symlink_to(victim)
    world.mpi.Barrier()
    rc = run_train(path, "--metrics", str(link))
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc == 1 and len(err) == 1 and "not a regular file" in err[0], str(err))
    assert_all(world, victim.read_text() == "precious")


@pytest.mark.mpi
def test_unlabelled_training_vertex_fails_on_every_rank(graph_file, world, capsys):
    path = graph_file(name="unlabelled.h5", n=40, seed=4)
    if world.rank == 0:
        with h5py.File(path, "r+") as f:
            v = int(np.flatnonzero(f["masks/train"][()])[-1])
            f["labels"][v] = -1
    world.mpi.Barrier()
    rc = run_train(path)
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    ok = rc == 1 and len(err) == 1 and f"vertex {v if world.rank == 0 else ''}" in err[0]
    assert_all(world, ok and "is in the train mask but unlabelled (label -1)" in err[0], str(err))


@pytest.mark.mpi
def test_metrics_are_strict_json_when_a_split_is_empty(graph_file, shared_tmp, world):
    path = graph_file(name="noval.h5", n=40, seed=4)
    if world.rank == 0:
        with h5py.File(path, "r+") as f:
            f["masks/val"][...] = False
    world.mpi.Barrier()
    out = shared_tmp / "strict.json"
    assert_all(world, run_train(path, "--metrics", str(out)) == 0)
    world.mpi.Barrier()

    def no_constants(name):
        raise ValueError(f"not strict JSON: {name}")

    doc = json.loads(out.read_text(), parse_constant=no_constants)
    assert doc["final"]["val_acc"] is None and doc["final"]["train_acc"] is not None
    run = doc["run"]  # what wrote it, where and when
    assert run["schema_version"] == 2 and run["hpcgnn"] and run["torch"] and run["mpi"]
    assert run["date"].endswith("+00:00") and run["host"] and isinstance(run["command"], str)


@pytest.mark.mpi
def test_a_checkpoint_dir_alone_keeps_the_last_epoch(graph_file, shared_tmp, world):
    """--checkpoint-dir without --checkpoint-every writes the end state (it wrote nothing)."""
    path = graph_file(n=30, seed=4)
    ckpt = shared_tmp / "last"
    assert_all(world, run_train(path, "--checkpoint-dir", str(ckpt)) == 0)
    world.mpi.Barrier()
    manifest = json.loads((ckpt / "checkpoint.json").read_text())
    assert_all(world, manifest["epoch"] == 4, f"checkpointed after epoch {manifest['epoch']}")
    resumed = main(["train", str(path), "--epochs", "5", "--hidden", "8", "--quiet",
                    "--resume", str(ckpt)])
    assert_all(world, resumed == 0)


@pytest.mark.mpi
def test_the_trace_records_the_epochs_asked_for(graph_file, shared_tmp, world, capsys):
    path = graph_file("trace.h5", n=40, seed=2)
    trace = shared_tmp / "t.json"
    rc = main(["train", str(path), "--epochs", "6", "--quiet", "--trace", str(trace),
               "--trace-epochs", "2:3"])
    assert_all(world, rc == 0)
    events = json.loads(trace.read_text())["traceEvents"]
    epochs = {e["name"] for e in events if e.get("name", "").startswith("epoch ")}
    assert epochs == {"epoch 2", "epoch 3"}
    # every span of the window carries its epoch's 1-based number, the epoch's own too
    spans = [e for e in events if e.get("ph") == "X"]
    assert {e["args"]["epoch"] for e in spans} == {2, 3}
    assert all(e["name"] == f"epoch {e['args']['epoch']}" for e in spans
               if e["name"].startswith("epoch "))
    assert {e["args"]["epoch"] for e in spans if e["name"] == "evaluate"} == {2, 3}
    capsys.readouterr()
    for bad in ("3:2", "0:1", "x", ""):
        rc = main(["train", str(path), "--trace", str(trace), "--trace-epochs", bad])
        err = error_output(world, capsys.readouterr().err).strip().splitlines()
        assert_all(world, rc == 1 and len(err) == 1 and "--trace-epochs" in err[0], err)
    rc = main(["train", str(path), "--trace-epochs", "1:2"])
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc == 1 and "--trace-epochs needs --trace" in err[0], err)


@pytest.mark.mpi
def test_the_csv_log_follows_the_epochs(graph_file, shared_tmp, world):
    import csv

    path = graph_file("csv.h5", n=40, seed=2)
    log, metrics, ck = shared_tmp / "log.csv", shared_tmp / "m.json", shared_tmp / "ck"
    rc = main(["train", str(path), "--epochs", "3", "--eval-every", "2", "--quiet",
               "--log-csv", str(log), "--checkpoint-dir", str(ck)])
    assert_all(world, rc == 0)
    rc = main(["train", str(path), "--epochs", "4", "--eval-every", "2", "--quiet",
               "--log-csv", str(log), "--resume", str(ck), "--metrics", str(metrics)])
    assert_all(world, rc == 0)
    rows = list(csv.DictReader(log.open()))
    epochs = json.loads(metrics.read_text())["epochs"]
    assert [int(r["epoch"]) for r in rows] == [e["epoch"] for e in epochs] == [1, 2, 3, 4]
    for row, rec in zip(rows, epochs, strict=True):
        assert float(row["loss"]) == rec["loss"]
        assert (row["val_acc"] == "") == (rec["val_acc"] is None)
