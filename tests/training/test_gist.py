"""GIST against ordinary full-batch training, and its settings, at any number of ranks."""

import json

import numpy as np
import pytest

from hpcgnn.cli.main import main
from hpcgnn.kinds import layer_kind
from hpcgnn.layout.order import layer_sizes
from hpcgnn.nn.init import init_weights
from hpcgnn.training.loop import params_sha256
from tests.mpi import assert_all
from tests.robustness.harness import expect_error

BASE = ["--epochs", "4", "--hidden", "8", "--layers", "3", "--dropout", "0.5", "--seed", "2",
        "--quiet", "--threads", "1"]


def _train(world, path, metrics, *flags, base=BASE):
    rc = main(["train", str(path), *base, "--metrics", str(metrics), *flags])
    assert_all(world, rc == 0, f"train {flags} failed")
    world.mpi.Barrier()
    return json.loads(metrics.read_text())


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["gcn", "sage", "gin"])
@pytest.mark.parametrize("algo", ["1d", "2d"])
def test_one_subnet_one_iteration_is_full_batch_training_step_for_step(
    graph_file, shared_tmp, world, algo, model
):
    path = graph_file(n=60, seed=4)
    full = _train(world, path, shared_tmp / "full.json", "--algo", algo, "--model", model)
    gist = _train(world, path, shared_tmp / "gist.json", "--algo", algo, "--mode", "gist",
                  "--subnets", "1", "--local-iters", "1", "--model", model)
    np.testing.assert_allclose(
        [e["loss"] for e in gist["epochs"]], [e["loss"] for e in full["epochs"]], rtol=1e-6
    )
    assert gist["params_sha256"] == full["params_sha256"]


def _subnets(size):
    return max(m for m in (1, 2, 3, 4) if size % m == 0)


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["gcn", "sage", "gin"])
def test_a_round_with_learning_rate_zero_changes_nothing(graph_file, shared_tmp, world, model):
    path = graph_file(n=50, seed=5)
    m = _subnets(world.size)
    doc = _train(world, path, shared_tmp / "lr0.json", "--mode", "gist", "--subnets", str(m),
                 "--local-iters", "2", "--rounds", "2", "--lr", "0", "--model", model)
    meta_widths = layer_sizes(6, 8, 3, 3)
    want = init_weights(meta_widths, 2, kind=layer_kind(model))
    assert doc["params_sha256"] == params_sha256(want)


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["gcn", "sage", "gin"])
def test_sub_model_traffic_equals_the_cost_model_every_round(
    graph_file, shared_tmp, world, model
):
    path = graph_file(n=50, seed=6)
    m = _subnets(world.size)
    doc = _train(world, path, shared_tmp / "t.json", "--mode", "gist", "--subnets", str(m),
                 "--local-iters", "2", "--rounds", "4", "--eval-every", "1", "--model", model)
    section = doc["gist"]
    assert section["subnets"] == m and section["rounds"] == 4 and len(section["per_round"]) == 4
    assert doc["config"]["model"] == model
    for rec in section["per_round"]:
        assert rec["sent_bytes"] == rec["predicted_sent_bytes"]
        assert rec["returned_bytes"] == rec["predicted_returned_bytes"]
        assert rec["val_acc"] is not None
    measured, predicted = doc["comm"]["measured_bytes"], doc["comm"]["predicted_bytes"]
    for cat, value in predicted.items():
        assert measured.get(cat, 0.0) == pytest.approx(value, rel=1e-9), cat
    if world.size > 1:
        assert section["submodel_bytes_per_round"]["measured"] > 0
    # the model-parallel evaluation: every round and the final one, as modelled
    ev = section["eval_bytes_per_evaluation"]
    assert ev["evaluations"] == 5
    assert ev["measured"] == pytest.approx(ev["predicted"], rel=1e-12)
    assert len(section["peak_memory_bytes"]) == world.size
    assert section["full_model_estimate_bytes"] > 0 and section["gist_estimate_bytes"] > 0


def _bad_settings(size):
    cases = [
        (["--subnets", "0"], "--subnets must be >= 1"),
        (["--local-iters", "0"], "--local-iters must be >= 1"),
        (["--rounds", "0"], "--rounds must be >= 1"),
    ]
    if size >= 3:  # unequal groups are full-batch groups only
        cases.append((["--subnets", "2" if size % 2 else "3", "--sampler", "sage", "--fanout",
                       "3,2,2"], "must divide"))
    if size >= 2:
        cases.append((["--subnets", str(size), "--hidden", "1"], "--hidden 1 cannot be split"))
    return cases


@pytest.mark.mpi
def test_bad_settings_give_one_line_on_every_rank(graph_file, world, capfd):
    path = graph_file(n=30, seed=7)
    for flags, words in _bad_settings(world.size):
        expect_error(world, capfd, ["train", path, *BASE, "--mode", "gist", *flags], words)


@pytest.mark.mpi
@pytest.mark.parametrize(("model", "sampled"), [
    ("gcn", None), ("gin", None), ("sage", {"sampler": "sage", "fanout": [3, 2],
                                            "batch_size": 10}),
], ids=["gcn", "gin", "sage-sampled"])
def test_more_sub_networks_than_ranks_train_as_on_one_rank(
    graph_file, shared_tmp, world, model, sampled
):
    """``M = 5 > P``: a rank hosts several sub-networks and trains them in turn.

    Their widths differ (``--hidden 8``: 2, 2, 2, 1, 1), so a rank may hold a group trainer
    per width; the run equals the one on one rank that hosts all five, every byte predicted.
    """
    from mpi4py import MPI

    import hpcgnn.api
    from hpcgnn.training.modes import FullBatchMode, GistMode, MinibatchMode

    group = FullBatchMode() if sampled is None else MinibatchMode(**sampled)
    path = graph_file(n=60, seed=8)
    common = {"model": model, "layers": 2, "hidden": 8, "epochs": 3, "dropout": 0.5,
              "dtype": "float64", "quiet": True, "eval_every": 1,
              "mode": GistMode(subnets=5, local_iters=2, rounds=3, group=group)}
    ref = hpcgnn.api.train(path, comm=MPI.COMM_SELF, **common)
    metrics = shared_tmp / f"hosted-{model}.json"
    run = hpcgnn.api.train(path, comm=MPI.COMM_WORLD, metrics=metrics, **common)
    world.mpi.Barrier()
    doc = json.loads(metrics.read_text())
    np.testing.assert_allclose([e["loss"] for e in doc["epochs"]],
                               [e["loss"] for e in ref.metrics["epochs"]], rtol=1e-10)
    assert run.params_sha256 == ref.params_sha256
    section = doc["gist"]
    assert section["subnets"] == 5 and section["subnet_hidden"] == [2, 2, 2, 1, 1]
    for rec in section["per_round"]:
        assert rec["sent_bytes"] == rec["predicted_sent_bytes"]
        assert rec["returned_bytes"] == rec["predicted_returned_bytes"]
    measured, predicted = doc["comm"]["measured_bytes"], doc["comm"]["predicted_bytes"]
    assert {c: v for c, v in measured.items() if v and c != "control"} == {
        c: v for c, v in predicted.items() if v and c != "control"
    }
