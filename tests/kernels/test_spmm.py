import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hpcgnn.kernels.spmm import (
    column_block,
    default_block,
    index_dtype,
    sparse_matmul,
    spmm,
    to_torch_csr,
    transposed_csr,
)


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
def test_sparse_matmul_on_the_device_matches_the_host(dtype, device):
    a, h = _hop(9, 11, seed=4)
    a = a.astype(np.float32 if dtype == torch.float32 else np.float64)
    h = h.to(dtype)
    empty = sp.csr_matrix((4, 11), dtype=a.dtype)
    for m in (a, empty):
        host = h.clone().requires_grad_(True)
        dev = h.to(device.torch_device).requires_grad_(True)
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


def _wide(rows=120, cols=90, density=0.3, dtype=np.float32, seed=5):
    """A matrix with long rows of spread values: a different summation order shows."""
    rng = np.random.default_rng(seed)
    a = sp.random(rows, cols, density=density, random_state=seed, format="csr", dtype=dtype)
    a.data = (rng.standard_normal(a.nnz) * 10.0 ** rng.integers(-4, 4, a.nnz)).astype(dtype)
    a.data[a.indptr[7] : a.indptr[8]] = 0  # an empty row
    a.eliminate_zeros()
    return a, rng


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width", [1, 5, 16, 17, 64, 100, 256])
def test_the_blocked_spmm_equals_the_unblocked_product_bit_for_bit(dtype, width):
    """Column blocks of H (widths not multiples of the block too) change no bit."""
    a, rng = _wide(dtype=dtype)
    t = to_torch_csr(a, torch.float32 if dtype == np.float32 else torch.float64)
    h = torch.from_numpy(rng.standard_normal((a.shape[1], width)).astype(dtype))
    whole = torch.sparse.mm(t, h)
    for block in (None, 1, 3, 16, 64, width, width + 1):
        got = spmm(t, h, block=block)
        assert got.dtype == whole.dtype and torch.equal(got, whole), block


def test_the_blocked_spmm_on_empty_and_degenerate_blocks():
    a, rng = _wide(60, 40)
    h = torch.from_numpy(rng.standard_normal((40, 37)).astype(np.float32))
    cases = [
        sp.csr_matrix((60, 40), dtype=np.float32),  # no nonzeros
        sp.csr_matrix((0, 40), dtype=np.float32),  # no rows
        a[:, :40].multiply(np.arange(40) < 20).tocsr(),  # half of H's rows never gathered
        sp.csr_matrix(([1.5], ([59], [39])), shape=(60, 40), dtype=np.float32),  # one entry
    ]
    for m in cases:
        t = to_torch_csr(m, torch.float32)
        # float64 sums; float32 rounding of |A| |H| bounds the difference (the values span
        # eight decades, and MKL may fuse the multiply-adds)
        want = torch.from_numpy(np.asarray(m.astype(np.float64) @ h.double().numpy()))
        scale = float(np.max(abs(m) @ abs(h.double().numpy()), initial=1.0))
        for block in (None, 1, 16, 36):
            got = spmm(t, h, block=block)
            assert got.shape == (m.shape[0], 37)
            torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-6 * scale)
            if m.nnz:
                assert torch.equal(got, torch.sparse.mm(t, h))
    t = to_torch_csr(a, torch.float32)
    assert spmm(t, h[:, :0], block=4).shape == (60, 0)  # no columns


def test_the_default_blocks_at_one_thread_or_wide_rows():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert default_block(20_000, 256, 4) == 16
        assert default_block(20_000, 64, 4) == 16
        torch.set_num_threads(2)
        assert default_block(20_000, 128, 4) == 128  # 512 bytes a row: whole
        assert default_block(20_000, 256, 4) == 16
        assert default_block(20_000, 64, 8) == 64  # float64: 512 bytes, whole
        assert default_block(20_000, 80, 8) == 8  # 640 bytes: float64 lines
    finally:
        torch.set_num_threads(threads)


def test_column_blocks_are_cache_lines_sized_to_the_cache():
    assert column_block(20_000, 256, 4) == 16  # 1.3 MB of H per 16 columns: one line
    assert column_block(20_000, 256, 8) == 8  # a float64 line
    assert column_block(2_000, 256, 4) == 64  # 512 KiB of H
    assert column_block(2_000, 40, 4) == 40  # narrower than a block: whole
    assert column_block(20_000, 5, 4) == 5
    assert column_block(0, 7, 4) == 7


