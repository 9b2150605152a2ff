"""The example layers of ``examples/layers/``: a researcher's own layer on every mode it runs.

Each trains with ``--model MODULE:CLASS`` as a user runs it (the module found on the Python
path), at 1-4 ranks and on every layout that runs any layer (1D, 1.5D, halo, 2D and 3D
grids of several shapes): its loss after 3 epochs in float64 equals the 1-rank run's
within 1e-10, and the measured bytes equal the predicted ones in every category (the
prediction comes from a trace of the layer's forward).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from hpcgnn.cli.main import main
from hpcgnn.errors import ConfigError
from hpcgnn.kinds import Layer, Operator, Weight
from hpcgnn.training.modes import MinibatchMode
from tests.mpi import assert_all, error_output
from tests.runs import LAYOUTS, assert_equal_run, layout_flags, layout_id

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "layers"
LAYERS = ["appnp:APPNP", "gcnii:GCNII", "graphconv:GraphConv"]
COMMON = ["--layers", "2", "--hidden", "8", "--epochs", "3", "--dropout", "0", "--dtype",
          "float64", "--quiet", "--eval-every", "0"]


@pytest.fixture(autouse=True)
def examples_on_path(monkeypatch):
    """``PYTHONPATH=examples/layers``, as the docs run them."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    for name in ("appnp", "gcnii", "graphconv"):
        sys.modules.pop(name, None)


def _layer_class(spec):
    """The class ``MODULE:CLASS`` names (the Python API takes the class itself)."""
    import importlib

    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _run(graph, metrics, *flags):
    return main(["train", str(graph), *COMMON, "--metrics", str(metrics), *flags])


def _losses(path):
    return [e["loss"] for e in json.loads(Path(path).read_text())["epochs"]]


def test_each_example_trains_and_learns_on_one_process(tmp_path):
    from tests.graphs import write_random_graph

    graph = write_random_graph(tmp_path / "g.h5", n=80, features=6, seed=3,
                               weights=np.float32)  # GraphConv's; the others ignore them
    for model in LAYERS:
        metrics = tmp_path / f"{model.split(':')[0]}.json"
        assert main(["train", str(graph), "--model", model, "--epochs", "30", "--hidden", "8",
                     "--quiet", "--metrics", str(metrics)]) == 0
        doc = json.loads(metrics.read_text())
        losses = [e["loss"] for e in doc["epochs"]]
        assert doc["config"]["model"] == model and losses[-1] < losses[0]
        assert all(math.isfinite(v) for v in losses)


@pytest.mark.mpi
@pytest.mark.parametrize("model", LAYERS)
@pytest.mark.parametrize("algo", LAYOUTS, ids=layout_id)
def test_an_example_layer_equals_its_one_rank_run_with_every_byte_predicted(
    graph_file, shared_tmp, world, model, algo
):
    algo = layout_flags(algo, world.size)
    from mpi4py import MPI

    import hpcgnn.api

    graph = graph_file(n=90, seed=4, weights=np.float64)
    ref = hpcgnn.api.train(graph, comm=MPI.COMM_SELF, model=_layer_class(model), layers=2,
                           hidden=8, epochs=3, dropout=0, dtype="float64", quiet=True,
                           eval_every=0)
    metrics = shared_tmp / f"m-{model.split(':')[0]}-{'-'.join(algo[1::2])}.json"
    assert_all(world, _run(graph, metrics, "--model", model, *algo) == 0)
    doc = json.loads(metrics.read_text())
    assert_equal_run(doc, [e["loss"] for e in ref.metrics["epochs"]])
    measured = doc["comm"]["measured_bytes"]
    if world.size > 1:
        assert sum(v for c, v in measured.items() if c != "control") > 0


#: GIST's flags in :func:`test_an_example_layer_trains_gist_sub_networks_equal_at_every_rank_count`.
GIST = ["--mode", "gist", "--local-iters", "2", "--rounds", "3"]


