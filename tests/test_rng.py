import numpy as np

from hpcgnn.rng import CHUNK_ROWS, chain, dropout_keep, mix, stream_key, uniform_block


def test_stream_key_is_the_chained_mix():
    assert stream_key(7, 3, 5) == chain(np.uint64(7), 3, 5)
    assert stream_key(7, 3) != stream_key(7, 4)


def test_mix_is_a_bijection_on_a_sample():
    x = np.arange(10_000, dtype=np.uint64)
    assert len(np.unique(mix(x))) == len(x)


def test_blocks_equal_the_serial_matrix_for_ranges_and_index_arrays():
    key = stream_key(1, 2)
    n, f = 2 * CHUNK_ROWS + 37, 9
    full = uniform_block(key, (0, n), (0, f), f)
    assert np.array_equal(uniform_block(key, (1000, 1100), (2, 7), f), full[1000:1100, 2:7])
    cols = np.array([8, 0, 3])
    assert np.array_equal(uniform_block(key, (5, CHUNK_ROWS + 20), cols, f),
                          full[5 : CHUNK_ROWS + 20][:, cols])


def test_dropout_masks_of_column_subsets_match_the_full_mask():
    full = dropout_keep(0, 3, 1, (0, 50), (0, 16), 16, 0.5)
    cols = np.array([1, 5, 9, 15])
    part = dropout_keep(0, 3, 1, (10, 40), cols, 16, 0.5)
    assert np.array_equal(part, full[10:40][:, cols])
    assert 0.3 < full.mean() < 0.7
