"""``--select-model best``: the run ends with the weights of its best-validation epoch.

The final metrics, ``params_sha256``, the last checkpoint and ``hpcgnn predict`` are that
epoch's model, which a run of that many epochs ends with too; a resumed run keeps it.
"""

import json

import h5py
import numpy as np
import pytest
import torch

from hpcgnn.cli.main import main
from hpcgnn.config import TrainConfig
from hpcgnn.errors import ConfigError
from hpcgnn.training.loop import params_sha256
from tests.mpi import assert_all, error_output

#: name -> flags: a learning rate at which the validation loss turns before the last epoch
MODES = {
    "fullbatch": ["--algo", "1d", "--lr", "0.5"],
    "minibatch": ["--mode", "minibatch", "--batch-size", "16", "--lr", "0.2"],
    "offload": ["--mode", "offload", "--chunks", "2", "--lr", "0.5"],
}
EPOCHS = 12


def _train(world, path, *flags):
    rc = main(["train", str(path), "--hidden", "8", "--quiet", *flags])
    assert_all(world, rc == 0, f"train exited {rc}")


def _checkpoint_weights(ck):
    manifest = json.loads((ck / "checkpoint.json").read_text())
    with np.load(ck / manifest["arrays_file"]) as z:
        return [torch.from_numpy(z[f"w{i}"]) for i in range(manifest["num_weights"])]


def _logits(world, path, ck, out, flags):
    # a full-batch run's flags come from the checkpoint; another mode's are given (no --lr)
    given = [] if "--algo" in flags else flags[: flags.index("--lr")]
    rc = main(["predict", str(path), "--checkpoint", str(ck), "--out", str(out), "--quiet",
               *given])
    assert_all(world, rc == 0, f"predict exited {rc}")
    with h5py.File(out) as f:
        return f["logits"][()]


@pytest.mark.mpi
@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_best_epochs_weights_are_the_runs(graph_file, shared_tmp, world, mode):
    path = graph_file("select.h5", n=60, seed=4)
    flags = MODES[mode]
    best_run, short_run = shared_tmp / "best", shared_tmp / "short"
    _train(world, path, *flags, "--epochs", str(EPOCHS), "--select-model", "best",
           "--metrics", str(best_run / "m.json"), "--checkpoint-dir", str(best_run / "ck"))
    doc = json.loads((best_run / "m.json").read_text())
    best = doc["best"]
    assert best["selected"] and 1 <= best["epoch"] < EPOCHS, best  # the loss turned
    assert doc["config"]["select_model"] == "best"
    # the run of best.epoch epochs ends with the same weights (--select-model last)
    _train(world, path, *flags, "--epochs", str(best["epoch"]),
           "--metrics", str(short_run / "m.json"), "--checkpoint-dir", str(short_run / "ck"))
    short = json.loads((short_run / "m.json").read_text())
    assert doc["params_sha256"] == short["params_sha256"]
    assert doc["final"] == short["final"] and doc["final"]["val_loss"] == best["val_loss"]
    assert not short["best"]["selected"]
    trail = [(e["loss"], e["val_loss"], e["test_acc"]) for e in doc["epochs"]]
    assert [(e["loss"], e["val_loss"], e["test_acc"]) for e in short["epochs"]] == trail[
        : best["epoch"]]
    # the last checkpoint's model and hpcgnn predict follow
    assert params_sha256(_checkpoint_weights(best_run / "ck")) == doc["params_sha256"]
    a = _logits(world, path, best_run / "ck", best_run / "p.h5", flags)
    b = _logits(world, path, short_run / "ck", short_run / "p.h5", flags)
    np.testing.assert_array_equal(a, b)


@pytest.mark.mpi
@pytest.mark.parametrize("mode", ["fullbatch", "minibatch"])
def test_a_resumed_run_keeps_the_best_weights(graph_file, shared_tmp, world, mode):
    path = graph_file("select-resume.h5", n=60, seed=4)
    flags = [*MODES[mode], "--select-model", "best"]
    straight, resumed, ck = (shared_tmp / k for k in ("straight.json", "resumed.json", "ck"))
    _train(world, path, *flags, "--epochs", str(EPOCHS), "--metrics", str(straight))
    a = json.loads(straight.read_text())
    # interrupted after the best epoch: the checkpoint holds the kept and the last weights
    stop = a["best"]["epoch"] + 1
    _train(world, path, *flags, "--epochs", str(stop), "--checkpoint-dir", str(ck))
    manifest = json.loads((ck / "checkpoint.json").read_text())
    with np.load(ck / manifest["arrays_file"]) as z:
        assert "train_w0" in z.files
    _train(world, path, *flags, "--epochs", str(EPOCHS), "--resume", str(ck),
           "--metrics", str(resumed))
    b = json.loads(resumed.read_text())
    assert (a["params_sha256"], a["final"], a["best"]) == (b["params_sha256"], b["final"],
                                                           b["best"])


@pytest.mark.mpi
def test_gist_refuses_in_one_line(graph_file, world, capsys):
    path = graph_file("select-gist.h5", n=32, seed=1)
    rc = main(["train", str(path), "--mode", "gist", "--select-model", "best", "--epochs", "2"])
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc == 1 and len(err) == 1 and "--select-model best keeps" in err[0], err)


@pytest.mark.mpi
def test_a_checkpoint_from_before_the_flag_resumes(graph_file, shared_tmp, world):
    path = graph_file("select-old.h5", n=32, seed=1)
    ck = shared_tmp / "old"
    _train(world, path, "--epochs", "2", "--checkpoint-dir", str(ck))
    manifest_path = ck / "checkpoint.json"
    if world.rank == 0:  # as written before --select-model: no such key
        manifest = json.loads(manifest_path.read_text())
        del manifest["fingerprint"]["select_model"]
        manifest_path.write_text(json.dumps(manifest))
    world.barrier()
    _train(world, path, "--epochs", "3", "--resume", str(ck))


def test_best_needs_evaluations():
    with pytest.raises(ConfigError, match="--select-model best chooses by the validation"):
        TrainConfig(select_model="best", eval_every=0)
    with pytest.raises(ConfigError, match="--select-model must be one of last, best"):
        TrainConfig(select_model="first")
