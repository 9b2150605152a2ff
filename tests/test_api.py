"""``hpcgnn.train(...)``: the run of ``hpcgnn train`` from Python, its result and its errors."""

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch

import hpcgnn
from hpcgnn.cli.main import main
from hpcgnn.errors import ConfigError, HpcgnnError
from hpcgnn.io import GraphFile
from hpcgnn.training.loop import params_sha256
from hpcgnn.utils.json_text import dumps
from tests.mpi import assert_all, assert_same_on_all_ranks

#: name -> the settings of both runs, as keywords (the command line is made from them)
RUNS = {
    "fullbatch": {"algo": "1d"},
    "minibatch": {"mode": "minibatch", "batch_size": 16, "fanout": [3, 2]},
}
COMMON = {"epochs": 4, "hidden": 8, "quiet": True, "select_model": "best"}


def _argv(settings):
    out = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        else:
            out += [flag, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return out


def _comparable(doc):
    """The metrics without what differs between two runs of the same settings (times, the
    command, the date): as the file holds them (NaN as null)."""
    doc = json.loads(dumps(doc))
    for key in ("run", "time"):
        doc.pop(key)
    for rec in doc["epochs"]:
        for key in ("time_s", "comm_s", "new_pages"):
            rec.pop(key)
    doc.get("sampling", {}).pop("sample_time_s", None)
    return doc


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_function_is_the_command(graph_file, shared_tmp, world, name):
    path = graph_file("api.h5", n=48, seed=2)
    settings = {**COMMON, **RUNS[name]}
    out = shared_tmp / f"{name}.json"
    rc = main(["train", str(path), "--metrics", str(out), *_argv(settings)])
    assert_all(world, rc == 0, f"train exited {rc}")
    result = hpcgnn.train(path, **settings)
    cli = json.loads(out.read_text())
    assert result.params_sha256 == cli["params_sha256"]
    assert _comparable(result.metrics) == _comparable(cli)
    # the weights: whole on every rank, on the host, the hashed ones
    assert all(w.device.type == "cpu" and not w.requires_grad for w in result.weights)
    assert params_sha256(result.weights) == result.params_sha256
    assert_same_on_all_ranks(world, result.weights, "weights differ across ranks")
    y, test = _labels(path)
    if name == "minibatch":  # biases and the sampler's operator: no hpcgnn.nn.GCN
        with pytest.raises(HpcgnnError, match=r"not hpcgnn\.nn\.GCN's layers"):
            result.model()
        return
    # inference on this process: the run's test accuracy
    logits = result.predict()
    assert logits.shape == (48, int(y.max()) + 1)
    acc = float((logits.argmax(1).numpy() == y)[test].mean())
    assert acc == pytest.approx(result.final["test_acc"])


def _labels(path):
    with GraphFile(path) as g:
        n = g.meta.num_nodes
        return g.read_labels(0, n), g.read_mask("test", 0, n)


@pytest.mark.mpi
def test_the_returned_model_predicts_what_hpcgnn_predict_writes(graph_file, shared_tmp, world):
    path = graph_file("api-pred.h5", n=48, seed=2)
    ck, out = shared_tmp / "ck", shared_tmp / "p.h5"
    result = hpcgnn.train(path, checkpoint_dir=ck, algo="1d", **COMMON)
    rc = main(["predict", str(path), "--checkpoint", str(ck), "--out", str(out), "--quiet"])
    assert_all(world, rc == 0, f"predict exited {rc}")
    with h5py.File(out) as f:
        written = f["logits"][()]
    np.testing.assert_allclose(result.predict().numpy(), written, rtol=1e-4, atol=1e-5)
    module = result.model()
    assert not module.training and isinstance(module, torch.nn.Module)


#: settings -> words of the one-line error (argparse's, the config's, the mode's, the run's)
BAD = [
    ({"mode": "bogus"}, "argument --mode: invalid choice"),
    ({"epochs": "ten"}, "argument --epochs: invalid int value"),
    ({"epoch": 3}, "'epoch' is no flag of hpcgnn train"),
    ({"quiet": 1}, "quiet is a switch"),
    ({"dropout": 1.5}, "--dropout must be in [0, 1)"),
    ({"mode": "gist", "select_model": "best"}, "--select-model best keeps a copy"),
    ({"metrics": ""}, "--metrics: an empty path"),
]


@pytest.mark.mpi
@pytest.mark.parametrize(("settings", "words"), BAD)
def test_a_bad_setting_raises_the_commands_line_on_every_rank(graph_file, world, settings,
                                                              words):
    path = graph_file("api-bad.h5", n=32, seed=1)
    try:
        hpcgnn.train(path, **{"epochs": 1, "quiet": True, **settings})
        raised = None
    except ConfigError as err:
        raised = str(err)
    assert_all(world, raised is not None and words in raised and "\n" not in raised, raised)


def test_import_hpcgnn_stays_light():
    code = ("import sys, hpcgnn; assert callable(hpcgnn.train); from hpcgnn import train;"
            " assert train is hpcgnn.train;"
            " print('torch' in sys.modules, 'mpi4py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "False"]
    # the training package is hpcgnn.training; importing it leaves the function alone
    import hpcgnn.training.checkpoint as ck
    from hpcgnn.training import run

    assert hpcgnn.training.checkpoint is ck and run.train is not None
    assert callable(hpcgnn.train) and not isinstance(hpcgnn.train, type(hpcgnn))


@pytest.mark.mpi
def test_comm_names_the_ranks_that_train(graph_file, world):
    from mpi4py import MPI

    path = graph_file("api-self.h5", n=32, seed=1)
    alone = hpcgnn.train(path, comm=MPI.COMM_SELF, epochs=2, hidden=4, quiet=True)
    assert alone.metrics["world_size"] == 1
    assert_same_on_all_ranks(world, alone.params_sha256, "each rank trained alone alike")


def test_settings_are_the_commands_flags(tmp_path):
    from hpcgnn.api import parse_settings
    from hpcgnn.cli.main import build_parser

    run = tmp_path / "run.toml"
    run.write_text('epochs = 3\nhidden = 32\nmode = "minibatch"\n')
    got = vars(parse_settings(tmp_path / "-g.h5", {
        "config": run, "epochs": 2, "fanout": (10, 5), "quiet": True, "reorganize": False,
        "checkpoint_dir": tmp_path / "ck", "lr": 1e-3, "seed": None, "grid": "-1",
    }))
    want = vars(build_parser().parse_args([
        "train", "--epochs", "3", "--hidden", "32", "--mode", "minibatch", "--epochs", "2",
        "--fanout", "10,5", "--quiet", "--checkpoint-dir", str(tmp_path / "ck"), "--lr",
        "0.001", "--grid=-1", "--", str(tmp_path / "-g.h5"),
    ]))
    for key in ("command", "func"):
        want.pop(key)
    assert got == want and got["epochs"] == 2 and got["hidden"] == 32  # the call's win
