"""``hpcgnn predict`` writes the logits of a checkpoint's model for every vertex, once."""

import json

import h5py
import numpy as np
import pytest
import torch

from hpcgnn.cli.main import main
from hpcgnn.io import GraphFile
from hpcgnn.nn import GCN, Graph
from tests.mpi import assert_all, error_output

#: name -> flags of the training run (and of the prediction).
RUNS = {
    "1d": ["--algo", "1d"],
    "1.5d": ["--algo", "1.5d"],
    "2d": ["--algo", "2d"],
    "halo": ["--algo", "halo"],
    "offload": ["--mode", "offload"],
    "sage": ["--algo", "1d", "--model", "sage"],
    "minibatch": ["--mode", "minibatch", "--batch-size", "16"],
    "gist": ["--mode", "gist", "--subnets", "1"],
}


def _labels(path):
    with GraphFile(path) as g:
        n = g.meta.num_nodes
        return g.read_labels(0, n), g.read_mask("test", 0, n)


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(RUNS))
def test_predictions_are_the_trained_models(graph_file, shared_tmp, world, name):
    path = graph_file("pred.h5", n=64, seed=6)
    flags = RUNS[name]
    if name == "1.5d" and world.size % 2:
        flags = [*flags, "--replication", "1"]
    ck, metrics, out = (shared_tmp / f"{name}-{k}" for k in ("ck", "m.json", "p.h5"))
    rc = main(["train", str(path), "--epochs", "4", "--hidden", "8", "--quiet",
               "--checkpoint-dir", str(ck), "--metrics", str(metrics), *flags])
    assert_all(world, rc == 0, f"train exited {rc}")
    # the model's settings (--hidden 8, a full-batch --algo) come from the checkpoint
    given = [] if name in ("1d", "1.5d", "2d", "halo", "sage") else flags
    if name == "1.5d" and world.size % 2:
        given = []  # the checkpoint has its grid
    rc = main(["predict", str(path), "--checkpoint", str(ck), "--out", str(out),
               "--quiet", *given])
    assert_all(world, rc == 0, f"predict exited {rc}")
    final = json.loads(metrics.read_text())["final"]
    y, test = _labels(path)
    with h5py.File(out) as f:
        logits, pred = f["logits"][()], f["predictions"][()]
    assert logits.shape == (64, int(y.max()) + 1)
    np.testing.assert_array_equal(pred, logits.argmax(1))
    assert float((pred == y)[test].mean()) == pytest.approx(final["test_acc"])
    if name in ("1d", "1.5d", "2d", "sage"):  # the serial model with the checkpoint's weights
        model = "sage" if name == "sage" else "gcn"
        g = Graph.read(path, model=model)
        net = GCN(g.num_features, 8, g.num_classes, model=model).eval()
        arrays = np.load(ck / json.loads((ck / "checkpoint.json").read_text())["arrays_file"])
        with torch.no_grad():
            for k, w in enumerate(net.weights):
                w.copy_(torch.from_numpy(arrays[f"w{k}"]))
            want = net(g).numpy()
        np.testing.assert_allclose(logits, want, rtol=1e-4, atol=1e-5)


@pytest.mark.mpi
def test_training_flags_are_refused(graph_file, shared_tmp, world, capsys):
    path = graph_file("pred.h5", n=64, seed=6)
    rc = main(["predict", str(path), "--checkpoint", str(shared_tmp), "--out",
               str(shared_tmp / "p.h5"), "--lr", "0.1"])
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc != 0 and len(err) == 1 and "--lr: predict does not train" in err[0], err)


@pytest.mark.mpi
def test_a_given_setting_must_match_the_checkpoint(graph_file, shared_tmp, world, capsys):
    path = graph_file("pred.h5", n=64, seed=6)
    ck = shared_tmp / "gat-ck"
    rc = main(["train", str(path), "--epochs", "2", "--hidden", "8", "--quiet", "--model",
               "gat", "--heads", "2", "--algo", "halo", "--checkpoint-dir", str(ck)])
    assert_all(world, rc == 0, f"train exited {rc}")
    out = shared_tmp / "gat.h5"
    assert_all(world, main(["predict", str(path), "--checkpoint", str(ck), "--out", str(out),
                            "--quiet"]) == 0, "predict from the checkpoint's settings")
    capsys.readouterr()
    rc = main(["predict", str(path), "--checkpoint", str(ck), "--out", str(out), "--heads",
               "4"])
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc != 0 and len(err) == 1 and "heads: 2 -> 4" in err[0], err)
