"""Glorot initialisation: any rank can draw any rows, bit-identical to the whole draw."""

import numpy as np

from hpcgnn.nn.init import glorot_rows, glorot_weights


def test_rows_of_any_weight_equal_the_slices_of_the_whole_draw():
    sizes = [7, 11, 5, 3]
    whole = glorot_weights(sizes, seed=4)
    for layer, w in enumerate(whole):
        for lo, hi in ((0, w.shape[0]), (2, 5), (w.shape[0] - 1, w.shape[0]), (3, 3)):
            assert np.array_equal(glorot_rows(sizes, 4, layer, lo, hi), w[lo:hi])