#: Minibatch mode's flags (``--bulk 1``: one batch per optimizer step at any rank count,
#: so a run on P ranks, which samples and fetches over all of them, is the 1-rank run's).
MINIBATCH = ["--mode", "minibatch", "--sampler", "sage", "--batch-size", "12", "--bulk", "1"]
#: Why the sampled blocks refuse an example (GraphConv trains on ``--sampler sage``).
SAMPLED_REFUSALS = {
    "appnp:APPNP": "a sampled block's output rows are some of its input rows, and layer 0's"
                   " output has its input's rows",
    "gcnii:GCNII": "a sampled block's output rows are some of its input rows, and layer 0's"
                   " output has mixed rows",
}


def _equal_to_one_rank(world, graph, doc, model, mode):
    """The run's 3 losses are the 1-rank run's (1e-10), its bytes all predicted."""
    from mpi4py import MPI

    import hpcgnn.api

    ref = hpcgnn.api.train(graph, comm=MPI.COMM_SELF, model=model, layers=2, hidden=8,
                           epochs=3, dropout=0, dtype="float64", quiet=True, eval_every=0,
                           mode=mode)
    # minibatch mode predicts its control messages too (the samples' counts)
    assert_equal_run(doc, [e["loss"] for e in ref.metrics["epochs"]], control=True)
    measured = doc["comm"]["measured_bytes"]
    if world.size > 1:
        assert sum(v for c, v in measured.items() if c != "control") > 0


@pytest.mark.mpi
@pytest.mark.parametrize("model", LAYERS)
def test_an_example_layer_trains_gist_sub_networks_equal_at_every_rank_count(
    graph_file, shared_tmp, world, model
):
    """``--mode gist --subnets 2``: sub-weights cut by the layer's declared shapes.

    ``M = 2`` sub-networks at every rank count (one rank hosting both on one; groups of 2
    and 1 ranks on 3); the reference is the 1-rank run. Every category's bytes, the
    sub-model traffic and the model-parallel evaluation's are predicted.
    """
    from mpi4py import MPI

    import hpcgnn.api
    from hpcgnn.training.modes import FullBatchMode, GistMode

    graph = graph_file(n=90, seed=4, weights=np.float64)
    ref = hpcgnn.api.train(
        graph, comm=MPI.COMM_SELF, model=_layer_class(model), layers=2, hidden=8, epochs=3,
        dropout=0, dtype="float64", quiet=True, eval_every=0,
        mode=GistMode(subnets=2, local_iters=2, rounds=3, group=FullBatchMode()),
    )
    want = [e["loss"] for e in ref.metrics["epochs"]]
    metrics = shared_tmp / f"gist-{model.split(':')[0]}.json"
    assert_all(world, _run(graph, metrics, "--model", model, *GIST, "--subnets", "2") == 0)
    doc = json.loads(metrics.read_text())
    assert_equal_run(doc, want)
    measured = doc["comm"]["measured_bytes"]
    section = doc["gist"]
    for rec in section["per_round"]:
        assert rec["sent_bytes"] == rec["predicted_sent_bytes"]
        assert rec["returned_bytes"] == rec["predicted_returned_bytes"]
    ev = section["eval_bytes_per_evaluation"]
    assert ev["evaluations"] >= 1 and ev["measured"] == ev["predicted"]
    if world.size > 1:
        assert ev["measured"] > 0 and measured["gist_scatter"] > 0


