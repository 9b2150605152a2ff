import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hpcgnn.kernels.spmm import sparse_matmul


def _hop(rows=5, cols=7, seed=0):
    a = sp.random(rows, cols, density=0.4, random_state=seed, format="csr", dtype=np.float64)
    h = torch.from_numpy(np.random.default_rng(seed).standard_normal((cols, 3)))
    return a, h


def test_sparse_matmul_on_the_host_is_scipy_bit_for_bit():
    a, h = _hop()
    h.requires_grad_(True)
    out = sparse_matmul(a, h)
    assert out.device.type == "cpu" and np.array_equal(out.detach().numpy(), a @ h.detach().numpy())
    g = torch.ones_like(out)
    out.backward(g)
    assert np.array_equal(h.grad.numpy(), a.T @ g.numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sparse_matmul_on_the_device_matches_the_host(dtype):
    a, h = _hop(9, 11, seed=4)
    a = a.astype(np.float32 if dtype == torch.float32 else np.float64)
    h = h.to(dtype)
    empty = sp.csr_matrix((4, 11), dtype=a.dtype)
    for m in (a, empty):
        host = h.clone().requires_grad_(True)
        dev = h.to("cuda").requires_grad_(True)
        out_h, out_d = sparse_matmul(m, host), sparse_matmul(m, dev)
        assert out_d.device == dev.device
        torch.testing.assert_close(out_d.cpu(), out_h.detach())
        out_h.sum().backward()
        out_d.sum().backward()
        torch.testing.assert_close(dev.grad.cpu(), host.grad)
