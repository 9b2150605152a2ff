import numpy as np
import pytest
import torch

from hpcgnn.kernels.dropout import (
    block_keep,
    keep_matrix,
    keep_pair_words,
    keep_pairs,
    rows_keep,
)
from hpcgnn.rng import dropout_keep, dropout_keep_pairs, dropout_key

CASES = [
    ((1000, 1030), (1, 3)),  # a column range
    ((5, 9), np.array([2, 0, 2])),  # index columns in any order, repeated
    (np.array([0, 9, 9, 2**40 + 3, 5]), (0, 3)),  # row ids: duplicates, a large id
    ((7, 7), (0, 3)),  # no rows
    ((3, 5), np.zeros(0, np.int64)),  # no columns
]


@pytest.mark.parametrize(("rows", "cols"), CASES)
@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 1 - 2**-40])
def test_cpu_masks_are_the_rng_masks(rows, cols, p):
    key = dropout_key(3, 0, 2)
    got = keep_matrix(key, rows, cols, p)
    assert got.dtype == torch.bool and got.device.type == "cpu"
    assert np.array_equal(got.numpy(), dropout_keep(key, rows, cols, p))


def test_a_wide_cpu_mask_keeps_about_1_minus_p():
    got = keep_matrix(dropout_key(1, 2, 3), (0, 300), (0, 700), 0.3).numpy()
    assert abs(got.mean() - 0.7) < 0.005
    assert np.array_equal(got, dropout_keep(dropout_key(1, 2, 3), (0, 300), (0, 700), 0.3))


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 18])
def test_masks_hashed_in_blocks_are_the_rng_masks(monkeypatch, block):
    """Ragged blocks (a row wider than a block, a last block short) change no decision."""
    import hpcgnn.kernels.dropout as dropout

    monkeypatch.setattr(dropout, "HASH_BLOCK", block)
    key = dropout_key(7, 1, 0)
    for rows, cols in [((0, 23), (0, 10)), ((5, 6), (0, 3)), ((0, 9), np.array([4, 1, 1]))]:
        assert np.array_equal(keep_matrix(key, rows, cols, 0.4).numpy(),
                              dropout_keep(key, rows, cols, 0.4))
    row_ids, col_ids = torch.arange(5) + 2**33, torch.arange(12).view(6, 2)
    rows, cols = torch.tensor([0, 4, 4, 2, 1, 0, 3]), torch.tensor([5, 0, 1, 1, 2, 5, 3])
    want = keep_pairs(key, row_ids[rows][:, None].expand(-1, 2).reshape(-1),
                      col_ids[cols].reshape(-1), 0.4).reshape(-1, 2)
    assert torch.equal(keep_pair_words(key, row_ids, col_ids, rows, cols, 0.4), want)


def test_block_and_rows_keys():
    rows, cols = (1020, 1030), np.array([4, 1])
    assert np.array_equal(block_keep(3, 0, 2, rows, cols, 0.5).numpy(),
                          dropout_keep(dropout_key(3, 0, 2), rows, cols, 0.5))
    ids = np.array([0, 9, 9, 2**40 + 3], dtype=np.int64)
    got = rows_keep(4, 1, 2, 0, ids, 3, 0.3)
    assert np.array_equal(got.numpy(), dropout_keep(dropout_key(4, 1, 0, 2), ids, (0, 3), 0.3))
    assert np.array_equal(got[1], got[2])  # the same row id, the same mask
    cols = np.array([2, 0])  # a GIST sub-network's columns of the width
    assert np.array_equal(rows_keep(4, 1, 2, 0, ids, 3, 0.3, cols=cols).numpy(),
                          got.numpy()[:, cols])


def test_rows_keep_zero_size():
    assert rows_keep(1, 0, 0, 0, np.zeros(0, np.int64), 4, 0.5).shape == (0, 4)
    assert rows_keep(1, 0, 0, 0, np.arange(3), 0, 0.5).shape == (3, 0)


def test_pairs_are_the_dense_mask_at_the_entries():
    key = dropout_key(5, 6, 0)
    r = torch.tensor([0, 3, 3, 7], dtype=torch.int64)
    c = torch.tensor([9, 0, 9, 2], dtype=torch.int64)
    dense = dropout_keep(key, (0, 8), (0, 10), 0.5)
    assert np.array_equal(keep_pairs(key, r, c, 0.5).numpy(), dense[r.numpy(), c.numpy()])
    assert np.array_equal(keep_pairs(key, r, c, 0.5).numpy(),
                          dropout_keep_pairs(key, r.numpy(), c.numpy(), 0.5))


@pytest.mark.parametrize("p", [0.0, 0.3, 1 - 2**-40, 1.0])
@pytest.mark.parametrize("heads", [1, 3, 4])
def test_pair_words_are_the_expanded_pairs(p, heads):
    """Each id's word hashed once and gathered: :func:`keep_pairs` of every (entry, head)."""
    key = dropout_key(5, 6, 1)
    rng = np.random.default_rng(heads)
    row_ids = torch.from_numpy(rng.permutation(50)[:7] + 2**40)
    col_ids = torch.from_numpy(rng.permutation(90)[:11])[:, None] * 6 + torch.arange(heads)
    rows = torch.from_numpy(rng.integers(0, 7, 40))
    cols = torch.from_numpy(rng.integers(0, 11, 40))
    want = keep_pairs(key, row_ids[rows][:, None].expand(-1, heads).reshape(-1),
                      col_ids[cols].reshape(-1), p).reshape(-1, heads)
    assert torch.equal(keep_pair_words(key, row_ids, col_ids, rows, cols, p), want)
    empty = torch.zeros(0, dtype=torch.int64)
    assert keep_pair_words(key, row_ids, col_ids, empty, empty, p).shape == (0, heads)


@pytest.mark.gpu
def test_cuda_masks_equal_the_cpu_masks():
    from hpcgnn.backend import get_device

    cuda = get_device("cuda")
    key = dropout_key(11, 2, 1)
    for rows, cols in CASES:
        got = keep_matrix(key, rows, cols, 0.4, cuda)
        assert got.device.type == "cuda"
        assert np.array_equal(got.cpu().numpy(), dropout_keep(key, rows, cols, 0.4))
    r = torch.tensor([0, 3, 2**40], dtype=torch.int64)
    c = torch.tensor([9, 0, 5], dtype=torch.int64)
    got = keep_pairs(key, r.to(cuda.torch_device), c.to(cuda.torch_device), 0.4)
    assert np.array_equal(got.cpu().numpy(), dropout_keep_pairs(key, r.numpy(), c.numpy(), 0.4))
