"""Checkpoints are pickle-free and validated: hostile or broken ones give one clear line."""

import hashlib
import io
import json
import os
import pickle

import numpy as np
import pytest

from hpcgnn.cli.main import main
from hpcgnn.training.checkpoint import LEGACY, MANIFEST
from tests.mpi import assert_all, error_output, on_rank0
from tests.training.predicting import assert_predicts_alone

TRAIN = ["--epochs", "3", "--hidden", "8", "--quiet", "--threads", "1"]


class _Boom:
    """Unpickling this creates a marker file: proof that a loader ran code."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.makedirs, (self.marker,))


def _checkpoint(graph_file, shared_tmp, world, name):
    path = graph_file(n=60, seed=3)
    ckpt = shared_tmp / name
    rc = main(["train", str(path), *TRAIN, "--checkpoint-dir", str(ckpt), "--checkpoint-every", "1",
               "--epochs", "2"])
    assert_all(world, rc == 0, "checkpointing run failed")
    world.mpi.Barrier()
    return path, ckpt


def arrays_file(ckpt):
    """The ``.npz`` the checkpoint's manifest names."""
    return ckpt / json.loads((ckpt / MANIFEST).read_text())["arrays_file"]


def _rewrite_arrays(ckpt, change):
    """Replace the ``.npz`` by ``change(arrays)`` and re-bind the manifest to it."""
    with np.load(arrays_file(ckpt)) as npz:
        arrays = {k: npz[k] for k in npz.files}
    buf = io.BytesIO()
    np.savez(buf, **change(arrays))
    (arrays_file(ckpt)).write_bytes(buf.getvalue())
    manifest = json.loads((ckpt / MANIFEST).read_text())
    manifest["arrays_sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    (ckpt / MANIFEST).write_text(json.dumps(manifest))


def _resume_error(path, ckpt, world, capsys, *extra):
    rc = main(["train", str(path), *TRAIN, "--resume", str(ckpt), *extra])
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc == 1 and len(err) == 1 and err[0].startswith("hpcgnn: error: "),
               f"expected one error line, got rc {rc}: {err}")
    return err[0]


@pytest.mark.mpi
def test_pickle_checkpoints_are_refused_without_running_code(graph_file, shared_tmp, world, capsys):
    path = graph_file(n=60, seed=3)
    ckpt, marker = shared_tmp / "legacy", shared_tmp / "pwned"

    def write():
        ckpt.mkdir()
        (ckpt / LEGACY).write_bytes(pickle.dumps(_Boom(str(marker))))

    on_rank0(world, write)
    line = _resume_error(path, ckpt, world, capsys)
    assert_all(world, "pickle checkpoint" in line and "not loaded" in line, line)
    assert_all(world, not marker.exists(), "the pickle was loaded")


@pytest.mark.mpi
def test_object_arrays_in_the_npz_are_refused(graph_file, shared_tmp, world, capsys):
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, "objects")
    marker = shared_tmp / "pwned-npz"
    on_rank0(world, _rewrite_arrays, ckpt,
             lambda a: {**a, "w0": np.array([_Boom(str(marker))], dtype=object)})
    line = _resume_error(path, ckpt, world, capsys)
    assert_all(world, "cannot read checkpoint" in line, line)
    assert_all(world, not marker.exists(), "an object array was unpickled")


@pytest.mark.mpi
def test_wrong_shapes_missing_arrays_and_foreign_files_are_named(
    graph_file, shared_tmp, world, capsys
):
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, "shapes")
    on_rank0(world, _rewrite_arrays, ckpt,
             lambda a: {k: v for k, v in a.items() if k != "exp_avg0"})
    line = _resume_error(path, ckpt, world, capsys)
    assert_all(world, "array 'exp_avg0' is missing" in line, line)
    on_rank0(world, _rewrite_arrays, ckpt, lambda a: {**a, "w1": a["w1"][:, :1]})
    line = _resume_error(path, ckpt, world, capsys)
    assert_all(world, "array 'w1' is float32[8, 1], this run needs float32[8, 3]" in line, line)
    on_rank0(world, (arrays_file(ckpt)).write_bytes, b"not an npz at all")
    line = _resume_error(path, ckpt, world, capsys)
    assert_all(world, "does not belong to" in line, line)


@pytest.mark.mpi
def test_nothing_left_to_train_is_an_error(graph_file, shared_tmp, world, capsys):
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, "done")
    line = _resume_error(path, ckpt, world, capsys, "--epochs", "2")
    assert_all(world, "nothing is left to train" in line, line)


