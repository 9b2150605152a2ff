from contextlib import contextmanager

import numpy as np
import pytest
import torch

from hpcgnn.backend import emulation
from hpcgnn.kernels import cuda_modules as cm
from hpcgnn.kernels.rows import (
    PACK_BYTES,
    ScatterMap,
    copy_rows,
    gather_rows,
    packs,
    row_kernel,
    scatter_add_rows,
    scatter_map,
    take_rows,
)
from tests.conftest import TEST_DEVICE
from tests.kernels.host import need_compiler

INDEX_DTYPES = [torch.int32, torch.int64]
#: Row widths of the packing tests: packs of 1, 2 and 4 and the widths around them.
WIDTHS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17]


@contextmanager
def _gpu():
    """The suite's GPU where it runs on a real one, else the emulated GPU (the host builds)."""
    if TEST_DEVICE == "cuda" and not emulation.requested() and torch.cuda.is_available():
        yield
        return
    need_compiler()
    with emulation.emulated():
        yield


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("itype", INDEX_DTYPES)
def test_cuda_kernels_match_the_cpu_references(dtype, itype):
    x = torch.rand(50, 7, dtype=dtype, generator=torch.Generator().manual_seed(2))
    idx = torch.tensor([49, 0, 3, 3, 17, 0, 0], dtype=itype)
    uniq = torch.tensor([5, 2, 40], dtype=itype)
    rows = torch.rand(len(idx), 7, dtype=dtype, generator=torch.Generator().manual_seed(3))
    cuda = torch.device("cuda")
    with _gpu():
        _match_the_cpu_references(x, idx, uniq, rows, cuda)


def _match_the_cpu_references(x, idx, uniq, rows, cuda):
    assert torch.equal(gather_rows(x.to(cuda), idx.to(cuda)).cpu(), gather_rows(x, idx))
    want = scatter_add_rows(x.clone(), idx, rows)
    for ids in (idx.to(cuda), scatter_map(idx.to(cuda))):  # deterministic: bit for bit
        assert torch.equal(scatter_add_rows(x.to(cuda), ids, rows.to(cuda)).cpu(), want)
    got = scatter_add_rows(x.to(cuda), uniq.to(cuda), rows[:3].to(cuda), unique=True).cpu()
    assert torch.equal(got, scatter_add_rows(x.clone(), uniq, rows[:3], unique=True))
    assert gather_rows(x.to(cuda), idx[:0].to(cuda)).shape == (0, 7)
    ids = torch.arange(50).reshape(-1, 1)  # int64 payload (staged setup): torch's indexing
    assert torch.equal(gather_rows(ids.to(cuda), idx.to(cuda)).cpu(), ids[idx.long()])


def _misaligned(t: torch.Tensor, offset: int) -> torch.Tensor:
    """A contiguous copy of ``t`` on its device whose data starts ``offset`` elements into a
    fresh (16-byte aligned) buffer."""
    buf = torch.empty(t.numel() + offset, dtype=t.dtype, device=t.device)
    view = buf[offset:].view(t.shape)
    view.copy_(t)
    return view


@pytest.mark.parametrize(("dtype", "f", "width"),
                         [(torch.float32, 4, 1), (torch.float32, 8, 2), (torch.float32, 16, 4),
                          (torch.float64, 2, 1), (torch.float64, 6, 3)])
def test_row_kernel_packs_whole_aligned_rows(dtype, f, width):
    x, out = torch.zeros(10, f, dtype=dtype), torch.zeros(3, f, dtype=dtype)
    idx = torch.zeros(3, dtype=torch.int32)
    c = cm.c_type(dtype)
    assert packs((x, out))
    assert row_kernel("gather_rows", (x, out), idx) == (f"gather_rows<hpcgnn_vec16<{c}>, int>",
                                                        width)
    assert row_kernel("scatter_add_segments", (x, out)) == (
        f"scatter_add_segments<hpcgnn_vec16<{c}>>", width)
    assert row_kernel("gather_rows", (x, out), idx, packed=False) == (f"gather_rows<{c}, int>", f)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("f", WIDTHS)
def test_row_kernel_falls_back_to_scalars(dtype, f):
    """A row that is no whole number of packs, or one value tensor off a 16-byte boundary."""
    x, out = torch.zeros(10, f, dtype=dtype), torch.zeros(3, f, dtype=dtype)
    whole = f * x.element_size() % PACK_BYTES == 0
    assert packs((x, out)) == whole
    shifted = _misaligned(x, 1)
    assert shifted.data_ptr() % PACK_BYTES != 0
    assert not packs((shifted, out)) and not packs((x, _misaligned(out, 1)))
    ids = torch.zeros(1, dtype=torch.int32)
    assert row_kernel("scatter_add_unique", (shifted, out), ids) == (
        f"scatter_add_unique<{cm.c_type(dtype)}, int>", f)
    assert not packs((torch.zeros(4, 0, dtype=dtype),))  # no bytes: nothing to pack


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "misaligned"])
def test_packed_and_scalar_kernels_equal_the_cpu_twins(dtype, offset, monkeypatch):
    """Gather, unique and general scatter-add at every width, packed where the rows allow
    (named ``hpcgnn_vec16``) and scalar otherwise or with ``packed=False``: byte-identical
    to the CPU twins (duplicates summed in i order, magnitudes that make the order show)."""
    launched: list[str] = []
    real = cm.launch
    monkeypatch.setattr(cm, "launch", lambda *a, **k: launched.append(a[1]) or real(*a, **k))
    gen = torch.Generator().manual_seed(6)
    cuda = torch.device("cuda")
    for f in WIDTHS:
        x = torch.randn(30, f, dtype=dtype, generator=gen)
        x *= 10.0 ** torch.randint(-6, 7, x.shape, generator=gen).to(dtype)
        idx = torch.randint(0, 30, (45,), generator=gen)
        idx[:6] = 4  # one target of many rows
        uniq = torch.randperm(30, generator=gen)[:12]
        rows = torch.randn(45, f, dtype=dtype, generator=gen) * 1e8
        want = (gather_rows(x, idx), scatter_add_rows(x.clone(), idx, rows),
                scatter_add_rows(x.clone(), uniq, rows[:12], unique=True))
        whole = f * x.element_size() % PACK_BYTES == 0
        for packed in (True, False):
            launched.clear()
            with _gpu():
                dx, drows = _misaligned(x.to(cuda), offset), _misaligned(rows.to(cuda), offset)
                didx, duniq = idx.to(cuda), uniq.to(cuda)
                got = (gather_rows(dx, didx, packed=packed),
                       scatter_add_rows(dx.clone(), didx, drows, packed=packed),
                       scatter_add_rows(_misaligned(dx, offset), scatter_map(didx), drows,
                                        packed=packed),
                       scatter_add_rows(_misaligned(dx, offset), duniq, drows[:12], unique=True,
                                        packed=packed))
                got = tuple(g.cpu() for g in got)
            for g, w in zip(got, (want[0], want[1], want[1], want[2]), strict=True):
                assert g.numpy().tobytes() == w.numpy().tobytes(), (f, packed)
            vector = ["hpcgnn_vec16" in name for name in launched]
            assert len(vector) == 4
            assert vector == [packed and whole and offset == 0] * 4, (f, packed, launched)


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