@pytest.mark.mpi
@pytest.mark.parametrize("model", LAYERS)
def test_an_example_layer_on_sampled_blocks_trains_or_refuses_in_one_line(
    graph_file, shared_tmp, world, capsys, model
):
    graph = graph_file(n=90, seed=4, weights=np.float64)
    metrics = shared_tmp / f"mb-{model.split(':')[0]}.json"
    rc = _run(graph, metrics, "--model", model, *MINIBATCH)
    if model in SAMPLED_REFUSALS:
        err = error_output(world, capsys.readouterr().err).strip().splitlines()
        assert_all(world, rc == 1 and len(err) == 1, f"rc {rc}, {err}")
        assert f"--model {model} does not exist with --sampler sage: " in err[0], err
        assert SAMPLED_REFUSALS[model] in err[0], err
        return
    assert_all(world, rc == 0)
    _equal_to_one_rank(world, graph, json.loads(metrics.read_text()), _layer_class(model),
                       MinibatchMode(sampler="sage", batch_size=12, bulk=1))


@pytest.mark.mpi
def test_graphconv_on_a_partitioned_graph_is_one_line(graph_file, shared_tmp, world, capsys):
    graph = graph_file(n=90, seed=4, weights=np.float64)
    rc = _run(graph, shared_tmp / "mb-partitioned.json", "--model", "graphconv:GraphConv",
              *MINIBATCH, "--graph-layout", "partitioned")
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc == 1 and len(err) == 1, f"rc {rc}, {err}")
    assert ("--model graphconv:GraphConv does not exist with --graph-layout partitioned: the"
            " weighted operator reads the file's edge weights whole on every rank") in err[0]


class MeanDifference(Layer):
    """A layer of one's own on the mean: ``tanh(b + (D^-1 A^T H) W_1 - H W_0)``."""

    operator = Operator("mean")

    def weights(self, f_in, f_out, layer, last):
        return [Weight((f_in, f_out)), Weight((f_in, f_out), stream=1)]

    def forward(self, g, h, w):
        z = g.bias(g.dense(g.aggregate(h), w[1]) - g.dense(g.own(h), w[0]))
        return z if g.last else z.tanh()


class DoubledSum(Layer):
    """Another on the sum ``A^T + 2 I``, a self term and no bias: ``S H W + H W_self``."""

    operator = Operator("sum", 2.0)

    def weights(self, f_in, f_out, layer, last):
        return [Weight((f_in, f_out)), Weight((f_in, f_out), stream=1)]

    def forward(self, g, h, w):
        z = g.propagate(h, w[0], self_weight=w[1])
        return z if g.last else z.relu()


@pytest.mark.mpi
@pytest.mark.parametrize(("layer", "sampled"), [
    (MeanDifference, {"sampler": "sage"}),
    (DoubledSum, {"sampler": "sage"}),
    (DoubledSum, {"sampler": "ladies", "layer_size": "16,16", "graph_layout": "partitioned"}),
], ids=["mean-sage", "sum-sage", "sum-ladies-partitioned"])
def test_a_layer_of_ones_own_trains_on_sampled_blocks_as_on_one_rank(
    graph_file, shared_tmp, world, layer, sampled
):
    from mpi4py import MPI

    import hpcgnn.api

    graph = graph_file(n=90, seed=4)
    mode = MinibatchMode(batch_size=12, bulk=1, **sampled)
    metrics = shared_tmp / f"own-{layer.__name__}-{sampled['sampler']}.json"
    hpcgnn.api.train(graph, comm=MPI.COMM_WORLD, model=layer, layers=2, hidden=8, epochs=3,
                     dropout=0, dtype="float64", quiet=True, eval_every=0, mode=mode,
                     metrics=metrics)
    world.mpi.Barrier()
    _equal_to_one_rank(world, graph, json.loads(metrics.read_text()), layer, mode)


@pytest.mark.mpi
@pytest.mark.parametrize("model", LAYERS)
@pytest.mark.parametrize("flags", [["--dedup", "full"], ["--dedup", "none", "--device-memory",
                                                         "0", "--sparse-features", "on"]],
                         ids=["full", "none-recompute-sparse"])
