"""Cluster-GCN's batches: METIS clusters of the training graph and their induced subgraphs."""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hpcgnn.backend import cpu, emulation
from hpcgnn.errors import ConfigError
from hpcgnn.kinds import SAGE, Layer, Operator
from hpcgnn.models.minibatch import MinibatchModel, sampled_weights
from hpcgnn.sampling.clusters import Clusters, cluster_parts, induced_batches, training_graph
from hpcgnn.sampling.rows import EdgeWeights, eval_block
from hpcgnn.sampling.samplers import CLUSTER, NODE_WISE
from hpcgnn.sampling.spec import fit_training_set, make_spec
from tests.sampling import random_adjacency, same_batches, store_of


def _graph(directed: bool = False):
    a = random_adjacency(120, 4.0, seed=3, directed=directed)
    train = np.flatnonzero(np.random.default_rng(1).random(120) < 0.6).astype(np.int64)
    return a, store_of(a, "ladies"), train


def induced_reference(a: sp.csr_matrix, vertices: np.ndarray) -> np.ndarray:
    """``(D_b + I)^-1 (A_b^T + I)`` of the subgraph ``vertices`` induce, dense (SciPy)."""
    s = (a.T + sp.eye(a.shape[0])).tocsr()[vertices][:, vertices].toarray()
    s = (s != 0).astype(np.float64)
    return s / s.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("directed", [False, True])
def test_a_batch_reads_the_renormalised_subgraph_its_vertices_induce(directed):
    a, store, train = _graph(directed)
    sets = [np.sort(train[i::3][:25]) for i in range(3)]
    batches = induced_batches([4, 5, 6], sets, store, layers=3)
    for batch, vertices in zip(batches, sets, strict=True):
        assert np.array_equal(batch.seeds, vertices) and len(batch.hops) == 3
        hop = batch.hops[0]
        assert np.array_equal(hop.rows, vertices) and np.array_equal(hop.cols, vertices)
        np.testing.assert_array_equal(hop.matrix().toarray(), induced_reference(a, vertices))
    assert [b.batch for b in batches] == [4, 5, 6]


def in_batch_mean(a: sp.csr_matrix, vertices: np.ndarray) -> np.ndarray:
    """``D_b^-1 A_b^T``: row ``v`` the mean over ``v``'s in-neighbours in ``vertices`` (dense).

    The in-degree counted inside the subgraph; a row without one is 0 (PyG's ``SAGEConv``
    on a ``ClusterLoader`` batch).
    """
    at = a.T.toarray()[np.ix_(vertices, vertices)]
    deg = at.sum(axis=1, keepdims=True)
    return np.divide(at, deg, out=np.zeros_like(at), where=deg > 0)


@pytest.mark.parametrize("on_device", [False, True], ids=["host", "device"])
@pytest.mark.parametrize("directed", [False, True])
def test_graphsage_on_a_batch_is_the_mean_over_its_in_neighbours_inside_it(directed, on_device):
    """``H W_self + D_b^-1 A_b^T H W_neigh + b`` (ReLU but on the last layer), in NumPy."""
    a, store, train = _graph(directed)
    vertices = np.sort(train[::2][:20])
    mean = in_batch_mean(a, vertices)
    assert (mean.sum(axis=1) == 0).any()  # a vertex with no in-neighbour in the batch
    widths = [5, 4, 3]
    weights = sampled_weights(SAGE, widths, seed=3, dtype=np.float64, device=cpu())
    with torch.no_grad():
        for w in weights[2::3]:  # the biases, zero at first
            w.uniform_(-1.0, 1.0, generator=torch.Generator().manual_seed(1))
    x = np.random.default_rng(7).standard_normal((len(vertices), widths[0]))
    h = x
    for layer in range(2):
        w_self, w_neigh, b = (w.detach().numpy() for w in weights[3 * layer : 3 * layer + 3])
        h = h @ w_self + mean @ h @ w_neigh + b
        h = np.maximum(h, 0.0) if layer == 0 else h
    with emulation.emulated() if on_device else nullcontext():
        dev = torch.device("cuda" if on_device else "cpu")
        on = store.on(dev if on_device else None)
        (batch,) = induced_batches([0], [vertices], on, layers=2)
        model = MinibatchModel(SAGE, widths, [w.to(dev) for w in weights], CLUSTER)
        got = model.forward_batch(batch, torch.from_numpy(x).to(dev), 0.0, None).cpu()
    np.testing.assert_allclose(got.detach().numpy(), h, rtol=1e-12, atol=1e-12)


class _Weighted(Layer):
    """A layer on the weighted operator (only its block is asked for)."""

    operator = Operator("weighted")