@pytest.mark.mpi
def test_a_version_1_checkpoint_resumes_renumbered(graph_file, shared_tmp, world):
    """Version 1 numbered its history from 0: read as 1-based, and the run goes on bit for bit."""
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, "version-1")

    def downgrade():
        manifest = json.loads((ckpt / MANIFEST).read_text())
        assert manifest["version"] == 2 and [r["epoch"] for r in manifest["history"]] == [1, 2]
        history = [{**r, "epoch": r["epoch"] - 1} for r in manifest["history"]]
        (ckpt / MANIFEST).write_text(json.dumps({**manifest, "version": 1, "history": history}))

    on_rank0(world, downgrade)
    straight, resumed = shared_tmp / "v1-straight.json", shared_tmp / "v1-resumed.json"
    assert_all(world, main(["train", str(path), *TRAIN, "--epochs", "4",
                            "--metrics", str(straight)]) == 0)
    assert_all(world, main(["train", str(path), *TRAIN, "--epochs", "4", "--resume", str(ckpt),
                            "--metrics", str(resumed)]) == 0)
    a, b = (json.loads(p.read_text()) for p in (straight, resumed))
    assert_all(world, a["params_sha256"] == b["params_sha256"])
    assert [(e["epoch"], e["loss"]) for e in a["epochs"]] == [
        (e["epoch"], e["loss"]) for e in b["epochs"]]
    assert [e["epoch"] for e in b["epochs"]] == [1, 2, 3, 4]


@pytest.mark.mpi
def test_a_saved_epoch_out_of_range_is_named(graph_file, shared_tmp, world, capsys):
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, "epochs")

    def set_epoch(epoch):
        manifest = json.loads((ckpt / MANIFEST).read_text())
        (ckpt / MANIFEST).write_text(json.dumps({**manifest, "epoch": epoch}))

    for epoch, words in ((-5, "field 'epoch' is -5, expected >= 1"),
                         (10**6, "the history does not hold one record per epoch")):
        on_rank0(world, set_epoch, epoch)
        line = _resume_error(path, ckpt, world, capsys, "--epochs", str(10**7))
        assert_all(world, words in line, line)


def _rebind(ckpt):
    """Bind the manifest to the ``.npz`` as it is now (an attacker can do the same)."""
    manifest = json.loads((ckpt / MANIFEST).read_text())
    manifest["arrays_sha256"] = hashlib.sha256((arrays_file(ckpt)).read_bytes()).hexdigest()
    (ckpt / MANIFEST).write_text(json.dumps(manifest))


def _add_member(ckpt, name, data):
    import zipfile

    with zipfile.ZipFile(arrays_file(ckpt), "a") as z:
        z.writestr(name, data)
    _rebind(ckpt)


def _bomb(ckpt):
    with np.load(arrays_file(ckpt)) as npz:
        arrays = {k: npz[k] for k in npz.files}
    np.savez_compressed(arrays_file(ckpt), **{**arrays, "w0": np.zeros((4000, 5000), np.float32)})
    _rebind(ckpt)


def _history(ckpt):
    manifest = json.loads((ckpt / MANIFEST).read_text())
    manifest["history"] = [{k: "x" for k in rec} for rec in manifest["history"]]
    (ckpt / MANIFEST).write_text(json.dumps(manifest))


def _fifo(ckpt):
    (ckpt / MANIFEST).unlink()
    os.mkfifo(ckpt / MANIFEST)


#: name -> (how the checkpoint is crafted, words of the one line)
CRAFTED = {
    "member-not-npy": (lambda c: _add_member(c, "w9.npy", b"no magic here"),
                       "member 'w9' is not a .npy array"),
    "member-not-an-array": (lambda c: _add_member(c, "notes.txt", b"hello"),
                            "member 'notes.txt' is not a .npy array"),
    "zip-bomb": (_bomb, "inflate to"),
    "short-rng-state": (lambda c: _rewrite_arrays(
        c, lambda a: {**a, "torch_rng": a["torch_rng"][:10]}), "random state holds 10 bytes"),
    "step-array": (lambda c: _rewrite_arrays(c, lambda a: {**a, "step0": np.arange(5.0)}),
                   "Adam step of weight 0 has shape [5]"),
    "history-strings": (_history, "one record per epoch, of numbers"),
    "fifo-manifest": (_fifo, "not a regular file"),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_crafted_checkpoints_are_one_line(graph_file, shared_tmp, world, capsys, name):
    craft, words = CRAFTED[name]
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, f"crafted-{name}")
    on_rank0(world, craft, ckpt)
    line = _resume_error(path, ckpt, world, capsys, "--epochs", "4")
    assert_all(world, words in line, line)


def _disk_full_at_manifest(monkeypatch):
    """Every checkpoint manifest write fails as on a full disk (after its arrays were written)."""
    import hpcgnn.training.checkpoint as ck
    from hpcgnn.errors import OutputError

    real = ck.atomic_write

    def write(path, data, what="output"):
        if str(path).endswith(MANIFEST):
            raise OutputError(f"{what} {path}: No space left on device")
        return real(path, data, what)

    monkeypatch.setattr(ck, "atomic_write", write)


