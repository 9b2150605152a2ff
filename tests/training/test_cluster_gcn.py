"""``--sampler cluster``: Cluster-GCN's minibatches, exact against a serial Cluster-GCN.

The reference below is written from the paper alone (dense NumPy/torch, no hpcgnn model
code): per optimizer step the batches of the step (one per rank that has one), each the
subgraph its clusters induce, read through ``(D_b + I)^-1 (A_b^T + I)`` by GCN layers (or
through its mean ``D_b^-1 A_b^T`` by GraphSAGE layers, GIST's Reddit and Amazon2M
setting), the loss the mean cross-entropy over every vertex of the step's batches, then
Adam.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mpi4py import MPI

from hpcgnn.api import MinibatchMode
from hpcgnn.api import train as api_train
from hpcgnn.config import TrainConfig
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphFile
from hpcgnn.layout.shapes import choose_shape
from hpcgnn.sampling.bulk import my_share
from hpcgnn.sampling.spec import SamplerSpec
from hpcgnn.training.minibatch import MinibatchTrainer
from tests.mpi import assert_all
from tests.training.test_gist import _train as train_cli

EPOCHS = 2


def serial_cluster_gcn(path, trainer: MinibatchTrainer, weights, cfg: TrainConfig, ranks: int):
    """Cluster-GCN trained serially with the batches and steps of ``ranks`` ranks."""
    with GraphFile(path) as gf:
        n = gf.meta.num_nodes
        s = (gf.read_csr(0, n, transpose=True).toarray() + np.eye(n) != 0).astype(np.float64)
        x = torch.from_numpy(gf.read_features(0, n).astype(np.float64))
        y = torch.from_numpy(gf.read_labels(0, n).astype(np.int64))
    ws = [w.detach().clone().requires_grad_(True) for w in weights]
    opt = torch.optim.Adam(ws, lr=cfg.lr)
    spec = trainer.spec

    sage = cfg.model == "sage"

    def logits(vertices):
        a = s[vertices][:, vertices]
        if sage:  # the in-neighbours inside the batch, without the + I; an empty mean is 0
            a = a - np.eye(len(vertices))
        deg = a.sum(axis=1, keepdims=True)
        a = torch.from_numpy(np.divide(a, deg, out=np.zeros_like(a), where=deg > 0))
        h = x[vertices]
        for layer in range(spec.layers):
            if sage:
                w_self, w_neigh, b = ws[3 * layer : 3 * layer + 3]
                h = h @ w_self + a @ (h @ w_neigh) + b
            else:
                w, b = ws[2 * layer], ws[2 * layer + 1]
                h = a @ (h @ w) + b
            if layer < spec.layers - 1:
                h = torch.relu(h)
        return h

    for epoch in range(EPOCHS):
        batches = trainer.sampler.batches(epoch)
        for first in range(0, len(batches), spec.bulk):
            bulk = batches[first : first + spec.bulk]
            shares = [my_share(len(bulk), ranks, r) for r in range(ranks)]
            for t in range(max(len(r) for r in shares)):
                step = [bulk[r[t]] for r in shares if len(r) > t]
                opt.zero_grad()
                total = sum(torch.nn.functional.cross_entropy(
                    logits(v), y[v], reduction="sum") for v in step)
                (total / sum(len(v) for v in step)).backward()
                opt.step()
    return ws


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["gcn", "sage"])
@pytest.mark.parametrize("layout", ["replicated", "partitioned"])
def test_cluster_minibatches_equal_a_serial_cluster_gcn(graph_file, world, layout, model):
    path = graph_file(n=90, avg_degree=4.0, seed=11, features=5, classes=3)
    spec = SamplerSpec("cluster", (0, 0, 0), batch_size=0, bulk=3, seed=4, clusters=7,
                       clusters_per_batch=2)
    cfg = TrainConfig(hidden=6, dropout=0.0, dtype="float64", seed=2, model=model,
                      weight_decay=0.0, lr=0.02)
    with ProcessGrid(MPI.COMM_WORLD, choose_shape("1.5d", world.size)) as grid:
        trainer = MinibatchTrainer(str(path), spec, layout, cfg, grid)
        start = [w.detach().clone() for w in trainer.weights]
        for epoch in range(EPOCHS):
            trainer.step(epoch)
        got = [w.detach() for w in trainer.weights]
    want = serial_cluster_gcn(path, trainer, start, cfg, world.size)
    ok = all(torch.allclose(g, w, rtol=1e-9, atol=1e-11) for g, w in zip(got, want, strict=True))
    assert_all(world, ok, f"{layout}, {model}: not the serial Cluster-GCN's weights")
    assert_all(world, trainer.sampler.clusters.count == 7, "not 7 clusters")


BASE = ["--hidden", "8", "--dropout", "0.5", "--seed", "2", "--quiet", "--threads", "1"]
CLUSTER = ["--sampler", "cluster", "--clusters", "9", "--clusters-per-batch", "2"]
GAT = ["--model", "gat", "--heads", "2", "--output-heads", "2", "--attention-dropout", "0.3"]
#: The layers GIST trains on the clusters: GCN (the sampler's own), GraphSAGE (the paper's
#: Reddit and Amazon2M runs), GIN and GAT.
MODELS = pytest.mark.parametrize(
    "model", [[], ["--model", "sage"], ["--model", "gin"], GAT], ids=["gcn", "sage", "gin", "gat"]
)


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 4)
@pytest.mark.parametrize("layout", ["replicated", "partitioned"])
def test_graphsage_on_clusters_at_p_ranks_is_its_one_rank_run(graph_file, world, layout):
    """``--bulk 1``: each step trains the one batch of its bulk, whichever rank holds it.

    So ``P`` ranks train what one rank does (the others sample, fetch rows and features
    and all-reduce zero gradients): the same weights, the losses within ``1e-10`` (the
    full-graph evaluation sums over the ranks), every byte as the cost model says.
    """
    path = graph_file(n=80, seed=4)
    mode = MinibatchMode(sampler="cluster", clusters=9, clusters_per_batch=2, bulk=1,
                         graph_layout=layout)
    run = {"model": "sage", "layers": 2, "hidden": 8, "epochs": 3, "dropout": 0.0,
           "dtype": "float64", "seed": 2, "quiet": True, "threads": 1}
    ours = api_train(path, mode=mode, comm=world.mpi, **run).metrics
    one = api_train(path, mode=mode, comm=MPI.COMM_SELF, **run).metrics
    assert ours["sampling"]["optimizer_steps_per_epoch"] == 5  # 9 clusters, 2 per batch
    for key in ("loss", "train_acc", "val_acc"):
        np.testing.assert_allclose([e[key] for e in ours["epochs"]],
                                   [e[key] for e in one["epochs"]], rtol=1e-10, atol=0)
    assert ours["params_sha256"] == one["params_sha256"]
    measured, predicted = ours["comm"]["measured_bytes"], ours["comm"]["predicted_bytes"]
    if world.size > 1:
        assert {"feature_fetch", "allreduce"} <= set(predicted)
    for cat in set(measured) | set(predicted):
        assert measured.get(cat, 0) == pytest.approx(predicted.get(cat, 0), rel=1e-12), cat


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 4)
@MODELS
def test_gist_with_one_subnet_is_cluster_minibatch_training(
    graph_file, shared_tmp, world, model
):
    path = graph_file(n=80, seed=4)
    mb = train_cli(world, path, shared_tmp / "mb.json", "--mode", "minibatch", "--epochs", "3",
                   *CLUSTER, *model, base=BASE)
    assert mb["sampling"]["sampler"] == "cluster" and mb["sampling"]["clusters"] == 9
    steps = mb["sampling"]["optimizer_steps_per_epoch"]
    gist = train_cli(world, path, shared_tmp / "gist.json", "--mode", "gist", "--subnets",
                     "1", "--local-iters", str(steps), "--rounds", "3", *CLUSTER, *model,
                     base=BASE)
    assert gist["params_sha256"] == mb["params_sha256"]
    assert gist["final"] == pytest.approx(mb["final"], rel=1e-5)  # the sharded evaluation
    assert gist["gist"]["sampler"]["sampler"] == "cluster"


@pytest.mark.mpi
@pytest.mark.ranks(2, 4)
@MODELS
def test_gist_on_clusters_moves_what_the_cost_model_says(graph_file, shared_tmp, world, model):
    path = graph_file(n=80, seed=6)
    doc = train_cli(world, path, shared_tmp / "m2.json", "--mode", "gist", "--subnets", "2",
                    "--local-iters", "2", "--rounds", "3", "--graph-layout", "partitioned",
                    *CLUSTER, *model, base=BASE)
    measured, predicted = doc["comm"]["measured_bytes"], doc["comm"]["predicted_bytes"]
    for cat in set(measured) | set(predicted):
        assert measured.get(cat, 0) == pytest.approx(predicted.get(cat, 0), rel=1e-9), cat
