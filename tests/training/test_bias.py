"""``--bias``: a bias per layer on every full-batch layout, offload and one process.

With ``--bias --dtype float64 --dropout 0`` every layout at 1-4 ranks gives the one-rank
run's losses within 1e-10 and the measured bytes equal the predicted ones in every
category (the biases' gradients in the all-reduce); the biases train; the parameters are
ordered as minibatch mode's (each layer's bias after its last weight), so a checkpoint
with biases resumes under another layout; GIST's sub-models train them too.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from hpcgnn.cli.main import main
from hpcgnn.kinds import KINDS
from hpcgnn.layout.order import layer_sizes, param_shapes
from tests.mpi import assert_all
from tests.runs import LAYOUTS, assert_equal_run, layout_flags, layout_id

COMMON = ["--layers", "2", "--hidden", "8", "--epochs", "3", "--dropout", "0", "--dtype",
          "float64", "--quiet", "--eval-every", "0", "--bias", "--threads", "1"]
#: Every layout, and HongTu's offload.
ALGOS = [*LAYOUTS, ["--mode", "offload", "--chunks", "3"]]
#: GCN (``g.bias`` after the product), GraphSAGE (after both terms), GAT (inside the
#: attention, before the ELU; after the heads' mean on the last layer).
MODELS = [["--model", "gcn"], ["--model", "sage"], ["--model", "gat", "--heads", "2"]]


def _reference(graph, model):
    """The one-rank run (1D on one process) of ``model``'s flags, with biases."""
    from mpi4py import MPI

    import hpcgnn.api

    heads = int(model[3]) if len(model) > 2 else 1
    return hpcgnn.api.train(graph, comm=MPI.COMM_SELF, model=model[1], heads=heads, layers=2,
                            hidden=8, epochs=3, dropout=0, dtype="float64", quiet=True,
                            eval_every=0, bias=True, threads=1)


@pytest.mark.mpi
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m[1])
@pytest.mark.parametrize("algo", ALGOS, ids=layout_id)
def test_biases_equal_the_one_rank_run_with_every_byte_predicted(
    graph_file, shared_tmp, world, model, algo
):
    algo = layout_flags(algo, world.size)
    graph = graph_file(n=90, seed=4)
    ref = _reference(graph, model)
    metrics = shared_tmp / f"m-{model[1]}-{'-'.join(algo[1::2])}.json"
    assert_all(world, main(["train", str(graph), *COMMON, *model, *algo,
                            "--metrics", str(metrics)]) == 0)
    doc = json.loads(metrics.read_text())
    assert doc["config"]["bias"] is True
    assert_equal_run(doc, [e["loss"] for e in ref.metrics["epochs"]])


def test_the_biases_train_and_follow_their_layers_weights(tmp_path):
    """One process: every bias is nonzero after training, at its layer's end, and the
    trained model is :class:`hpcgnn.nn.GCN`'s with biases; without ``bias`` none."""
    import hpcgnn
    from tests.graphs import write_random_graph

    graph = write_random_graph(tmp_path / "g.h5", n=90, features=6, seed=4)
    for name in ("gcn", "sage", "gin", "gat"):
        kind = KINDS[name]
        got = hpcgnn.train(graph, model=name, hidden=8, epochs=5, dropout=0, quiet=True,
                           bias=True)
        widths = layer_sizes(6, 8, got.metrics["graph"]["num_classes"], 2)
        assert [tuple(w.shape) for w in got.weights] == param_shapes(widths, kind, bias=True)
        biases = [got.weights[s.stop - 1] for s in kind.weight_slices(2, bias=True)]
        assert all(b.ndim == 1 and bool((b != 0).all()) for b in biases), name
        net = got.model()  # the one-process module holds the biases in the same order
        assert all(torch.equal(p, w) for p, w in zip(net.weights, got.weights, strict=True))
        plain = hpcgnn.train(graph, model=name, hidden=8, epochs=1, quiet=True)
        assert [tuple(w.shape) for w in plain.weights] == param_shapes(widths, kind)


def test_the_module_adds_its_bias_to_every_row(tmp_path):
    """``hpcgnn.nn.GCN(bias=True)``: ``Â^T H W + b`` per layer, as written by hand."""
    from hpcgnn.nn import GCN, Graph
    from tests.graphs import write_random_graph

    graph = Graph.read(str(write_random_graph(tmp_path / "g.h5", n=40, features=5, seed=2)),
                       dtype="float64", sparse_features="off")
    net = GCN(graph.num_features, 8, graph.num_classes, bias=True, dtype="float64").eval()
    assert [tuple(p.shape) for p in net.weights] == [(5, 8), (8,), (8, graph.num_classes),
                                                     (graph.num_classes,)]
    with torch.no_grad():
        for i in (1, 3):
            net.weights[i].copy_(torch.linspace(-1.0, 1.0, net.weights[i].shape[0]))
        w1, b1, w2, b2 = net.weights
        a_t = graph.aggregation.a_t.to_dense()
        hand = a_t @ torch.relu(a_t @ graph.x @ w1 + b1) @ w2 + b2
        assert torch.allclose(net(graph), hand)


