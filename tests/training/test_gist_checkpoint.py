"""GIST checkpoints: row-sharded, resumed at round boundaries bit for bit, refused with one line."""

import json
from dataclasses import replace

import numpy as np
import pytest

from hpcgnn.cli.main import main
from hpcgnn.training.checkpoint import MANIFEST, SHARD_FILE
from tests.mpi import assert_all, on_rank0
from tests.robustness.harness import expect_error
from tests.training.predicting import assert_predicts_alone

BASE = ["--hidden", "8", "--layers", "3", "--dropout", "0.5", "--seed", "2", "--quiet",
        "--threads", "1", "--mode", "gist", "--local-iters", "2"]


def _train(world, path, *flags, metrics=None):
    extra = ["--metrics", str(metrics)] if metrics is not None else []
    rc = main(["train", str(path), *BASE, *extra, *flags])
    assert_all(world, rc == 0, f"train {flags} failed")
    world.mpi.Barrier()
    return json.loads(metrics.read_text()) if metrics is not None else None


def _history(doc):
    return [(e["loss"], e["train_acc"], e["val_acc"]) for e in doc["epochs"]]


@pytest.mark.mpi
@pytest.mark.parametrize("m,model", [(1, "gcn"), (2, "gcn"), (2, "sage"), (2, "gat")])
def test_resume_at_a_round_boundary_is_bit_identical(graph_file, shared_tmp, world, m, model):
    if world.size % m:
        pytest.skip(f"--subnets {m} needs a multiple of {m} ranks")
    path = graph_file(n=60, seed=9)
    net = ["--subnets", str(m), "--model", model]
    if model == "gat":  # whole heads: two sub-GATs of one head, the score vectors replicated
        net += ["--heads", "2", "--output-heads", "2"]
    straight = _train(world, path, *net, "--rounds", "5", metrics=shared_tmp / f"s{m}.json")
    ckpt = shared_tmp / f"ckpt{m}{model}"
    # the interrupted run: 3 rounds, checkpointed after rounds 2 and 3
    _train(world, path, *net, "--rounds", "3", "--checkpoint-dir", str(ckpt),
           "--checkpoint-every", "2")
    names = sorted(p.name for p in ckpt.iterdir())
    want = sorted([MANIFEST, *(SHARD_FILE.format(epoch=3, rank=r, ranks=world.size)
                               for r in range(world.size))])
    assert names == want, "the files of round 2 are removed once round 3's are committed"
    manifest = json.loads((ckpt / MANIFEST).read_text())
    assert manifest["layout"] == "row-sharded" and manifest["epoch"] == 3
    assert manifest["adam_step"] == 3 * 2
    resumed = _train(world, path, *net, "--rounds", "5", "--resume", str(ckpt),
                     metrics=shared_tmp / f"r{m}.json")
    assert resumed["params_sha256"] == straight["params_sha256"]
    assert _history(resumed) == _history(straight)
    assert resumed["final"] == straight["final"]
    assert [r["round"] for r in resumed["gist"]["per_round"]] == [4, 5]  # counted from 1


def _checkpoint(graph_file, shared_tmp, world, name, m):
    path = graph_file(n=40, seed=10)
    ckpt = shared_tmp / name
    _train(world, path, "--subnets", str(m), "--rounds", "2", "--checkpoint-dir", str(ckpt),
           "--checkpoint-every", "1")
    return path, ckpt


def _subnets(size):
    return max(m for m in (1, 2, 3, 4) if size % m == 0)


@pytest.mark.mpi
def test_a_checkpoint_of_other_gist_settings_is_refused(graph_file, shared_tmp, world, capfd):
    m = _subnets(world.size)
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, "other", m)
    resume = ["train", path, *BASE, "--subnets", str(m), "--rounds", "3", "--resume", ckpt]
    cases = [
        (["--local-iters", "3"], "written with other settings (local_iters: 2 -> 3)"),
        (["--hidden", "12"], "written with other settings (hidden: 8 -> 12)"),
    ]
    if m > 1:
        cases.append((["--subnets", "1"], f"subnets: {m} -> 1"))
    for flags, words in cases:
        expect_error(world, capfd, [*resume, *flags], words)
    # the same checkpoint in ordinary training, and an ordinary one in GIST
    plain = ["train", str(path), "--hidden", "8", "--layers", "3", "--quiet", "--threads", "1"]
    expect_error(world, capfd, [*plain, "--epochs", "3", "--resume", ckpt],
                 "written with other settings", "algo: 'gist' -> '1d'")
    full = shared_tmp / "full"
    assert_all(world, main([*plain, "--epochs", "2", "--checkpoint-dir", str(full),
                            "--checkpoint-every", "1"]) == 0)
    expect_error(world, capfd, [*resume[:-1], full], "algo: '1d' -> 'gist'")


