"""Early stopping on the validation loss, the best-validation epoch, and weight decay on the
first layer (Kipf & Welling's recipe)."""

import json
import math

import pytest
import torch

from hpcgnn.cli.main import main
from hpcgnn.config import TrainConfig
from hpcgnn.errors import ConfigError
from hpcgnn.nn.optim import make_optimizer
from hpcgnn.training.early_stopping import BestValidation
from hpcgnn.training.loop import EpochRecord
from tests.mpi import assert_all


def rec(epoch, val_loss, acc=0.5):
    return EpochRecord(epoch=epoch, loss=1.0, train_acc=acc, val_acc=acc, time_s=0.0,
                       val_loss=val_loss, test_acc=acc)


def test_patience_counts_evaluations_without_a_lower_loss():
    t = BestValidation(patience=2)
    for e, loss in enumerate([1.0, 0.8, 0.9, None, 0.8], start=1):  # None: not evaluated
        t.update(rec(e, loss))
    assert t.best.epoch == 2 and t.waited == 2 and t.stop  # an equal loss is no progress
    assert BestValidation.replay(2, [rec(1, 1.0), rec(2, 0.5)]).as_dict()["epoch"] == 2
    assert not BestValidation(patience=0, waited=10).stop  # 0: never stop


def test_a_nan_validation_loss_is_never_best():
    t = BestValidation(patience=3)
    for e in (1, 2):
        t.update(rec(e, math.nan))
    assert t.best is None and t.as_dict() is None and t.waited == 2


def test_weight_decay_on_the_first_layer_only():
    ws = [torch.zeros(2, 2, requires_grad=True) for _ in range(4)]
    first = make_optimizer(ws, TrainConfig(weight_decay_layers="first"), 2)
    assert [(len(g["params"]), g["weight_decay"]) for g in first.param_groups] == [
        (2, 5e-4), (2, 0.0)]
    every = make_optimizer(ws, TrainConfig(weight_decay_layers="all"), 2)
    assert [g["weight_decay"] for g in every.param_groups] == [5e-4]
    one_layer = make_optimizer(ws[:2], TrainConfig(weight_decay_layers="first"), 2)
    assert len(one_layer.param_groups) == 1
    with pytest.raises(ConfigError, match="--weight-decay-layers"):
        TrainConfig(weight_decay_layers="last")
    with pytest.raises(ConfigError, match="--eval-every"):
        TrainConfig(early_stopping=3, eval_every=0)


def _train(path, out, *flags):
    return main(["train", str(path), "--epochs", "120", "--hidden", "8", "--lr", "0.05",
                 "--quiet", "--early-stopping", "4", "--metrics", str(out), *flags])


@pytest.mark.mpi
@pytest.mark.parametrize("mode", [["--algo", "1d"], ["--algo", "2d"], ["--mode", "minibatch"],
                                  ["--mode", "gist", "--subnets", "1"]])
def test_a_run_stops_where_the_serial_run_stops(graph_file, shared_tmp, world, mode):
    path = graph_file("es.h5", n=60, seed=4)
    out = shared_tmp / "es.json"
    assert_all(world, _train(path, out, *mode) == 0)
    doc = json.loads(out.read_text())
    stopped = doc["early_stopping"]["stopped_after_epochs"]
    assert_all(world, stopped is not None and len(doc["epochs"]) == stopped < 120, stopped)
    best = doc["best"]  # epochs count from 1
    assert [e["epoch"] for e in doc["epochs"]] == list(range(1, stopped + 1))
    losses = [e["val_loss"] for e in doc["epochs"]]
    assert best["val_loss"] == min(losses) and losses.index(min(losses)) + 1 == best["epoch"]
    assert stopped == best["epoch"] + 4  # four evaluations without a lower loss
    assert best["test_acc"] == doc["epochs"][best["epoch"] - 1]["test_acc"]


@pytest.mark.mpi
def test_a_resumed_run_stops_at_the_same_epoch(graph_file, shared_tmp, world):
    path = graph_file("es-resume.h5", n=60, seed=4)
    straight, resumed = shared_tmp / "straight.json", shared_tmp / "resumed.json"
    ck = shared_tmp / "ck"
    assert_all(world, _train(path, straight) == 0)
    # interrupted after 6 epochs (a checkpoint every 3), then resumed with the same patience
    assert_all(world, main(["train", str(path), "--epochs", "6", "--hidden", "8", "--lr", "0.05",
                            "--quiet", "--checkpoint-dir", str(ck), "--checkpoint-every", "3",
                            "--early-stopping", "4"]) == 0)
    assert_all(world, _train(path, resumed, "--resume", str(ck)) == 0)
    a, b = (json.loads(p.read_text()) for p in (straight, resumed))
    assert a["early_stopping"] == b["early_stopping"] and a["best"] == b["best"]
    assert a["params_sha256"] == b["params_sha256"]
