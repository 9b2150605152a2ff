import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hpcgnn.kernels.spmm import sparse_matmul, to_torch_csr, transposed_csr


def _hop(rows=5, cols=7, seed=0):
    a = sp.random(rows, cols, density=0.4, random_state=seed, format="csr", dtype=np.float64)
    h = torch.from_numpy(np.random.default_rng(seed).standard_normal((cols, 3)))
    return a, h


def test_sparse_matmul_on_the_host_is_the_torch_csr_product():
    """One code path on every device: torch CSR on the host too (bit for bit), ~ SciPy."""
    a, h = _hop()
    h.requires_grad_(True)
    out = sparse_matmul(a, h)
    want = torch.sparse.mm(to_torch_csr(a, h.dtype), h.detach())
    assert out.device.type == "cpu" and torch.equal(out.detach(), want)
    np.testing.assert_allclose(out.detach().numpy(), a @ h.detach().numpy(), rtol=1e-12)
    g = torch.ones_like(out)
    out.backward(g)
    assert torch.equal(h.grad, torch.sparse.mm(to_torch_csr(a.T.tocsr(), g.dtype), g))
    np.testing.assert_allclose(h.grad.numpy(), a.T @ g.numpy(), rtol=1e-12)


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


def test_transposed_csr_is_scipys_transpose():
    a = sp.random(30, 20, 0.2, format="csr", random_state=3)
    a.sort_indices()
    got = transposed_csr(to_torch_csr(a, torch.float64))
    want = a.T.tocsr()
    want.sort_indices()
    assert np.array_equal(got.crow_indices().numpy(), want.indptr)
    assert np.array_equal(got.col_indices().numpy(), want.indices)
    assert np.array_equal(got.values().numpy(), want.data)
    assert tuple(got.shape) == (20, 30)