def test_an_example_layer_on_offload_equals_its_one_rank_run_with_every_byte_predicted(
    graph_file, shared_tmp, world, model, flags
):
    """HongTu's offload runs any layer: its forward per chunk, each exchange a chunk sweep."""
    from mpi4py import MPI

    import hpcgnn.api

    graph = graph_file(n=90, seed=4, weights=np.float64)
    ref = hpcgnn.api.train(graph, comm=MPI.COMM_SELF, model=_layer_class(model), layers=2,
                           hidden=8, epochs=3, dropout=0, dtype="float64", quiet=True,
                           eval_every=0)
    metrics = shared_tmp / f"m-{model.split(':')[0]}-offload-{flags[1]}.json"
    rc = _run(graph, metrics, "--model", model, "--mode", "offload", "--chunks", "3", *flags)
    assert_all(world, rc == 0)
    doc = json.loads(metrics.read_text())
    assert_equal_run(doc, [e["loss"] for e in ref.metrics["epochs"]])
    measured = doc["comm"]["measured_bytes"]
    assert measured["offload_h2d"] > 0 and measured["offload_ckpt"] > 0


@pytest.mark.mpi
@pytest.mark.parametrize("model", LAYERS)
def test_an_example_layer_trains_gist_on_sampled_groups_or_refuses_in_one_line(
    graph_file, shared_tmp, world, capsys, model
):
    """``--mode gist --subnets 2 --sampler sage``: each group's minibatch pipeline.

    GraphConv trains (its operator is one the sampled blocks provide) and equals the 1-rank
    run, every byte predicted; the others are refused as minibatch mode refuses them.
    """
    from hpcgnn.training.modes import GistMode

    if world.size > 2 and world.size % 2:
        pytest.skip("sampled groups are equal groups: 2 must divide the ranks")
    graph = graph_file(n=90, seed=4, weights=np.float64)
    metrics = shared_tmp / f"gist-mb-{model.split(':')[0]}.json"
    rc = _run(graph, metrics, "--model", model, *GIST, "--subnets", "2", *MINIBATCH[2:])
    if model in SAMPLED_REFUSALS:
        err = error_output(world, capsys.readouterr().err).strip().splitlines()
        assert_all(world, rc == 1 and len(err) == 1, f"rc {rc}, {err}")
        assert f"--model {model} does not exist with --sampler sage: " in err[0], err
        return
    assert_all(world, rc == 0)
    mode = GistMode(subnets=2, local_iters=2, rounds=3,
                    group=MinibatchMode(sampler="sage", batch_size=12, bulk=1))
    _equal_to_one_rank(world, graph, json.loads(metrics.read_text()), _layer_class(model),
                       mode)


def test_a_module_that_is_not_there_or_not_a_layer_is_one_line(tmp_path, capsys):
    from tests.graphs import write_random_graph

    graph = write_random_graph(tmp_path / "g.h5", n=30, features=4, seed=1)
    (tmp_path / "notalayer.py").write_text("class Thing:\n    pass\n")
    sys.path.insert(0, str(tmp_path))
    try:
        for model, words in (("nosuchmodule:X", "cannot import nosuchmodule"),
                             ("appnp:Nope", "appnp has no Nope"),
                             ("notalayer:Thing", "Thing is not a layer"),
                             ("appnp", "--model must be one of gcn, sage, gin, gat or")):
            assert main(["train", str(graph), "--model", model, "--quiet"]) == 1
            err = capsys.readouterr().err.splitlines()
            assert len(err) == 1 and words in err[0], err
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("notalayer", None)


