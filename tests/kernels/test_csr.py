import numpy as np
import pytest
import torch

from hpcgnn.kernels.csr import gather_ranges

PTR = np.array([0, 3, 3, 4, 4, 7], dtype=np.int64)  # rows 1 and 3 empty


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize(
    "pos", [[4, 0, 4], [1, 3], [], [2, 1, 0, 1]], ids=["repeat", "empty-rows", "none", "mixed"]
)
def test_gather_ranges_takes_the_rows_in_order(itype, pos):
    indices = np.array([5, 1, 9, 0, 2, 8, 3], dtype=itype)
    pos = np.array(pos, dtype=np.int64)
    ptr, idx = gather_ranges(PTR, indices, pos)
    rows = [indices[PTR[q]:PTR[q + 1]] for q in pos]
    assert ptr.dtype == np.int64 and idx.dtype == itype
    assert ptr.tolist() == np.cumsum([0, *map(len, rows)]).tolist()
    assert idx.tolist() == [v for r in rows for v in r.tolist()]


def test_gather_ranges_of_an_empty_matrix():
    ptr, idx = gather_ranges(np.zeros(3, np.int64), np.zeros(0, np.int64), np.array([1, 0]))
    assert ptr.tolist() == [0, 0, 0] and idx.shape == (0,)


@pytest.mark.gpu
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_cuda_gather_ranges_equals_the_cpu(itype):
    from hpcgnn.backend import get_device

    dev = get_device("cuda").torch_device
    indices = np.array([5, 1, 9, 0, 2, 8, 3], dtype=itype)
    pos = np.array([4, 1, 0, 4, 3], dtype=np.int64)
    ptr, idx = gather_ranges(*(torch.from_numpy(a).to(dev) for a in (PTR, indices, pos)))
    want_ptr, want_idx = gather_ranges(PTR, indices, pos)
    assert idx.device.type == "cuda"
    assert np.array_equal(ptr.cpu().numpy(), want_ptr)
    assert np.array_equal(idx.cpu().numpy(), want_idx)
