"""A graph in memory (:class:`MemoryGraph`) reads as a file does, with or without weights."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io.memory import MemoryGraph

N = 6


def graph(a: sp.csr_matrix, directed: bool = False, **kwargs) -> MemoryGraph:
    masks = {m: np.arange(N) < 3 if m == "train" else np.zeros(N, bool)
             for m in ("train", "val", "test")}
    return MemoryGraph(a, np.ones((N, 2), np.float32), np.zeros(N, int), masks,
                       directed=directed, **kwargs)


def directed_matrix(dtype: type = np.float64) -> sp.csr_matrix:
    """Edges 0->1 (weights 4 and 2: a duplicate entry), 1->2 (16), 4->0 (1), 5->3 (-8)."""
    data = np.array([4, 2, 16, 1, -8], dtype=dtype)
    return sp.csr_matrix((data, [1, 1, 2, 0, 3], [0, 2, 3, 3, 3, 4, 5]), shape=(N, N))


@pytest.mark.parametrize("dtype, stored", [(np.float64, np.float64), (np.float32, np.float32),
                                           (np.int64, np.float32)])
def test_weights_are_read_as_a_file_reads_them(dtype: type, stored: type) -> None:
    a = directed_matrix(dtype)
    g = graph(a, directed=True, weighted=True)
    assert g.meta.weighted and g.meta.format_version == 2
    dense = np.zeros((N, N))
    dense[[0, 1, 4, 5], [1, 2, 0, 3]] = [6, 16, 1, -8]  # the duplicate's weights summed
    block = g.read_csr(1, 5, weights=True)
    assert block.dtype == stored
    np.testing.assert_array_equal(block.toarray(), dense[1:5])
    np.testing.assert_array_equal(g.read_csr(0, N, transpose=True, weights=True).toarray(),
                                  dense.T)
    ones = g.read_csr(0, N)  # the default: the pattern, float32 ones
    assert ones.dtype == np.float32
    np.testing.assert_array_equal(ones.toarray(), dense != 0)


def test_without_weights_nothing_changes() -> None:
    a = directed_matrix()
    before = a.copy()
    g = graph(a, directed=True)
    assert not g.meta.weighted and g.meta.format_version == 1
    for weights in (False, True):
        block = g.read_csr(0, N, weights=weights)
        assert block.dtype == np.float32 and (block.data == 1).all()
        np.testing.assert_array_equal(block.toarray(), before.toarray() != 0)
    assert (a != before).nnz == 0  # the caller's matrix is left alone


def test_symmetric_weights_undirected() -> None:
    a = directed_matrix()
    g = graph(a + a.T, weighted=True)
    w = g.read_csr(0, N, weights=True).toarray()
    np.testing.assert_array_equal(w, w.T)
    np.testing.assert_array_equal(g.read_csr(0, N, transpose=True, weights=True).toarray(), w)
    assert w[0, 1] == w[1, 0] == 6


@pytest.mark.parametrize("directed", [False, True])
def test_a_nan_weight_is_one_line_naming_its_row(directed: bool) -> None:
    a = directed_matrix()
    a[4, 0] = np.nan
    g = graph(a, directed=directed, weighted=True, name="toy")
    g.read_csr(0, N)  # the pattern alone reads
    g.read_csr(0, 4, weights=True)
    with pytest.raises(InputError, match=r"^<toy>: edge weights contain NaN or Inf "
                                         r"\(first in row 4 of 'adjacency'\)$"):
        g.read_csr(2, N, weights=True)
    if directed:
        with pytest.raises(InputError, match=r"\(first in row 0 of 'adjacency_t'\)$"):
            g.read_csr(0, N, transpose=True, weights=True)


def arrays(seed: int = 0, sparse: bool = False) -> dict:
    """A small graph's arrays as a PyG user holds them (both directions of each edge)."""
    from tests.graphs import random_graph_arrays

    g = random_graph_arrays(n=40, seed=seed, feature_density=0.3 if sparse else 1.0)
    e = np.stack([g["src"], g["dst"]])
    x = np.abs(g["x"])
    return dict(edge_index=np.concatenate([e, e[::-1]], axis=1),
                features=sp.csr_matrix(x) if sparse else x, labels=g["y"],
                train_mask=g["train"], val_mask=g["val"], test_mask=g["test"])


@pytest.mark.parametrize("sparse", [False, True])
def test_from_arrays_reads_as_the_file_prepare_writes(tmp_path, sparse: bool) -> None:
    from hpcgnn.io import GraphFile
    from hpcgnn.prepare.output import write_memory_graph

    g = MemoryGraph.from_arrays(**arrays(sparse=sparse), row_normalize=True, name="toy")
    assert g.meta.feature_normalization == "row" and (g.meta.feature_nnz is not None) == sparse
    write_memory_graph(tmp_path / "g.h5", g, source="test", started=0.0, show_progress=False)
    with GraphFile(tmp_path / "g.h5") as f:
        fm, gm = f.meta, g.meta
        for key in ("num_nodes", "num_edges", "num_features", "num_classes", "directed",
                    "feature_dtype", "feature_nnz", "feature_normalization", "weighted"):
            assert getattr(fm, key) == getattr(gm, key), key
        n = gm.num_nodes
        assert (f.read_csr(0, n) != g.read_csr(0, n)).nnz == 0
        np.testing.assert_array_equal(f.read_features(0, n), g.read_features(0, n))
        np.testing.assert_array_equal(f.read_labels(0, n), g.read_labels(0, n))
        for m in ("train", "val", "test"):
            np.testing.assert_array_equal(f.read_mask(m, 0, n), g.read_mask(m, 0, n))
    sums = g.read_features(0, n).sum(axis=1)  # non-negative rows: 1, or 0 for a zero row
    np.testing.assert_allclose(sums[sums != 0], 1, rtol=1e-6)


def test_from_arrays_checks_and_digests() -> None:
    a = arrays()
    g, same = MemoryGraph.from_arrays(**a), MemoryGraph.from_arrays(**a)
    assert g.digest() == same.digest()
    a["features"] = a["features"] + 1
    assert MemoryGraph.from_arrays(**a).digest() != g.digest()
    a["test_mask"] = a["train_mask"]
    with pytest.raises(InputError, match=r"^<memory>: masks overlap"):
        MemoryGraph.from_arrays(**a)
    np.testing.assert_array_equal(g.read_node_ids(3, 6), [3, 4, 5])
