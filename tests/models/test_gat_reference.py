"""The serial GAT equals PyG's ``GATConv`` (self loops added, no bias) with the same
weights: forward logits and every weight's gradient, on directed and undirected graphs,
with several heads and with the heads of the last layer averaged."""

import numpy as np
import pytest
import torch

from hpcgnn.config import TrainConfig
from hpcgnn.errors import ConfigError
from hpcgnn.io import GraphFile
from hpcgnn.models.serial import SerialGCN
from hpcgnn.nn.gcn import cross_entropy_sum
from tests.graphs import write_random_graph

pyg_nn = pytest.importorskip("torch_geometric.nn")


def pyg_gat(weights, heads: int, output_heads: int) -> list:
    """PyG's GAT layers holding hpcgnn's ``W, a_src, a_dst`` (PyG's ``Linear`` keeps ``W^T``)."""
    convs = []
    layers = len(weights) // 3
    for layer in range(layers):
        w, a_src, a_dst = weights[3 * layer : 3 * layer + 3]
        last = layer == layers - 1
        k, width = a_src.shape
        conv = pyg_nn.GATConv(w.shape[0], width, heads=k, concat=not last, bias=False,
                              negative_slope=0.2).to(w.dtype)
        with torch.no_grad():
            conv.lin.weight.copy_(w.detach().t())
            conv.att_src.copy_(a_src.detach()[None])
            conv.att_dst.copy_(a_dst.detach()[None])
        convs.append(conv)
    assert heads == weights[1].shape[0] and output_heads == weights[-1].shape[0]
    return convs


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize(("heads", "output_heads"), [(1, 1), (3, 1), (2, 3)])
def test_serial_gat_equals_pyg_gatconv(tmp_path, directed, heads, output_heads):
    path = write_random_graph(tmp_path / "g.h5", n=37, avg_degree=2.5, directed=directed,
                              seed=8, features=6, classes=3)
    cfg = TrainConfig(layers=3, hidden=6, dtype="float64", seed=1, model="gat", heads=heads,
                      output_heads=output_heads, dropout=0.0)
    model = SerialGCN(path, cfg)
    f = 6 // heads
    assert [tuple(w.shape) for w in model.weights] == [
        (6, 6), (heads, f), (heads, f), (6, 6), (heads, f), (heads, f),
        (6, 3 * output_heads), (output_heads, 3), (output_heads, 3)]
    with GraphFile(path) as gf:
        a = gf.read_csr(0, 37).tocoo()
        x = torch.from_numpy(gf.read_features(0, 37).astype(np.float64))
    edge_index = torch.from_numpy(np.stack([a.row, a.col]).astype(np.int64))  # j -> i: A_ji
    convs = pyg_gat(model.weights, heads, output_heads)
    h = x
    for k, conv in enumerate(convs):
        h = conv(h, edge_index)
        h = h if k == len(convs) - 1 else torch.nn.functional.elu(h)
    logits = model.logits(None)
    assert torch.allclose(logits.detach(), h.detach(), atol=1e-12, rtol=1e-10)

    mask = model.masks["train"]
    cross_entropy_sum(logits, model.y, mask).backward()
    cross_entropy_sum(h, model.y, mask).backward()
    pyg_grads = [g for conv in convs for g in (conv.lin.weight.grad.t(), conv.att_src.grad[0],
                                               conv.att_dst.grad[0])]
    for ours, theirs in zip(model.weights, pyg_grads, strict=True):
        assert torch.allclose(ours.grad, theirs, atol=1e-12, rtol=1e-10)


def test_attention_dropout_drops_coefficients(tmp_path):
    """With attention dropout alone the training logits change, and are the same twice."""
    path = write_random_graph(tmp_path / "g.h5", n=30, avg_degree=3.0, seed=2, features=5,
                              classes=3)
    plain = SerialGCN(path, TrainConfig(model="gat", heads=2, hidden=4, dropout=0.0))
    dropped = SerialGCN(path, TrainConfig(model="gat", heads=2, hidden=4, dropout=0.0,
                                          attention_dropout=0.5))
    assert not torch.allclose(plain.logits(1), dropped.logits(1))
    assert torch.equal(dropped.logits(1), dropped.logits(1))
    assert torch.allclose(plain.logits(None), dropped.logits(None))


def test_gat_settings_are_gats_alone():
    with pytest.raises(ConfigError, match="are GAT's"):
        TrainConfig(heads=2)
    with pytest.raises(ConfigError, match="multiple of it"):
        TrainConfig(model="gat", heads=3, hidden=16)
    with pytest.raises(ConfigError, match="--output-heads must be in"):
        TrainConfig(model="gat", output_heads=0)
    with pytest.raises(ConfigError, match="--attention-dropout must be in"):
        TrainConfig(model="gat", attention_dropout=1.0)
    cfg = TrainConfig(model="gat", heads=4, output_heads=2, hidden=8)
    assert (cfg.kind.heads, cfg.kind.output_heads, cfg.attention_p) == (4, 2, 0.5)
