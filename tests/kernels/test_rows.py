import numpy as np
import pytest
import torch

from hpcgnn.kernels.rows import (
    ScatterMap,
    copy_rows,
    gather_rows,
    scatter_add_rows,
    scatter_map,
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


@pytest.mark.parametrize("itype", INDEX_DTYPES)
def test_copy_rows_writes_gathered_rows_at_their_positions(itype):
    x, out = _x(6, 3), torch.zeros(5, 3, dtype=torch.float64)
    src, dst = torch.tensor([4, 0, 4], dtype=itype), torch.tensor([3, 0, 1], dtype=itype)
    assert copy_rows(x, src, out, dst) is out
    assert torch.equal(out[[3, 0, 1]], x[[4, 0, 4]]) and not out[[2, 4]].any()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("itype", INDEX_DTYPES)
def test_copy_rows_reads_pinned_host_rows_on_the_gpu(device, dtype, itype):
    # zero-copy: the kernel reads a page-locked host tensor; a pageable one is refused (the
    # suite's cuda device: a GPU, or the emulated one with the host build of rows.cu)
    x = torch.rand(50, 7, dtype=dtype, generator=torch.Generator().manual_seed(5))
    src, dst = torch.tensor([49, 0, 3, 3, 17], dtype=itype), torch.tensor([8, 2, 0, 5, 1])
    cuda = device.torch_device
    want = copy_rows(x, src, torch.zeros(9, 7, dtype=dtype), dst.to(itype))
    for source in (x.pin_memory(), x.to(cuda)):
        out = torch.zeros(9, 7, dtype=dtype, device=cuda)
        copy_rows(source, src.to(cuda), out, dst.to(itype).to(cuda))
        assert torch.equal(out.cpu(), want)
    with pytest.raises(ValueError, match="page-locked"):
        copy_rows(x, src.to(cuda), torch.zeros(9, 7, dtype=dtype, device=cuda),
                  dst.to(itype).to(cuda))