def test_gradients_flow_through_the_blocked_products():
    """The wrapped SpMMs (forward A H, backward A^T G) at a blocked width, exactly."""
    a, rng = _wide(80, 70)
    h = torch.from_numpy(rng.standard_normal((70, 48)).astype(np.float32))
    assert column_block(70, 48, 4) == 48  # blocked below only because block= asks
    for mat in (a, to_torch_csr(a, torch.float32)):
        x = h.clone().requires_grad_(True)
        out = sparse_matmul(mat, x)
        g = torch.from_numpy(rng.standard_normal(out.shape).astype(np.float32))
        out.backward(g)
        at = to_torch_csr(a.T.tocsr(), torch.float32)
        assert torch.equal(out.detach(), torch.sparse.mm(to_torch_csr(a, torch.float32), h))
        assert torch.equal(x.grad, torch.sparse.mm(at, g))
        assert torch.equal(x.grad, spmm(at, g, block=16))
    # a product autograd records is taken whole, and its gradient flows
    x = h.clone().requires_grad_(True)
    spmm(to_torch_csr(a, torch.float32), x, block=16).sum().backward()
    want = torch.sparse.mm(to_torch_csr(a.T.tocsr(), torch.float32), torch.ones(80, 48))
    torch.testing.assert_close(x.grad, want)


def test_local_aggregation_is_blocked_at_width_above_a_line(monkeypatch):
    """GCN's aggregate (forward and backward) goes through the blocked host product."""
    from hpcgnn.kernels import spmm as module
    from hpcgnn.nn.gcn import LocalAggregation, aggregate

    a, rng = _wide(90, 90)
    h = torch.from_numpy(rng.standard_normal((90, 40)).astype(np.float32))
    op = LocalAggregation(to_torch_csr(a.T.tocsr(), torch.float32), to_torch_csr(a, torch.float32))
    block = module.exact_block(16, 40, torch.float32)  # 16, or wider where MKL's kernels differ
    blocks = [block] * (40 // block) + ([40 % block] if 40 % block else [])
    calls = []
    sparse_mm = torch.sparse.mm
    monkeypatch.setattr(
        module.torch.sparse, "mm", lambda m, d: calls.append(d.shape) or sparse_mm(m, d)
    )
    monkeypatch.setattr(module, "BLOCK_BYTES", 1)  # blocks of one line: 16 columns
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the default blocks with one thread only
    x = h.clone().requires_grad_(True)
    out = aggregate(x, op)
    out.backward(torch.ones_like(out))
    assert [c[1] for c in calls] == blocks * 2
    torch.set_num_threads(threads)
    monkeypatch.undo()
    assert torch.equal(out.detach(), torch.sparse.mm(op.a_t, h))
    assert torch.equal(x.grad, torch.sparse.mm(op.a, torch.ones(90, 40)))


def test_to_torch_csr_has_int32_indices_on_a_gpu_where_they_fit():
    assert index_dtype(10, (4, 5), "cpu") == torch.int64
    assert index_dtype(10, (4, 5), "cuda") == torch.int32
    assert index_dtype(10, (4, 5), torch.device("cuda", 1)) == torch.int32
    assert index_dtype(2**31 - 1, (4, 5), "cuda") == torch.int32
    assert index_dtype(2**31, (4, 5), "cuda") == torch.int64
    assert index_dtype(10, (4, 2**31), "cuda") == torch.int64
    t = to_torch_csr(sp.random(6, 5, 0.5, format="csr", random_state=0), torch.float32)
    assert t.crow_indices().dtype == t.col_indices().dtype == torch.int64


@pytest.mark.gpu
def test_device_csr_blocks_have_int32_indices_and_the_hosts_sums(device):
    dev = device.torch_device
    a, rng = _wide(50, 60)
    h = torch.from_numpy(rng.standard_normal((60, 33)).astype(np.float32))
    t = to_torch_csr(a, torch.float32, dev)
    assert t.crow_indices().dtype == t.col_indices().dtype == torch.int32
    tt = transposed_csr(t)
    assert tt.crow_indices().dtype == tt.col_indices().dtype == torch.int32
    host = spmm(to_torch_csr(a, torch.float32), h)
    torch.testing.assert_close(spmm(t, h.to(dev)).cpu(), host)
    g = torch.ones(50, 33)
    torch.testing.assert_close(
        spmm(tt, g.to(dev)).cpu(), torch.sparse.mm(to_torch_csr(a.T.tocsr(), torch.float32), g)
    )
