import numpy as np
import pytest
import torch

from hpcgnn.kernels.dropout import block_keep, block_launch, chunk_states, keep_threshold, rows_keep
from hpcgnn.rng import (
    CHUNK_ROWS,
    TAG_DROPOUT_BLOCK,
    chunk_seed,
    dropout_keep,
    dropout_keep_rows,
    stream_key,
    uniform_block,
)


def test_chunk_states_are_numpys_seeded_sfc64():
    key = stream_key(5, 7)
    states = chunk_states(key, 2, 3)
    assert states.shape == (3, 4) and states.dtype == np.uint64
    for k, state in enumerate(states):
        want = np.random.SFC64(chunk_seed(key, 2 + k)).state["state"]["state"]
        assert state.tolist() == [int(v) for v in want]


def test_chunk_states_zero_chunks():
    assert chunk_states(stream_key(1), 4, 0).shape == (0, 4)


@pytest.mark.parametrize(
    ("rows", "cols", "want"),
    [
        ((1000, 1030), (1, 3), (0, 2, 1000, 1030, 1, 3, None)),  # crosses a chunk boundary
        ((5, 9), np.array([2, 0, 2]), (0, 1, 5, 9, 0, 3, [2, 0, 2])),  # index columns
        ((CHUNK_ROWS, CHUNK_ROWS + 2), (0, 3), (1, 1, CHUNK_ROWS, CHUNK_ROWS + 2, 0, 3, None)),
        ((7, 7), (0, 3), (0, 0, 7, 7, 0, 3, None)),  # no rows: no chunk
        ((3, 5), np.zeros(0, np.int64), (0, 1, 3, 5, 0, 0, [])),  # no index columns
    ],
)
def test_block_launch_arguments(rows, cols, want):
    chunk0, chunks, r0, r1, c0, c1, pick_want = want
    states, ints, pick = block_launch(11, 2, 1, rows, cols, 3)
    assert ints.dtype == np.int64 and len(states) == chunks
    assert ints.tolist() == [chunk0, chunks, CHUNK_ROWS, r0, r1, 3, c0, c1]
    assert (pick is None) if pick_want is None else pick.tolist() == pick_want


def test_block_keep_on_the_cpu_is_the_rng_mask():
    rows, cols = (1020, 1030), np.array([4, 1])
    got = block_keep(3, 0, 2, rows, cols, 5, 0.5)
    assert got.dtype == torch.bool and got.device.type == "cpu"
    assert np.array_equal(got.numpy(), dropout_keep(3, 0, 2, rows, cols, 5, 0.5))
    draws = uniform_block(stream_key(3, TAG_DROPOUT_BLOCK, 0, 2), rows, cols, 5)
    assert np.array_equal(got.numpy(), draws >= 0.5)


def test_rows_keep_on_the_cpu_is_the_rng_mask():
    ids = np.array([0, 9, 9, 2**40 + 3, 5], dtype=np.int64)  # duplicates, a large id
    got = rows_keep(4, 1, 2, 0, ids, 3, 0.3)
    assert got.dtype == torch.bool and got.device.type == "cpu"
    assert np.array_equal(got.numpy(), dropout_keep_rows(4, 1, 2, 0, ids, 3, 0.3))
    assert np.array_equal(got[1], got[2])  # the same row id, the same mask
    cols = np.array([2, 0])  # a GIST sub-network's columns of the width
    got = rows_keep(4, 1, 2, 0, ids, 3, 0.3, cols=cols).numpy()
    assert np.array_equal(got, dropout_keep_rows(4, 1, 2, 0, ids, 3, 0.3)[:, cols])


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


@pytest.mark.parametrize("p", [0.0, 0.5, 0.25, 0.3, 0.1, 1 - 2**-53, 2**-60])
def test_the_integer_threshold_keeps_what_the_uniform_keeps(p):
    """``bits >> 11 >= keep_threshold(p)`` exactly when ``(bits >> 11) 2^-53 >= p``."""
    t = int(keep_threshold(p))
    around = np.array([t - 2, t - 1, t, t + 1, t + 2, 0, 2**53 - 1], dtype=np.int64)
    m = around[(around >= 0) & (around < 2**53)]
    bits = (m.astype(np.uint64) << np.uint64(11)) | np.uint64(0x5A5)  # low bits are dropped
    uniform = (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    assert np.array_equal((bits >> np.uint64(11)) >= np.uint64(t), uniform >= p)