@pytest.mark.mpi
def test_a_full_disk_leaves_no_directory_and_keeps_the_previous_checkpoint(
    graph_file, shared_tmp, world, capsys, monkeypatch
):
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, "full")
    before = {p.name: p.read_bytes() for p in sorted(ckpt.iterdir())}
    _disk_full_at_manifest(monkeypatch)
    fresh = shared_tmp / "fresh" / "ck"
    rc = main(["train", str(path), *TRAIN, "--checkpoint-dir", str(fresh)])
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc == 1 and len(err) == 1 and "No space left on device" in err[0], err)
    assert_all(world, not (shared_tmp / "fresh").exists(), "an empty directory was left")
    rc = main(["train", str(path), *TRAIN, "--epochs", "4", "--resume", str(ckpt),
               "--checkpoint-dir", str(ckpt)])
    capsys.readouterr()
    after = {p.name: p.read_bytes() for p in sorted(ckpt.iterdir())}
    assert_all(world, rc == 1 and after == before, f"the previous checkpoint changed: {after}")
    monkeypatch.undo()
    line = main(["train", str(path), *TRAIN, "--epochs", "4", "--resume", str(ckpt)])
    assert_all(world, line == 0, "the previous checkpoint no longer resumes")


@pytest.mark.mpi
def test_finetune_starts_from_the_weights_with_any_settings(graph_file, shared_tmp, world,
                                                            capsys):
    path, ckpt = _checkpoint(graph_file, shared_tmp, world, "tune")
    base = shared_tmp / "base.json"
    assert_all(world, main(["train", str(path), *TRAIN, "--epochs", "2",
                            "--metrics", str(base)]) == 0)
    out = shared_tmp / "tuned.json"
    # lr 0: the weights stay the checkpoint's, so the digests agree; another seed, dropout
    # and number of epochs are allowed
    rc = main(["train", str(path), *TRAIN, "--epochs", "1", "--lr", "0", "--seed", "9",
               "--dropout", "0.1", "--finetune", str(ckpt), "--metrics", str(out)])
    assert_all(world, rc == 0)
    assert json.loads(out.read_text())["params_sha256"] == json.loads(
        base.read_text())["params_sha256"]
    other = graph_file("other.h5", n=60, seed=11)  # another graph of the same widths
    assert_all(world, main(["train", str(other), *TRAIN, "--finetune", str(ckpt)]) == 0)
    capsys.readouterr()
    for extra, words in ((["--hidden", "5"], "array 'w0' is float32[6, 8], this run needs"),
                         (["--resume", str(ckpt)], "give one of them"),
                         (["--mode", "gist"], "holds a replicated model, not a row-sharded")):
        rc = main(["train", str(path), *TRAIN, "--finetune", str(ckpt), *extra])
        err = error_output(world, capsys.readouterr().err).strip().splitlines()
        assert_all(world, rc == 1 and len(err) == 1 and words in err[0], err)


@pytest.mark.mpi
@pytest.mark.ranks(4, 8)
def test_a_checkpoint_resumes_at_another_rank_count_and_layout(graph_file, shared_tmp, world):
    """Written at 4 ranks by 1.5D with replication 2, resumed at 2 ranks on a 2D grid, at 1
    rank on 1D and (where the suite runs 8 ranks) at 8 on 1D: the same losses as the run
    never stopped (float32, 1e-6 relative); predict at 1 rank on it."""
    from mpi4py import MPI

    import hpcgnn
    from hpcgnn.api import FullBatchMode

    path = graph_file(n=70, seed=8)
    common = {"epochs": 4, "hidden": 8, "quiet": True, "eval_every": 0}
    quads = world.mpi.Split(world.rank // 4, world.rank)  # groups of 4 ranks
    ckpt = shared_tmp / f"ckpt{world.rank // 4}"
    written = FullBatchMode(algo="1.5d", replication=2)
    try:
        ref = hpcgnn.train(path, mode=written, comm=quads, **common)
        hpcgnn.train(path, mode=written, checkpoint_dir=ckpt, checkpoint_every=1, comm=quads,
                     **{**common, "epochs": 2})
    finally:
        quads.Free()
    want = [e["loss"] for e in ref.metrics["epochs"]]
    pairs = world.mpi.Split(world.rank // 2, world.rank)
    runs = [(FullBatchMode(algo="2d"), pairs, ckpt), (FullBatchMode(), MPI.COMM_SELF, ckpt)]
    if world.size == 8:
        runs.append((FullBatchMode(), world.mpi, shared_tmp / "ckpt0"))
    try:
        for mode, comm, where in runs:
            got = [e["loss"] for e in hpcgnn.train(path, mode=mode, resume=where, comm=comm,
                                                   **common).metrics["epochs"]]
            ok = len(got) == 4 and all(abs(a - b) <= 1e-6 * abs(b)
                                       for a, b in zip(got, want, strict=True))
            assert_all(world, ok, f"{mode} at {comm.Get_size()}: {got} vs {want}")
    finally:
        pairs.Free()
    assert_predicts_alone(world, path, FullBatchMode(), {"hidden": 8}, ckpt,
                          shared_tmp / f"p{world.rank}.h5",
                          (70, ref.metrics["graph"]["num_classes"]))
