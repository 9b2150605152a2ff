import numpy as np
import torch

from hpcgnn.nn.gcn import LayerOps, block_dropout, dropout, gcn_forward, gcn_layer
from hpcgnn.rng import dropout_keep


class Dense:
    """``Â^T H`` with a dense matrix: the simplest aggregation."""

    def __init__(self, a):
        self.a = a

    def forward(self, h):
        return self.a.T @ h

    def backward(self, g):
        return self.a @ g


def test_layer_is_relu_of_the_product_in_either_order():
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.random((6, 6)))
    h = torch.from_numpy(rng.random((6, 8)))
    for f_out in (2, 12):  # narrow output: A^T (H W); wide: (A^T H) W
        w = torch.from_numpy(rng.standard_normal((8, f_out)))
        got = gcn_layer(h, w, 1, False, LayerOps(Dense(a)))
        assert torch.allclose(got, torch.relu(a.T @ h @ w))
        assert torch.allclose(gcn_layer(h, w, 1, True, LayerOps(Dense(a))), a.T @ h @ w)


def test_forward_applies_the_counter_based_masks():
    rng = np.random.default_rng(1)
    a = torch.from_numpy(rng.random((5, 5)))
    x = torch.from_numpy(rng.random((5, 4)))
    weights = [torch.from_numpy(rng.standard_normal(s)) for s in ((4, 3), (3, 2))]
    keep = block_dropout(9, 0.5, 2, (0, 5), [4, 3, 2])
    out = gcn_forward(x, weights, [LayerOps(Dense(a))] * 2, 0.5, keep)
    h = dropout(x, dropout_keep(9, 2, 0, (0, 5), (0, 4), 4, 0.5), 0.5)
    h = torch.relu(a.T @ h @ weights[0])
    h = dropout(h, dropout_keep(9, 2, 1, (0, 5), (0, 3), 3, 0.5), 0.5)
    assert torch.allclose(out, a.T @ (h @ weights[1]))
