import numpy as np
import pytest
import torch

from hpcgnn.kernels.dropout import block_keep, block_launch, chunk_states, rows_keep
from hpcgnn.rng import (
    CHUNK_ROWS,
    TAG_DROPOUT,
    TAG_DROPOUT_BLOCK,
    chunk_seed,
    dropout_keep,
    dropout_keep_rows,
    mix,
    stream_key,
    uniform_block,
)
from tests.kernels import emulate


def test_sfc64_of_the_kernel_is_numpys():
    key = stream_key(5, 7)
    for chunk, state in zip((0, 3), chunk_states(key, 0, 4)[[0, 3]], strict=True):
        s = [int(v) for v in state]
        mine = [emulate.uniform(emulate.sfc64_next(s)) for _ in range(40)]
        numpy = np.random.Generator(np.random.SFC64(chunk_seed(key, chunk))).random(40)
        assert mine == numpy.tolist()


def test_chunk_states_zero_chunks():
    assert chunk_states(stream_key(1), 4, 0).shape == (0, 4)


@pytest.mark.parametrize(
    ("rows", "cols"),
    [
        ((1000, 1030), (1, 3)),  # crosses a chunk boundary, a column range
        ((5, 9), np.array([2, 0, 2])),  # index columns in any order, repeated
        ((CHUNK_ROWS, CHUNK_ROWS + 2), (0, 3)),  # starts a chunk
        ((7, 7), (0, 3)),  # no rows
        ((3, 5), (2, 2)),  # no columns
        ((3, 5), np.zeros(0, np.int64)),  # no index columns
    ],
)
def test_block_kernel_algorithm_equals_the_cpu_stream(rows, cols):
    states, ints, pick = block_launch(11, 2, 1, rows, cols, 3)
    got = emulate.sfc64_block_keep(states, ints, 0.4)
    if pick is not None:
        got = got[:, pick]
    assert np.array_equal(got, dropout_keep(11, 2, 1, rows, cols, 3, 0.4))


def test_block_keep_on_the_cpu_is_the_rng_mask():
    rows, cols = (1020, 1030), np.array([4, 1])
    got = block_keep(3, 0, 2, rows, cols, 5, 0.5)
    assert got.dtype == torch.bool and got.device.type == "cpu"
    assert np.array_equal(got.numpy(), dropout_keep(3, 0, 2, rows, cols, 5, 0.5))
    draws = uniform_block(stream_key(3, TAG_DROPOUT_BLOCK, 0, 2), rows, cols, 5)
    assert np.array_equal(got.numpy(), draws >= 0.5)


def test_hash_kernel_algorithm_equals_the_cpu_stream():
    ids = np.array([0, 9, 9, 2**40 + 3, 5], dtype=np.int64)  # duplicates, a large id
    key = int(stream_key(4, TAG_DROPOUT, 1, 2, 0))
    assert emulate.mix(12345) == int(mix(np.array([12345], dtype=np.uint64))[0])
    got = emulate.hash_rows_keep(ids, 3, key, 0.3)
    assert np.array_equal(got, dropout_keep_rows(4, 1, 2, 0, ids, 3, 0.3))
    assert np.array_equal(rows_keep(4, 1, 2, 0, ids, 3, 0.3).numpy(), got)
    cols = np.array([2, 0])  # a GIST sub-network's columns of the width
    got = emulate.hash_rows_keep(ids, 3, key, 0.3, cols)
    assert np.array_equal(got, dropout_keep_rows(4, 1, 2, 0, ids, 3, 0.3, cols))
    assert np.array_equal(rows_keep(4, 1, 2, 0, ids, 3, 0.3, cols=cols).numpy(), got)


def test_rows_keep_zero_size():
    assert rows_keep(1, 0, 0, 0, np.zeros(0, np.int64), 4, 0.5).shape == (0, 4)
    assert rows_keep(1, 0, 0, 0, np.arange(3), 0, 0.5).shape == (3, 0)


@pytest.mark.gpu
def test_cuda_masks_equal_the_cpu_masks():
    from hpcgnn.backend import get_device

    cuda = get_device("cuda")
    for rows, cols in [((1000, 2100), (1, 5)), ((5, 9), np.array([4, 0, 2]))]:
        got = block_keep(11, 2, 1, rows, cols, 6, 0.4, cuda)
        assert np.array_equal(got.cpu().numpy(), dropout_keep(11, 2, 1, rows, cols, 6, 0.4))
    ids = np.array([0, 9, 9, 2**40 + 3], dtype=np.int64)
    got = rows_keep(4, 1, 2, 0, ids, 33, 0.3, cuda)
    assert np.array_equal(got.cpu().numpy(), dropout_keep_rows(4, 1, 2, 0, ids, 33, 0.3))
    cols = np.array([30, 2, 7])
    got = rows_keep(4, 1, 2, 0, ids, 33, 0.3, cuda, cols)
    assert np.array_equal(got.cpu().numpy(), dropout_keep_rows(4, 1, 2, 0, ids, 33, 0.3, cols))
