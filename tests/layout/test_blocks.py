"""Row blocks that follow a file's partition (:func:`hpcgnn.layout.blocks.vertex_offsets`)."""

import numpy as np
import pytest

from hpcgnn.layout.blocks import even_offsets, partition_fits, vertex_offsets

PARTITION = (0, 3, 3, 9, 10, 14, 20, 21, 30)  # 8 uneven parts, one empty


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (8, PARTITION),  # used as is
        (4, (0, 3, 10, 20, 30)),  # coarsened: consecutive pairs merged
        (2, (0, 10, 30)),
        (1, (0, 30)),
        (3, None),  # 8 parts cannot give 3 blocks: split evenly
        (16, None),
    ],
)
def test_vertex_offsets_follow_a_partition_that_fits(parts, expected):
    assert partition_fits(PARTITION, parts) == (expected is not None)
    want = even_offsets(30, parts) if expected is None else np.array(expected)
    np.testing.assert_array_equal(vertex_offsets(30, parts, PARTITION), want)
    np.testing.assert_array_equal(vertex_offsets(30, parts, None), even_offsets(30, parts))