def test_a_file_never_imports_a_layer(tmp_path, capsys):
    """A --config file, or a checkpoint, naming a layer needs the same --model."""
    from tests.graphs import write_random_graph

    graph = write_random_graph(tmp_path / "g.h5", n=30, features=4, seed=1)
    config = tmp_path / "run.toml"
    config.write_text('model = "appnp:APPNP"\nepochs = 2\n')
    sys.modules.pop("appnp", None)
    assert main(["train", str(graph), "--config", str(config), "--quiet"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "names the layer 'appnp:APPNP': a file never imports" in err[0]
    assert "appnp" not in sys.modules
    assert main(["train", str(graph), "--config", str(config), "--model", "appnp:APPNP",
                 "--quiet"]) == 0
    capsys.readouterr()
    ckpt = tmp_path / "ckpt"
    assert main(["train", str(graph), "--model", "appnp:APPNP", "--epochs", "2", "--quiet",
                 "--checkpoint-dir", str(ckpt)]) == 0
    capsys.readouterr()
    assert main(["train", str(graph), "--epochs", "4", "--quiet", "--resume", str(ckpt)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "model: 'appnp:APPNP' -> 'gcn'" in err[0], err
    out = tmp_path / "p.h5"
    assert main(["predict", str(graph), "--checkpoint", str(ckpt), "--out", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "a file never imports code; give --model appnp:APPNP" in err[0]
    assert main(["predict", str(graph), "--checkpoint", str(ckpt), "--model", "appnp:APPNP",
                 "--out", str(out)]) == 0 and out.exists()
    assert main(["train", str(graph), "--model", "appnp:APPNP", "--epochs", "4", "--quiet",
                 "--resume", str(ckpt)]) == 0


def test_the_python_api_takes_a_layer_object_with_its_settings(tmp_path):
    from appnp import APPNP

    import hpcgnn.api
    from tests.graphs import write_random_graph

    graph = write_random_graph(tmp_path / "g.h5", n=40, features=5, seed=2)
    common = {"epochs": 3, "hidden": 8, "dropout": 0.0, "dtype": "float64", "quiet": True}
    metrics = tmp_path / "by-name.json"
    assert main(["train", str(graph), "--model", "appnp:APPNP", "--epochs", "3", "--hidden",
                 "8", "--dropout", "0", "--dtype", "float64", "--quiet", "--metrics",
                 str(metrics)]) == 0
    by_name = json.loads(metrics.read_text())["params_sha256"]
    by_class = hpcgnn.api.train(graph, model=APPNP, **common)
    five = hpcgnn.api.train(graph, model=APPNP(steps=5), **common)
    assert by_name == by_class.params_sha256 != five.params_sha256
    assert by_class.metrics["config"]["model"] == "appnp:APPNP"
    # a call imports no code by name: the class itself is given
    with pytest.raises(ConfigError, match=r"from appnp import APPNP; model=APPNP"):
        hpcgnn.api.train(graph, model="appnp:APPNP", **common)
    assert five.metrics["config"]["layer_settings"] == {"alpha": 0.1, "steps": 5}
    logits = five.predict()
    assert tuple(logits.shape) == (40, five.metrics["graph"]["num_classes"])


@pytest.mark.parametrize("directed", [False, True])
def test_graphconv_sums_the_stored_edge_weights(tmp_path, directed):
    """``H W_root + A_w^T H W`` with the file's weights, against the formula in NumPy."""
    import torch
    from graphconv import GraphConv

    from hpcgnn.io import GraphFile
    from hpcgnn.nn import GCN, Graph
    from tests.graphs import write_random_graph

    path = write_random_graph(tmp_path / "g.h5", n=40, features=5, seed=6, directed=directed,
                              weights=np.float64)
    graph = Graph.read(path, model=GraphConv(), dtype="float64")
    net = GCN(5, 8, graph.num_classes, layers=2, model=GraphConv(), dtype="float64").eval()
    with GraphFile(path) as gf:
        a = gf.read_csr(0, 40, weights=True).toarray()  # A_w: row i, the edges i -> j
        x = gf.read_features(0, 40).astype(np.float64)
    assert np.unique(a[a > 0]).size > 10  # weights, not ones
    w = [p.detach().numpy() for p in net.weights]  # W_root, W per layer
    h = np.maximum(x @ w[0] + a.T @ x @ w[1], 0.0)
    want = h @ w[2] + a.T @ h @ w[3]
    with torch.no_grad():
        got = net(graph).numpy()
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12)
