"""A graph given as arrays is checked and made canonical as ``hpcgnn prepare`` stores one."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io.arrays import (
    adjacency_of,
    features_of,
    labels_of,
    masks_of,
    row_normalized,
)


def dense(a: sp.csr_matrix) -> np.ndarray:
    return a.toarray()


def test_a_symmetric_edge_index_is_taken_as_it_is() -> None:
    e = np.array([[0, 1, 1, 2, 2, 2], [1, 0, 2, 1, 2, 2]])  # both ways, a repeated self loop
    a = adjacency_of(3, edge_index=e)
    expect = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=np.float32)
    np.testing.assert_array_equal(dense(a), expect)
    assert a.dtype == np.float32 and a.has_sorted_indices


def test_one_direction_becomes_both_and_repeats_are_one_edge() -> None:
    e = np.array([[0, 0, 0, 3], [1, 1, 2, 1]])
    a = adjacency_of(4, edge_index=e)
    assert (a != a.T).nnz == 0 and set(a.data) == {1.0}
    assert a.nnz == 6
    d = adjacency_of(4, edge_index=e, directed=True)
    assert d.nnz == 3 and d[0, 1] == 1 and d[1, 0] == 0


def test_weights_repeats_summed_symmetric_kept_asymmetric_refused() -> None:
    e = np.array([[0, 1, 0, 1], [1, 0, 1, 0]])
    a = adjacency_of(2, edge_index=e, edge_weight=np.array([1.5, 2.0, 0.5, 0.0]))
    assert a.dtype == np.float64 and a[0, 1] == 2.0 and a[1, 0] == 2.0
    with pytest.raises(InputError, match=r"^<g>: the edge weights are not symmetric"):
        adjacency_of(2, edge_index=e[:, :1], edge_weight=[1.0], source="<g>")
    d = adjacency_of(2, edge_index=e[:, :1], edge_weight=np.float32([3]), directed=True)
    assert d.dtype == np.float32 and d[0, 1] == 3


def test_a_scipy_matrix_is_a_pattern_unless_weighted() -> None:
    m = sp.csr_matrix(np.array([[0, 2.0, 0], [2.0, 0, 0], [0, 0, 7.0]]))
    assert set(adjacency_of(3, adjacency=m).data) == {1.0}
    w = adjacency_of(3, adjacency=m, weighted=True)
    assert w.nnz == 2 and w[0, 1] == 2.0  # the self loop dropped


@pytest.mark.parametrize("kwargs, words", [
    ({"edge_index": [[0, 3], [1, 0]]}, "vertex id 3 out of range"),
    ({"edge_index": [[0.0], [1.0]]}, "expected integer ids of shape"),
    ({"edge_index": [[0, 1, 2]]}, "expected integer ids of shape"),
    ({"edge_index": [[0], [1]], "edge_weight": [np.nan]}, "NaN or Inf"),
    ({"edge_index": [[0], [1]], "edge_weight": [1.0, 2.0]}, "one number per edge"),
    ({"adjacency": np.eye(3)}, "expected a SciPy sparse matrix"),
    ({"adjacency": sp.eye(2)}, "of shape \\(3, 3\\)"),
    ({}, "one of them"),
])
def test_bad_edges_are_one_line(kwargs: dict, words: str) -> None:
    with pytest.raises(InputError, match=words):
        adjacency_of(3, source="<g>", **kwargs)


def test_features_labels_and_masks_are_checked() -> None:
    x = features_of(np.arange(6, dtype=np.int64).reshape(3, 2), 3, "<g>")
    assert x.dtype == np.float32
    s = features_of(sp.coo_matrix(np.eye(3)), 3, "<g>")
    assert isinstance(s, sp.csr_matrix) and s.dtype == np.float32
    with pytest.raises(InputError, match=r"NaN or Inf \(first at vertex 1\)"):
        features_of(np.array([[0.0], [np.inf], [1.0]]), 3, "<g>")
    with pytest.raises(InputError, match=r"NaN or Inf \(first at vertex 2\)"):
        features_of(sp.csr_matrix(np.array([[1.0], [0], [np.nan]])), 3, "<g>")
    with pytest.raises(InputError, match=r"expected numbers of shape \(4, F\)"):
        features_of(np.ones((3, 2)), 4, "<g>")
    np.testing.assert_array_equal(labels_of(np.array([[2], [-5], [0]]), 3, "<g>"), [2, -1, 0])
    with pytest.raises(InputError, match="multi-label"):
        labels_of(np.full((3, 2), 2), 3, "<g>")
    y = np.array([0, -1, 1])
    m = masks_of({"train": [1, 0, 0], "val": [0, 0, 1], "test": [0, 0, 0]}, y, "<g>")
    assert m["train"].dtype == bool
    with pytest.raises(InputError, match="vertex 1 is in the val mask but unlabelled"):
        masks_of({"train": [1, 0, 0], "val": [0, 1, 0], "test": [0, 0, 0]}, y, "<g>")
    with pytest.raises(InputError, match="both the train and test masks"):
        masks_of({"train": [1, 0, 0], "val": [0, 0, 0], "test": [1, 0, 0]}, y, "<g>")
    with pytest.raises(InputError, match="no test mask"):
        masks_of({"train": [1, 0, 0], "val": [0, 0, 0]}, y, "<g>")


def test_row_normalized_divides_by_the_absolute_row_sum() -> None:
    x = np.array([[1.0, 3.0], [0.0, 0.0], [-1.0, 1.0]], dtype=np.float32)
    np.testing.assert_allclose(row_normalized(x), [[0.25, 0.75], [0, 0], [-0.5, 0.5]])
    s = row_normalized(sp.csr_matrix(x))
    assert isinstance(s, sp.csr_matrix) and s.dtype == np.float32
    np.testing.assert_array_equal(s.toarray(), row_normalized(x))
