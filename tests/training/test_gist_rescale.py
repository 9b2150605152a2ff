"""``--gist-rescale``: the merged model evaluated at the sub-models' logit scale.

With one split hidden dimension (``--layers 2``) the logits of the merged model whose
hidden-reading weight is scaled by ``1 / M`` are exactly the mean of the ``M`` sub-models'
logits, each sub-model evaluated (no dropout) on its final weights of the last round: the
rows and columns of the global weights that round's partition gave it. So the merged loss
is the loss of that mean (float rounding apart), never above the sub-models' mean loss;
without the flag the merged logits are the sum, ``M`` times the mean. Training, the saved
weights and ``params_sha256`` do not depend on the flag; at ``M = 1`` nothing does.
"""

import json

import h5py
import numpy as np
import pytest
import torch

from hpcgnn.cli.main import main
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.subnets import subnets
from hpcgnn.nn import GCN, Graph
from hpcgnn.training.checkpoint import SHARD_FILE
from tests.mpi import assert_all

ROUNDS, SEED, HIDDEN = 3, 2, 12
BASE = ["--hidden", str(HIDDEN), "--dropout", "0.5", "--seed", str(SEED), "--quiet",
        "--threads", "1", "--mode", "gist", "--local-iters", "2", "--rounds", str(ROUNDS),
        "--eval-every", "1"]
EVALUATED = ("loss", "train_acc", "val_acc", "val_loss", "test_acc")


def _train(world, path, metrics, *flags):
    rc = main(["train", str(path), *BASE, "--metrics", str(metrics), *flags])
    assert_all(world, rc == 0, f"train {flags} failed")
    world.mpi.Barrier()
    return json.loads(metrics.read_text())


def _subnets(size):
    return max(m for m in (1, 2, 3, 4) if size % m == 0)


@pytest.mark.mpi
def test_rescaling_one_sub_gcn_changes_nothing(graph_file, shared_tmp, world):
    path = graph_file(n=40, seed=8)
    net = ["--subnets", "1", "--layers", "3"]
    plain = _train(world, path, shared_tmp / "plain.json", *net)
    scaled = _train(world, path, shared_tmp / "scaled.json", *net, "--gist-rescale")
    assert scaled["params_sha256"] == plain["params_sha256"]
    assert scaled["final"] == plain["final"]
    for a, b in zip(scaled["epochs"], plain["epochs"], strict=True):
        assert [a[k] for k in EVALUATED] == [b[k] for k in EVALUATED]
    rounds = [[(r["subnet_loss"], r["merged_loss"]) for r in d["gist"]["per_round"]]
              for d in (scaled, plain)]
    assert rounds[0] == rounds[1]
    assert scaled["gist"]["merged_scales"] == [1.0, 1.0, 1.0]
    assert scaled["config"]["gist_rescale"] is True and plain["config"]["gist_rescale"] is False


def _global_weights(ckpt, ranks):
    """``W^1, W^2`` of the global model from every rank's rows in the checkpoint."""
    files = [np.load(ckpt / SHARD_FILE.format(epoch=ROUNDS, rank=r, ranks=ranks))
             for r in range(ranks)]
    return [np.concatenate([f[f"w{i}"] for f in files]) for i in range(2)]


def _sub_model_logits(path, weights, m):
    """Every sub-model of the last round on its final weights (serial, no dropout)."""
    g = Graph.read(path, dtype="float64")
    widths = layer_sizes(g.num_features, HIDDEN, g.num_classes, 2)
    out = []
    for net in subnets(SEED, ROUNDS - 1, widths, m):
        hidden = net.ids[1]
        sub = GCN(g.num_features, len(hidden), g.num_classes, dtype="float64").eval()
        with torch.no_grad():
            sub.weights[0].copy_(torch.from_numpy(weights[0][:, hidden]))
            sub.weights[1].copy_(torch.from_numpy(weights[1][hidden, :]))
            out.append(sub(g))
    return g, out


def _loss(g, logits):
    mask = g.train_mask
    return float(torch.nn.functional.cross_entropy(logits[mask], g.y[mask]))


@pytest.mark.mpi
def test_the_rescaled_merged_model_is_the_mean_of_the_sub_models(graph_file, shared_tmp, world):
    m = _subnets(world.size)
    if m == 1:
        pytest.skip("needs M > 1 sub-GCNs (an even rank count, or 3)")
    path = graph_file(n=60, seed=9)
    net = ["--subnets", str(m), "--layers", "2", "--dtype", "float64", "--lr", "0.05"]
    ckpt = shared_tmp / "ckpt"
    scaled = _train(world, path, shared_tmp / "scaled.json", *net, "--gist-rescale",
                    "--checkpoint-dir", str(ckpt))
    plain = _train(world, path, shared_tmp / "plain.json", *net)
    assert scaled["params_sha256"] == plain["params_sha256"]  # training is the same
    assert scaled["gist"]["merged_scales"] == [1.0, 1.0 / m]

    g, logits = _sub_model_logits(path, _global_weights(ckpt, world.size), m)
    mean = torch.stack(logits).mean(0)
    merged = scaled["final"]["loss"]
    assert merged == pytest.approx(_loss(g, mean), rel=1e-10)
    assert scaled["gist"]["per_round"][-1]["merged_loss"] == merged
    assert merged <= np.mean([_loss(g, z) for z in logits]) + 1e-12  # convexity
    # without the rescale the merged logits are the sum: M times the sub-models' scale
    assert plain["final"]["loss"] == pytest.approx(_loss(g, m * mean), rel=1e-10)

    out = shared_tmp / "pred.h5"  # the predictions are the evaluated model's
    rc = main(["predict", str(path), "--checkpoint", str(ckpt), "--out", str(out), "--quiet",
               "--mode", "gist", "--subnets", str(m), "--local-iters", "2", "--gist-rescale"])
    assert_all(world, rc == 0, f"predict exited {rc}")
    with h5py.File(out) as f:
        np.testing.assert_allclose(f["logits"][()], mean.numpy(), rtol=1e-5, atol=1e-6)
