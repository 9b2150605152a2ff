import numpy as np
import pytest
import torch

from hpcgnn.kernels.sampling import draw_rows, its_round, row_keys, uniform_round
from hpcgnn.rng import chain
from hpcgnn.sampling.its import row_totals, sample_rows, sample_uniform_rows, segment_cumsum

KEYS = chain(np.uint64(9), np.arange(4))


def _weighted():
    """Four active rows: weights with zeros, one entry, a zero-draw row, a long row."""
    ptr = np.array([0, 4, 5, 7, 13], dtype=np.int64)
    w = np.array([0.5, 0.0, 2.0, 1.0, 3.0, 1.0, 1.0, 0, 0, 1, 0, 2, 0], dtype=np.float64)
    cum = segment_cumsum(ptr, w)
    return ptr, w, cum, row_totals(ptr, cum)


@pytest.mark.parametrize("rnd", [0, 3])
def test_its_round_hits_positive_weights_of_the_drawing_row(rnd):
    ptr, w, cum, total = _weighted()
    need = np.array([3, 2, 0, 5], dtype=np.int64)
    hit = its_round(KEYS, need, rnd, cum, ptr, total)
    assert hit.shape == (10,) and hit.dtype == np.int64
    row = draw_rows(need)
    assert np.all((hit >= ptr[row]) & (hit < ptr[row + 1]))
    assert np.all(w[hit] > 0)  # a zero weight is never hit


def test_its_round_no_draws():
    ptr, _, cum, total = _weighted()
    assert its_round(KEYS, np.zeros(4, np.int64), 0, cum, ptr, total).shape == (0,)
    empty = np.zeros(0, np.float64)
    none = np.zeros(0, np.int64)
    assert its_round(KEYS[:0], none, 0, empty, np.zeros(1, np.int64), empty).shape == (0,)


@pytest.mark.parametrize("rnd", [0, 1])
def test_uniform_round_ranks_are_in_range(rnd):
    need = np.array([2, 0, 4, 1], dtype=np.int64)
    remaining = np.array([5, 3, 1, 2**40], dtype=np.int64)
    rank = uniform_round(KEYS, need, rnd, remaining)
    assert rank.shape == (7,) and rank.dtype == np.int64
    assert np.all((rank >= 0) & (rank < remaining[draw_rows(need)]))
    assert np.all(rank[2:6] == 0)  # one entry left: always it


def test_rows_shorter_than_the_fanout_and_empty_rows_take_what_they_have():
    ptr = np.array([0, 0, 2, 2, 9, 10], dtype=np.int64)  # rows of 0, 2, 0, 7, 1 entries
    lens = np.diff(ptr)
    keys = chain(np.uint64(1), np.arange(5))
    sel = sample_uniform_rows(ptr, 3, keys)
    assert np.array_equal(np.add.reduceat(sel, ptr[:-1])[lens > 0], np.minimum(lens, 3)[lens > 0])
    w = np.ones(10)
    w[3] = 0.0  # row 3 has 6 positive entries
    sel = sample_rows(ptr, w, 3, keys)
    assert not sel[3]
    assert np.array_equal(np.add.reduceat(sel, ptr[:-1])[lens > 0], [2, 3, 1])


@pytest.mark.gpu
def test_cuda_kernels_equal_the_cpu_twins():
    from hpcgnn.backend import get_device

    dev = get_device("cuda").torch_device

    def on(a):
        return torch.from_numpy(a.view(np.int64) if a.dtype == np.uint64 else a).to(dev)

    ptr, w, cum, total = _weighted()
    need = np.array([3, 2, 0, 5], dtype=np.int64)
    got = its_round(on(KEYS), on(need), 2, on(cum), on(ptr), on(total))
    assert got.device.type == "cuda"
    assert np.array_equal(got.cpu().numpy(), its_round(KEYS, need, 2, cum, ptr, total))
    remaining = np.array([5, 3, 1, 2**40], dtype=np.int64)
    got = uniform_round(on(KEYS), on(need), 1, on(remaining))
    assert np.array_equal(got.cpu().numpy(), uniform_round(KEYS, need, 1, remaining))
    assert np.array_equal(segment_cumsum(on(ptr), on(w)).cpu().numpy(), cum)
    ids = np.array([0, 7, 2**40], dtype=np.int64)
    for vertex in (None, ids):
        got = row_keys(np.uint64(5), on(ids), 3, None if vertex is None else on(vertex))
        assert np.array_equal(got.cpu().numpy().view(np.uint64), row_keys(5, ids, 3, vertex))