@pytest.mark.mpi
def test_broken_shard_files_are_named_on_every_rank(graph_file, shared_tmp, world, capfd):
    m = _subnets(world.size)
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, "broken", m)
    resume = ["train", path, *BASE, "--subnets", str(m), "--rounds", "3", "--resume", ckpt]
    last = world.size - 1
    shard = ckpt / SHARD_FILE.format(epoch=2, rank=last, ranks=world.size)
    good = shard.read_bytes()

    on_rank0(world, shard.write_bytes, good[:-7] + b"garbage")
    expect_error(world, capfd, resume, "does not belong to", shard.name)
    on_rank0(world, shard.unlink)
    expect_error(world, capfd, resume, f"the file of rank {last}", "is missing")
    on_rank0(world, shard.write_bytes, good)

    manifest = on_rank0(world, lambda: json.loads((ckpt / MANIFEST).read_text()))

    def rewrite(change):
        doc = json.loads(json.dumps(manifest))
        change(doc)
        (ckpt / MANIFEST).write_text(json.dumps(doc))

    on_rank0(world, rewrite, lambda d: d["shards"][0].update(file="../../etc/passwd"))
    expect_error(world, capfd, resume, "cannot read checkpoint", "the entry of rank 0")
    on_rank0(world, rewrite, lambda d: d.update(adam_step=5))
    expect_error(world, capfd, resume, "Adam step 5 after round 2")
    on_rank0(world, rewrite, lambda d: d.update(ranks=world.size + 1))
    expect_error(world, capfd, resume, "cannot read checkpoint", "one file per rank")
    on_rank0(world, rewrite, lambda d: None)
    assert_all(world, main([str(a) for a in resume]) == 0, "the intact checkpoint resumes")