def test_a_batch_carries_the_file_s_weights_of_its_in_edges_and_evaluates_the_mean():
    """The weighted block is ``A_{w,b}^T`` (no ``+ I``); the mean's evaluation is ``D^-1 A^T``."""
    a, store, train = _graph(directed=True)
    n = a.shape[0]
    at_w = a.T.tocsr()
    at_w.data = np.random.default_rng(2).uniform(0.1, 2.0, at_w.nnz)
    rows = np.repeat(np.arange(n), np.diff(at_w.indptr))
    weights = EdgeWeights(rows * n + at_w.indices, at_w.data, n)
    vertices = np.sort(train[1::2][:30])
    (batch,) = induced_batches([0], [vertices], store, layers=1)
    model = MinibatchModel(_Weighted(), [4, 2], [], CLUSTER, edge_weights=weights)
    h = torch.from_numpy(np.random.default_rng(3).standard_normal((len(vertices), 4)))
    got = model.block(batch.hops[0], h).aggregate(h).numpy()
    want = at_w.toarray()[np.ix_(vertices, vertices)] @ h.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # evaluation: cluster's S = A^T + I without its + I is node-wise sage's S = A^T
    full = eval_block(store, 0, n, CLUSTER, SAGE, np.float64)
    node_wise = eval_block(store_of(a, "sage"), 0, n, NODE_WISE, SAGE, np.float64)
    assert (full != node_wise).nnz == 0 and full.nnz == a.nnz


def test_chunks_and_the_device_give_the_same_batches():
    _, store, train = _graph()
    sets = [np.sort(train[i::4][:20]) for i in range(4)]
    want = induced_batches(list(range(4)), sets, store, layers=2)
    assert same_batches(induced_batches(list(range(4)), sets, store, 2, [(0, 1), (1, 4)]), want)
    with emulation.emulated():
        on = store.on(torch.device("cuda"))
        got = induced_batches(list(range(4)), sets, on, layers=2)
        assert got[0].hops[0].on_device
        assert same_batches([b.on_host() for b in got], want)


def test_metis_clusters_the_training_graph_and_every_epoch_uses_each_vertex_once():
    a, store, train = _graph()
    ptr, idx = training_graph(store, train)
    sub = (a.T + sp.eye(120)).tocsr()[train][:, train]
    sub.sort_indices()
    assert np.array_equal(ptr, sub.indptr) and np.array_equal(idx, sub.indices)
    parts = cluster_parts(store, train, 7, seed=5)
    assert parts.shape == train.shape and set(parts.tolist()) == set(range(7))
    assert np.array_equal(parts, cluster_parts(store, train, 7, seed=5))  # reproducible
    clusters = Clusters.of_parts(train, parts, 7)
    assert clusters.count == 7
    for epoch in (0, 1):
        batches = clusters.batches(3, seed=2, epoch=epoch)
        assert len(batches) == 3  # clusters 3 + 3 + 1
        assert all(np.all(np.diff(b) > 0) for b in batches)
        assert np.array_equal(np.sort(np.concatenate(batches)), train)
        again = clusters.batches(3, seed=2, epoch=epoch)
        assert all(np.array_equal(x, y) for x, y in zip(batches, again, strict=True))
    first, second = clusters.batches(1, 2, 0), clusters.batches(1, 2, 1)
    assert any(not np.array_equal(x, y) for x, y in zip(first, second, strict=True))


def test_clusters_metis_leaves_empty_are_dropped():
    train = np.array([3, 5, 8, 9], dtype=np.int64)
    clusters = Clusters.of_parts(train, np.array([2, 0, 2, 0]), 4)
    assert clusters.count == 2
    assert sorted(map(tuple, clusters.batches(1, 0, 0))) == [(3, 8), (5, 9)]


def _spec(**kw):
    args = {"fanout": None, "layer_size": None, "layers": None, "batch_size": None,
            "bulk": None, "seed": 0}
    return make_spec("cluster", **{**args, **kw})


def test_cluster_flags_defaults_and_refusals():
    spec = _spec(layers=3, clusters=12, clusters_per_batch=4)
    assert spec.layers == 3 and spec.clusters == 12 and spec.clusters_per_batch == 4
    assert spec.as_dict()["clusters"] == 12 and spec.num_batches(500) == 3
    default = fit_training_set(_spec(), 1234)
    assert default.clusters == 12 and default.clusters_per_batch == 10
    assert fit_training_set(_spec(clusters=3), 50).clusters_per_batch == 3  # capped
    for bad in ({"fanout": "3,2"}, {"batch_size": 8}, {"global_batch": 8}, {"clusters": 0},
                {"clusters_per_batch": 0}):
        with pytest.raises(ConfigError):
            _spec(**bad)
    with pytest.raises(ConfigError, match="more than the 5 training vertices"):
        fit_training_set(_spec(clusters=6), 5)
    with pytest.raises(ConfigError, match="applies to --sampler cluster"):
        make_spec("sage", fanout=None, layer_size=None, layers=None, batch_size=None,
                  bulk=None, seed=0, clusters=4)
    assert "clusters" not in make_spec("sage", fanout=None, layer_size=None, layers=None,
                                       batch_size=None, bulk=None, seed=0).as_dict()
