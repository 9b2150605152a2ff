"""The serial GIN equals PyG's ``GINConv`` (an MLP of two bias-free linear layers) with the
same weights: forward logits and every weight's gradient, on directed and undirected
graphs and for several ``eps``."""

import numpy as np
import pytest
import torch

from hpcgnn.config import TrainConfig
from hpcgnn.io import GraphFile
from hpcgnn.models.serial import SerialGCN
from hpcgnn.nn.gcn import cross_entropy_sum
from tests.graphs import write_random_graph

pyg_nn = pytest.importorskip("torch_geometric.nn")


def pyg_gin(weights, eps: float) -> list:
    """PyG's GIN layers holding hpcgnn's ``W_1, W_2`` (PyG's ``Linear`` keeps ``W^T``)."""
    convs = []
    for w_1, w_2 in zip(weights[::2], weights[1::2], strict=True):
        lin_1 = torch.nn.Linear(*w_1.shape, bias=False, dtype=w_1.dtype)
        lin_2 = torch.nn.Linear(*w_2.shape, bias=False, dtype=w_2.dtype)
        conv = pyg_nn.GINConv(torch.nn.Sequential(lin_1, torch.nn.ReLU(), lin_2), eps=eps)
        with torch.no_grad():  # after the constructor, which resets the MLP
            lin_1.weight.copy_(w_1.detach().t())
            lin_2.weight.copy_(w_2.detach().t())
        convs.append(conv)
    return convs


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.25, -1.0])
def test_serial_gin_equals_pyg_ginconv(tmp_path, directed, eps):
    path = write_random_graph(tmp_path / "g.h5", n=37, avg_degree=2.5, directed=directed,
                              seed=8, features=6, classes=3)
    cfg = TrainConfig(layers=3, hidden=5, dtype="float64", seed=1, model="gin", gin_eps=eps,
                      dropout=0.0)
    model = SerialGCN(path, cfg)
    assert [tuple(w.shape) for w in model.weights] == [(6, 5), (5, 5), (5, 5), (5, 5),
                                                       (5, 3), (3, 3)]
    with GraphFile(path) as gf:
        a = gf.read_csr(0, 37).tocoo()
        x = torch.from_numpy(gf.read_features(0, 37).astype(np.float64))
    edge_index = torch.from_numpy(np.stack([a.row, a.col]).astype(np.int64))  # j -> i: A_ji
    convs = pyg_gin(model.weights, eps)
    h = x
    for k, conv in enumerate(convs):
        h = conv(h, edge_index)
        h = h if k == len(convs) - 1 else torch.relu(h)
    logits = model.logits(None)
    assert torch.allclose(logits.detach(), h.detach(), atol=1e-12, rtol=1e-10)

    mask = model.masks["train"]
    cross_entropy_sum(logits, model.y, mask).backward()
    cross_entropy_sum(h, model.y, mask).backward()
    pyg_grads = [g for conv in convs for g in (conv.nn[0].weight.grad.t(),
                                               conv.nn[2].weight.grad.t())]
    for ours, theirs in zip(model.weights, pyg_grads, strict=True):
        assert torch.allclose(ours.grad, theirs, atol=1e-12, rtol=1e-10)


def test_gin_eps_is_gins_alone():
    from hpcgnn.errors import ConfigError

    with pytest.raises(ConfigError, match="--gin-eps is GIN's"):
        TrainConfig(gin_eps=0.5)
    with pytest.raises(ConfigError, match="--gin-eps must be finite"):
        TrainConfig(model="gin", gin_eps=float("nan"))
    assert TrainConfig(model="gin", gin_eps=0.5).kind.eps == 0.5