@pytest.mark.mpi
def test_shard_arrays_of_another_shape_are_refused(graph_file, shared_tmp, world, capfd):
    import hashlib
    import io

    m = _subnets(world.size)
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, "shape", m)
    shard = ckpt / SHARD_FILE.format(epoch=2, rank=0, ranks=world.size)

    def rewrite():
        with np.load(shard) as npz:
            arrays = {k: npz[k] for k in npz.files}
        arrays["exp_avg1"] = arrays["exp_avg1"][:, :1]
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        shard.write_bytes(buf.getvalue())
        doc = json.loads((ckpt / MANIFEST).read_text())
        doc["shards"][0]["sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
        (ckpt / MANIFEST).write_text(json.dumps(doc))

    on_rank0(world, rewrite)
    resume = ["train", path, *BASE, "--subnets", str(m), "--rounds", "3", "--resume", ckpt]
    expect_error(world, capfd, resume, "array 'exp_avg1' is float32[", "this run needs float32[")


@pytest.mark.mpi
def test_finetune_from_a_gist_checkpoint_is_a_new_run_from_its_weights(graph_file, shared_tmp,
                                                                       world):
    """GIST with M = 1, K = 1 is full-batch training step for step, so fine-tuning from its
    checkpoint equals fine-tuning the full-batch run's (the same weights, new Adam moments,
    the rounds from the first); with lr 0 the weights stay the checkpoint's, whatever M."""
    path = graph_file(n=60, seed=9)
    one = ["--subnets", "1", "--local-iters", "1"]
    full = BASE[: BASE.index("--mode")]  # the same model, trained full-batch
    ckpt_g, ckpt_f = shared_tmp / "ft-gist", shared_tmp / "ft-full"
    source = _train(world, path, *one, "--rounds", "2", "--checkpoint-dir", str(ckpt_g),
                    metrics=shared_tmp / "ft-src.json")
    rc = main(["train", str(path), *full, "--epochs", "2", "--checkpoint-dir", str(ckpt_f)])
    assert_all(world, rc == 0)
    world.mpi.Barrier()
    tuned = _train(world, path, *one, "--rounds", "2", "--lr", "0.02", "--finetune",
                   str(ckpt_g), metrics=shared_tmp / "ft-g.json")
    out = shared_tmp / "ft-f.json"
    rc = main(["train", str(path), *full, "--epochs", "2", "--lr", "0.02", "--finetune",
               str(ckpt_f), "--metrics", str(out)])
    assert_all(world, rc == 0)
    world.mpi.Barrier()
    want = json.loads(out.read_text())
    assert tuned["params_sha256"] == want["params_sha256"]
    assert _history(tuned) == _history(want)
    if world.size % 2 == 0:  # another M: the rows are the same
        kept = _train(world, path, "--subnets", "2", "--rounds", "1", "--lr", "0",
                      "--finetune", str(ckpt_g), metrics=shared_tmp / "ft-m2.json")
        assert kept["params_sha256"] == source["params_sha256"]


@pytest.mark.mpi
@pytest.mark.ranks(4, 8)
def test_a_gist_checkpoint_resumes_at_another_rank_count_and_group_layout(
    graph_file, shared_tmp, world
):
    """Written at 4 ranks (``M = 2``, groups of 2 on 1D), resumed at 3 ranks (groups of 2
    and 1), at 2 on 2D groups and at 1 (hosting both sub-networks): every rank reads the
    rows it holds now from the files that hold them, and the losses are the uninterrupted
    run's (float64, 1e-10); predict at 1 rank on it. Sampled groups stay bound to theirs."""
    from mpi4py import MPI

    import hpcgnn
    from hpcgnn.api import FullBatchMode, GistMode, MinibatchMode
    from hpcgnn.errors import ConfigError

    path = graph_file(n=70, seed=8)
    common = {"epochs": 4, "hidden": 8, "layers": 3, "quiet": True, "eval_every": 0,
              "dtype": "float64", "dropout": 0.5}

    def gist(group=None):
        return GistMode(subnets=2, local_iters=2, rounds=4, group=group or FullBatchMode())

    quads = world.mpi.Split(world.rank // 4, world.rank)  # groups of 4 ranks
    ckpt, sampled = shared_tmp / f"g{world.rank // 4}", shared_tmp / f"gs{world.rank // 4}"
    try:
        ref = hpcgnn.train(path, mode=gist(), comm=quads, **common)
        hpcgnn.train(path, mode=replace(gist(), rounds=2), checkpoint_dir=ckpt,
                     checkpoint_every=1, comm=quads, **common)
        hpcgnn.train(path, mode=replace(gist(MinibatchMode(sampler="sage", batch_size=10)),
                                        rounds=2),
                     checkpoint_dir=sampled, checkpoint_every=1, comm=quads, **common)
    finally:
        quads.Free()
    want = [e["loss"] for e in ref.metrics["epochs"]]
    runs = [(gist(), 3), (gist(FullBatchMode(algo="2d")), 2), (gist(), 1)]
    for mode, size in runs:
        comm = world.mpi.Split(0 if world.rank < size else MPI.UNDEFINED, world.rank)
        ok, got = True, None
        if comm != MPI.COMM_NULL:
            try:
                got = [e["loss"] for e in hpcgnn.train(path, mode=mode, resume=ckpt, comm=comm,
                                                       **common).metrics["epochs"]]
                ok = len(got) == 4 and all(abs(a - b) <= 1e-10 * abs(b)
                                           for a, b in zip(got, want, strict=True))
            finally:
                comm.Free()
        assert_all(world, ok, f"{mode.group} at {size}: {got} vs {want}")
    refused = ""
    if world.rank == 0:  # a sampled group's steps depend on its ranks: bound to its grid
        try:
            hpcgnn.train(path, mode=gist(MinibatchMode(sampler="sage", batch_size=10)),
                         resume=sampled, comm=MPI.COMM_SELF, **common)
        except ConfigError as err:
            refused = str(err)
    assert_all(world, world.rank or "group_grid" in refused, refused)
    assert_predicts_alone(world, path, gist(), {"hidden": 8, "layers": 3, "dtype": "float64"},
                          ckpt, shared_tmp / f"gp{world.rank}.h5",
                          (70, ref.metrics["graph"]["num_classes"]))
