import numpy as np
import pytest
import torch

from hpcgnn.kernels.rows import (
    ScatterMap,
    gather_rows,
    scatter_add_rows,
    scatter_map,
    take_rows,
)

INDEX_DTYPES = [torch.int32, torch.int64]


def _x(n=6, f=3, dtype=torch.float64):
    return torch.arange(n * f, dtype=dtype).reshape(n, f) / 7


@pytest.mark.parametrize("itype", INDEX_DTYPES)
def test_gather_rows_with_duplicates_and_any_order(itype):
    x = _x()
    idx = torch.tensor([4, 0, 4, 5, 1], dtype=itype)
    out = gather_rows(x, idx)
    assert out.is_contiguous()
    assert torch.equal(out, x[idx.long()])


@pytest.mark.parametrize("shape", [(0,), (4,)])
def test_gather_rows_zero_size(shape):
    x = _x(5, 0) if shape == (4,) else _x()
    idx = torch.zeros(shape, dtype=torch.int64)
    out = gather_rows(x, idx)
    assert out.shape == (shape[0], x.shape[1])


def test_gather_rows_of_a_non_contiguous_block():
    x = _x(6, 4).T  # 4 x 6, not contiguous
    out = gather_rows(x, torch.tensor([3, 1]))
    assert out.is_contiguous() and torch.equal(out, x[[3, 1]])


@pytest.mark.parametrize(("dtype", "width"), [(torch.float32, 2), (torch.float32, 4),
                                             (torch.float64, 1), (torch.float64, 2),
                                             (torch.float16, 4), (torch.int32, 4)])
def test_take_rows_moves_the_bits_of_narrow_rows(dtype, width):
    """Rows of 8 or 16 bytes move as one word each: every bit pattern (NaN payloads, -0)."""
    bits = np.random.default_rng(0).integers(0, 2**63, (9, 8), dtype=np.int64)
    x = torch.from_numpy(bits).view(dtype)[:, :width]
    x = x.contiguous()
    idx = torch.tensor([8, 0, 3, 3, 5])
    for block in (x, x[1:], x[3:].view(-1, *([2, width // 2] if width > 1 else [1]))):
        got = take_rows(block, idx[idx < len(block)])
        want = block[idx[idx < len(block)]]
        assert got.dtype == dtype and got.shape == want.shape
        assert torch.equal(got.view(torch.uint8), want.contiguous().view(torch.uint8))


@pytest.mark.parametrize("itype", INDEX_DTYPES)
def test_scatter_add_accumulates_duplicates_in_order(itype):
    out = _x(4, 2, torch.float32)
    idx = np.array([2, 0, 2, 2, 3])
    rows = torch.rand(5, 2, generator=torch.Generator().manual_seed(0))
    want = out.numpy().copy()
    for i, r in enumerate(idx):  # in i order, as the CPU reference adds
        want[r] += rows[i].numpy()
    got = scatter_add_rows(out, torch.from_numpy(idx).to(itype), rows)
    assert got is out
    assert np.array_equal(out.numpy(), want)


@pytest.mark.parametrize("itype", INDEX_DTYPES)
def test_scatter_add_unique_equals_the_general_add_on_distinct_targets(itype):
    idx = torch.tensor([3, 0, 5], dtype=itype)
    rows = torch.rand(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    a = scatter_add_rows(_x(6, 4), idx, rows, unique=True)
    b = scatter_add_rows(_x(6, 4), idx, rows)
    assert torch.equal(a, b)
    assert torch.equal(a[[1, 2, 4]], _x(6, 4)[[1, 2, 4]])  # untouched rows


@pytest.mark.parametrize("itype", INDEX_DTYPES)
def test_scatter_map_is_the_inverse_of_the_ids(itype):
    idx = torch.tensor([2, 0, 2, 2, 3, 0], dtype=itype)
    m = scatter_map(idx)
    assert m.ids is idx or torch.equal(m.ids, idx)
    assert m.order.tolist() == [1, 5, 0, 2, 3, 4]  # stable: a target's rows in i order
    assert m.targets.tolist() == [0, 2, 3] and m.seg.tolist() == [0, 2, 5, 6]
    assert {t.dtype for t in (m.order, m.targets, m.seg)} == {torch.int64}
    empty = scatter_map(torch.zeros(0, dtype=itype))
    assert empty.targets.shape == (0,) and empty.seg.tolist() == [0]


def test_scatter_add_takes_a_prebuilt_map():
    idx = torch.tensor([2, 0, 2, 2, 3])
    rows = torch.rand(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    m = scatter_map(idx)
    assert isinstance(m, ScatterMap)
    assert torch.equal(scatter_add_rows(_x(4, 2), m, rows), scatter_add_rows(_x(4, 2), idx, rows))
    uniq = scatter_map(torch.tensor([3, 1]))
    assert torch.equal(scatter_add_rows(_x(4, 2), uniq, rows[:2], unique=True),
                       scatter_add_rows(_x(4, 2), torch.tensor([3, 1]), rows[:2]))


@pytest.mark.parametrize("unique", [False, True])
def test_scatter_add_zero_size(unique):
    out = _x()
    before = out.clone()
    scatter_add_rows(out, torch.zeros(0, dtype=torch.int64), torch.zeros(0, 3, dtype=out.dtype),
                     unique=unique)
    assert torch.equal(out, before)
    empty = torch.zeros(3, 0)
    scatter_add_rows(empty, torch.tensor([0, 0]), torch.zeros(2, 0), unique=unique)
    assert empty.shape == (3, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("itype", INDEX_DTYPES)
def test_cuda_kernels_match_the_cpu_references(dtype, itype):
    x = torch.rand(50, 7, dtype=dtype, generator=torch.Generator().manual_seed(2))
    idx = torch.tensor([49, 0, 3, 3, 17, 0, 0], dtype=itype)
    uniq = torch.tensor([5, 2, 40], dtype=itype)
    rows = torch.rand(len(idx), 7, dtype=dtype, generator=torch.Generator().manual_seed(3))
    cuda = torch.device("cuda")
    assert torch.equal(gather_rows(x.to(cuda), idx.to(cuda)).cpu(), gather_rows(x, idx))
    want = scatter_add_rows(x.clone(), idx, rows)
    for ids in (idx.to(cuda), scatter_map(idx.to(cuda))):  # deterministic: bit for bit
        assert torch.equal(scatter_add_rows(x.to(cuda), ids, rows.to(cuda)).cpu(), want)
    got = scatter_add_rows(x.to(cuda), uniq.to(cuda), rows[:3].to(cuda), unique=True).cpu()
    assert torch.equal(got, scatter_add_rows(x.clone(), uniq, rows[:3], unique=True))
    assert gather_rows(x.to(cuda), idx[:0].to(cuda)).shape == (0, 7)
    ids = torch.arange(50).reshape(-1, 1)  # int64 payload (staged setup): torch's indexing
    assert torch.equal(gather_rows(ids.to(cuda), idx.to(cuda)).cpu(), ids[idx.long()])