def test_the_first_layers_bias_is_decayed_with_its_weights():
    """``--weight-decay-layers first``: the first layer's slice ends in its bias, as in
    minibatch mode (its optimizer's first group is the first layer's weights and bias)."""
    from hpcgnn.config import TrainConfig
    from hpcgnn.nn.init import init_weights
    from hpcgnn.nn.optim import make_optimizer

    for name in ("gcn", "sage", "gat"):
        kind = KINDS[name]
        weights = init_weights([6, 8, 3], 0, np.float64, kind, bias=True)
        first = kind.weight_slices(2, bias=True)[0].stop
        groups = make_optimizer(weights, TrainConfig(model=name), first).param_groups
        assert [tuple(p.shape) for p in groups[0]["params"]][-1] == (8,)
        assert groups[0]["weight_decay"] > 0 and groups[1]["weight_decay"] == 0
        plain = init_weights([6, 8, 3], 0, np.float64, kind)
        assert all(torch.equal(w, p) for w, p in zip(
            [w for w in weights if w.ndim == 2], [p for p in plain if p.ndim == 2], strict=True))


@pytest.mark.mpi
@pytest.mark.ranks(4)
def test_a_checkpoint_with_biases_resumes_under_another_layout(graph_file, shared_tmp, world):
    """Written at 4 ranks by 1.5D with biases, resumed by a 2D grid of the 4 and by 1D on
    one rank: the losses of the run that never stopped."""
    from mpi4py import MPI

    import hpcgnn
    from hpcgnn.api import FullBatchMode

    path = graph_file(n=90, seed=8)
    common = {"epochs": 4, "hidden": 8, "quiet": True, "eval_every": 0, "dropout": 0.0,
              "dtype": "float64", "bias": True}
    ckpt = shared_tmp / "ckpt"
    written = FullBatchMode(algo="1.5d", replication=2)
    ref = hpcgnn.train(path, mode=written, comm=world.mpi, **common)
    hpcgnn.train(path, mode=written, checkpoint_dir=ckpt, checkpoint_every=1, comm=world.mpi,
                 **{**common, "epochs": 2})
    want = [e["loss"] for e in ref.metrics["epochs"]]
    for mode, comm in ((FullBatchMode(algo="2d"), world.mpi), (FullBatchMode(), MPI.COMM_SELF)):
        got = [e["loss"] for e in hpcgnn.train(path, mode=mode, resume=ckpt, comm=comm,
                                               **common).metrics["epochs"]]
        ok = len(got) == 4 and all(abs(a - b) <= 1e-10 for a, b in zip(got, want, strict=True))
        assert_all(world, ok, f"{mode} at {comm.Get_size()}: {got} vs {want}")
    world.mpi.Barrier()  # every rank resumed before the next refuses
    from hpcgnn.errors import ConfigError

    with pytest.raises(ConfigError, match="bias"):  # the flag is part of the model
        hpcgnn.train(path, mode=FullBatchMode(), resume=ckpt, comm=MPI.COMM_SELF,
                     **{**common, "bias": False})


@pytest.mark.mpi
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m[1])
def test_gist_sub_models_train_their_biases(graph_file, shared_tmp, world, model):
    """``M = 1, K = 1`` is full-batch training with biases step for step (the same
    ``params_sha256``); ``M = 2`` equals its 1-rank run, the biases' all-reduce predicted."""
    graph = graph_file(n=90, seed=4)
    full = shared_tmp / f"gb-full-{model[1]}.json"
    one = shared_tmp / f"gb-one-{model[1]}.json"
    assert_all(world, main(["train", str(graph), *COMMON, *model, "--metrics", str(full)]) == 0)
    assert_all(world, main(["train", str(graph), *COMMON, *model, "--mode", "gist",
                            "--subnets", "1", "--metrics", str(one)]) == 0)
    docs = [json.loads(p.read_text()) for p in (full, one)]
    assert docs[0]["params_sha256"] == docs[1]["params_sha256"]
    from mpi4py import MPI

    import hpcgnn.api
    from hpcgnn.training.modes import GistMode

    heads = int(model[3]) if len(model) > 2 else 1
    ref = hpcgnn.api.train(graph, comm=MPI.COMM_SELF, model=model[1], heads=heads, layers=2,
                           hidden=8, epochs=3, dropout=0, dtype="float64", quiet=True,
                           eval_every=0, bias=True, threads=1,
                           mode=GistMode(subnets=2, local_iters=2, rounds=3))
    two = shared_tmp / f"gb-two-{model[1]}.json"
    assert_all(world, main(["train", str(graph), *COMMON, *model, "--mode", "gist",
                            "--subnets", "2", "--local-iters", "2", "--rounds", "3",
                            "--metrics", str(two)]) == 0)
    doc = json.loads(two.read_text())
    assert_equal_run(doc, [e["loss"] for e in ref.metrics["epochs"]])
    assert doc["comm"]["measured_bytes"].get("gist_bias", 0) > 0 or world.size == 1
