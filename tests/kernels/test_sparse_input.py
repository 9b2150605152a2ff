import numpy as np
import pytest
import torch

from hpcgnn.backend import cpu
from hpcgnn.kernels.dropout import keep_pairs
from hpcgnn.kernels.gemm import matmul
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.rng import dropout_keep, dropout_key


def sparse_block(rows=7, cols=11, density=0.3, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(dtype)
    x[rng.random(x.shape) >= density] = 0.0
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_product_and_weight_gradient_equal_the_dense_ones(dtype):
    x = sparse_block(dtype=dtype)
    feats = SparseFeatures.from_matrix(x, cpu())
    assert feats.shape == x.shape and feats.nnz == np.count_nonzero(x)
    assert torch.equal(feats.to_dense(), torch.from_numpy(x))
    assert torch.equal(feats.transposed().to_dense(), torch.from_numpy(x.T.copy()))
    w = torch.randn(11, 4, dtype=feats.dtype, requires_grad=True)
    g = torch.randn(7, 4, dtype=feats.dtype)
    out = matmul(feats, w)
    out.backward(g)
    dense_w = w.detach().clone().requires_grad_(True)
    (torch.from_numpy(x) @ dense_w).backward(g)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert torch.allclose(out, torch.from_numpy(x) @ w.detach(), atol=tol)
    assert torch.allclose(w.grad, dense_w.grad, atol=tol)


def test_empty_blocks():
    for shape in [(0, 5), (4, 0), (3, 4)]:
        feats = SparseFeatures.from_matrix(np.zeros(shape, np.float32), cpu())
        w = torch.ones(shape[1], 2, requires_grad=True)
        out = matmul(feats, w)
        out.sum().backward()
        assert out.shape == (shape[0], 2) and not out.any() and not w.grad.any()


def test_dropout_of_the_nonzeros_is_the_dense_dropout():
    x = sparse_block(rows=40, cols=30)
    feats = SparseFeatures.from_matrix(x, cpu())
    key, r0 = dropout_key(3, 4, 0), 100  # a block starting at global row 100
    keep = keep_pairs(key, feats.nz_rows + r0, feats.col, 0.5)
    dropped = feats.dropout(keep, 0.5).to_dense()
    mask = dropout_keep(key, (r0, r0 + 40), (0, 30), 0.5)
    assert torch.equal(dropped, torch.from_numpy(x * mask * 2.0))
    assert torch.equal(feats.to_dense(), torch.from_numpy(x))  # the block itself is unchanged
