import numpy as np
import pytest

from hpcgnn.rng import (
    chain,
    dropout_keep,
    dropout_keep_pairs,
    dropout_key,
    entry_bits,
    keep_of,
    keep_threshold,
    lowbias32,
    mix,
    stream_key,
)


def test_stream_key_is_the_chained_mix():
    assert stream_key(7, 3, 5) == chain(np.uint64(7), 3, 5)
    assert stream_key(7, 3) != stream_key(7, 4)


def test_mix_is_a_bijection_on_a_sample():
    x = np.arange(10_000, dtype=np.uint64)
    assert len(np.unique(mix(x))) == len(x)


def test_lowbias32_reference_values():
    """Wellons' published lowbias32: hash(0) = 0, hash(1) = 0x69EDB5C2 (checked by hand)."""
    got = lowbias32(np.array([0, 1, 0xFFFFFFFF], dtype=np.uint32))
    x = 1
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    assert got[0] == 0 and got[1] == x


def test_blocks_equal_the_serial_matrix_for_ranges_and_index_arrays():
    key = stream_key(1, 2)
    full = entry_bits(key, (0, 2100), (0, 9))
    assert np.array_equal(entry_bits(key, (1000, 1100), (2, 7)), full[1000:1100, 2:7])
    cols, rows = np.array([8, 0, 3]), np.array([2099, 5, 5])
    assert np.array_equal(entry_bits(key, rows, cols), full[rows][:, cols])


def test_dropout_masks_of_subsets_match_the_full_mask():
    key = dropout_key(0, 3, 1)
    full = dropout_keep(key, (0, 50), (0, 16), 0.5)
    cols = np.array([1, 5, 9, 15])
    assert np.array_equal(dropout_keep(key, (10, 40), cols, 0.5), full[10:40][:, cols])
    r, c = np.array([3, 3, 49]), np.array([0, 15, 7])
    assert np.array_equal(dropout_keep_pairs(key, r, c, 0.5), full[r, c])
    assert 0.4 < full.mean() < 0.6


def test_streams_differ_by_epoch_layer_and_batch():
    masks = [dropout_keep(dropout_key(0, *k), (0, 64), (0, 64), 0.5)
             for k in [(1, 0), (2, 0), (1, 1), (1, 0, 0), (1, 0, 1)]]
    for i, a in enumerate(masks):
        for b in masks[i + 1:]:
            assert 0.4 < (a == b).mean() < 0.6  # independent, not shifted copies


def test_rows_and_columns_are_not_interchangeable():
    bits = entry_bits(stream_key(3), (0, 40), (0, 40))
    assert not np.array_equal(bits, bits.T)


@pytest.mark.parametrize("p", [0.0, 0.5, 0.25, 0.3, 0.1, 1 - 2**-33, 1 - 2**-40, 2**-60])
def test_the_integer_threshold_keeps_what_the_uniform_keeps(p):
    """``bits >= keep_threshold(p)`` exactly when ``bits 2^-32 >= p``."""
    t = keep_threshold(p)
    around = np.array([t - 2, t - 1, t, t + 1, t + 2, 0, 2**32 - 1], dtype=np.int64)
    bits = around[(around >= 0) & (around < 2**32)].astype(np.uint32)
    uniform = bits.astype(np.float64) * 2.0**-32
    assert np.array_equal(keep_of(bits, p), uniform >= p)
