import numpy as np
import pytest
import torch

from hpcgnn.kinds import GCN, GIN, SAGE
from hpcgnn.nn.gcn import LayerOps, LayoutPrimitives, block_dropout, dropout, run_layers
from hpcgnn.rng import dropout_keep, dropout_key


def one_layer(kind, h, weights, a, last):
    """Layer 1 of ``kind`` on a dense aggregation, through the primitives."""
    return kind.forward(LayoutPrimitives(LayerOps(Dense(a)), 1, last), h, weights)


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
        got = one_layer(GCN, h, [w], a, False)
        assert torch.allclose(got, torch.relu(a.T @ h @ w))
        assert torch.allclose(one_layer(GCN, h, [w], a, True), a.T @ h @ w)


def test_forward_applies_the_counter_based_masks():
    rng = np.random.default_rng(1)
    a = torch.from_numpy(rng.random((5, 5)))
    x = torch.from_numpy(rng.random((5, 4)))
    weights = [torch.from_numpy(rng.standard_normal(s)) for s in ((4, 3), (3, 2))]
    keep = block_dropout(9, 0.5, 2, (0, 5), [4, 3, 2])
    out = run_layers(x, weights, [LayerOps(Dense(a))] * 2, 0.5, keep)
    h = dropout(x, dropout_keep(dropout_key(9, 2, 0), (0, 5), (0, 4), 0.5), 0.5)
    h = torch.relu(a.T @ h @ weights[0])
    h = dropout(h, dropout_keep(dropout_key(9, 2, 1), (0, 5), (0, 3), 0.5), 0.5)
    assert torch.allclose(out, a.T @ (h @ weights[1]))


def test_sage_layer_adds_the_self_term_to_the_mean_in_either_order():
    rng = np.random.default_rng(4)
    m = torch.from_numpy(rng.random((6, 6)))
    h = torch.from_numpy(rng.random((6, 8)))
    for f_out in (2, 12):
        w_self = torch.from_numpy(rng.standard_normal((8, f_out)))
        w_neigh = torch.from_numpy(rng.standard_normal((8, f_out)))
        got = one_layer(SAGE, h, [w_self, w_neigh], m, False)
        assert torch.allclose(got, torch.relu(h @ w_self + m.T @ h @ w_neigh))


def test_sage_forward_takes_two_weights_per_layer():
    import pytest

    rng = np.random.default_rng(5)
    m = torch.from_numpy(rng.random((5, 5)))
    x = torch.from_numpy(rng.random((5, 4)))
    ws = [torch.from_numpy(rng.standard_normal(s)) for s in ((4, 3), (4, 3), (3, 2), (3, 2))]
    out = run_layers(x, ws, [LayerOps(Dense(m))] * 2, 0.0, None, kind=SAGE)
    h = torch.relu(x @ ws[0] + m.T @ x @ ws[1])
    assert torch.allclose(out, h @ ws[2] + m.T @ h @ ws[3])
    with pytest.raises(ValueError):
        run_layers(x, ws[:2], [LayerOps(Dense(m))] * 2, 0.0, None, kind=SAGE)


@pytest.mark.parametrize("kind", [None, SAGE, GIN])
@pytest.mark.parametrize("f_in", [20, 3])  # wide: X W an SpMM; narrow: made dense
def test_sparse_input_trains_as_the_dense_input(kind, f_in):
    from hpcgnn.backend import cpu
    from hpcgnn.kernels.sparse_input import SparseFeatures

    kind = kind or GCN
    rng = np.random.default_rng(5)
    a = torch.from_numpy(rng.random((6, 6)))
    x = rng.standard_normal((6, f_in))
    x[rng.random(x.shape) < 0.7] = 0.0
    from hpcgnn.layout.order import weight_shapes

    base = [torch.from_numpy(rng.standard_normal(s)) for s in weight_shapes([f_in, 4, 2], kind)]
    outs, grads = [], []
    for h0 in (torch.from_numpy(x), SparseFeatures.from_matrix(x, cpu())):
        ws = [w.clone().requires_grad_(True) for w in base]
        keep = block_dropout(9, 0.5, 2, (10, 16), [f_in, 4, 2])  # rows 10..15 of a graph
        out = run_layers(h0, ws, [LayerOps(Dense(a))] * 2, 0.5, keep, kind=kind)
        out.square().sum().backward()
        outs.append(out.detach())
        grads.append([w.grad for w in ws])
    assert torch.allclose(outs[0], outs[1], atol=1e-12)
    for g_dense, g_sparse in zip(*grads, strict=True):
        assert torch.allclose(g_dense, g_sparse, atol=1e-12)


def test_gin_layer_is_an_mlp_on_the_aggregate_in_either_order():
    rng = np.random.default_rng(6)
    s = torch.from_numpy(rng.random((6, 6)))  # stands for A^T + (1 + eps) I
    h = torch.from_numpy(rng.random((6, 8)))
    for f_out in (2, 12):  # narrow: A^T (H W_1); wide: (A^T H) W_1
        w_1 = torch.from_numpy(rng.standard_normal((8, f_out)))
        w_2 = torch.from_numpy(rng.standard_normal((f_out, f_out)))
        want = torch.relu(s.T @ h @ w_1) @ w_2
        assert torch.allclose(one_layer(GIN, h, [w_1, w_2], s, True), want)
        got = one_layer(GIN, h, [w_1, w_2], s, False)
        assert torch.allclose(got, torch.relu(want))
