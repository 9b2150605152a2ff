"""Edge weights through :class:`EdgeSorter`, :class:`GraphFileWriter` and :class:`GraphFile`."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import EdgeSorter, GraphFile, GraphFileWriter, edges
from hpcgnn.io import format as fmt
from hpcgnn.io.edges import CsrRows, summed_duplicates
from hpcgnn.io.validate import edge_fingerprint, edges_problem, validate_file
from tests.graphs import add_weights, edge_weights, random_graph_arrays, write_random_graph

N = 50


def weighted_reference(g: dict, w: np.ndarray) -> sp.csr_matrix:
    """``A`` with its weights built by SciPy: both directions if undirected, duplicates
    summed (in float64), self loops dropped."""
    src, dst, w = g["src"], g["dst"], w.astype(np.float64)
    if not g["directed"]:
        src, dst, w = np.r_[src, dst], np.r_[dst, src], np.r_[w, w]
    keep = src != dst
    a = sp.coo_matrix((w[keep], (src[keep], dst[keep])), shape=(g["n"], g["n"])).tocsr()
    a.sum_duplicates()
    return a


def _write(path: Path, sorter: EdgeSorter, n: int) -> None:
    with GraphFileWriter(path, num_nodes=n, num_features=1, num_classes=1,
                         directed=sorter.directed, show_progress=False,
                         weight_dtype=sorter.weight_dtype) as w:
        w.write_adjacency(sorter)
        w.write_features(0, np.zeros((n, 1)))
        w.write_labels(np.zeros(n, int))
        w.write_masks(np.ones(n, bool), np.zeros(n, bool), np.zeros(n, bool))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("directed", [False, True])
def test_weights_round_trip_against_scipy(tmp_path: Path, directed: bool, dtype: type) -> None:
    g = random_graph_arrays(n=N, directed=directed, seed=1)
    assert len(set(zip(g["src"], g["dst"], strict=True))) < len(g["src"])  # has duplicates
    path = write_random_graph(tmp_path / "g.h5", n=N, directed=directed, seed=1, weights=dtype)
    ref = weighted_reference(g, edge_weights(g, dtype))
    with GraphFile(path) as f:
        assert f.meta.weighted and f.meta.format_version == fmt.WEIGHTED_VERSION == 2
        a, at = f.read_csr(0, N, weights=True), f.read_csr(0, N, transpose=True, weights=True)
        assert a.dtype == at.dtype == dtype
        np.testing.assert_allclose(a.toarray(), ref.toarray(), rtol=1e-6)
        assert (a.T != at).nnz == 0  # A^T holds the same weights, bit for bit
        if not directed:
            assert (a != a.T).nnz == 0  # symmetric, weights and all
        ones = f.read_csr(0, N)  # the default: the pattern, float32 ones, as before
        assert ones.dtype == np.float32 and (ones.data == 1).all()
        np.testing.assert_array_equal(ones.indices, a.indices)
        for lo, hi in [(0, 7), (7, 30), (30, N), (13, 13)]:
            block = f.read_csr(lo, hi, weights=True)
            np.testing.assert_array_equal(block.toarray(), a.toarray()[lo:hi])
    with h5py.File(path, "r") as h5:
        groups = ["adjacency", "adjacency_t"] if directed else ["adjacency"]
        for name in groups:
            data = h5[f"{name}/data"]
            assert data.dtype == dtype and data.shape == h5[f"{name}/indices"].shape
            assert data.chunks is not None and data.compression == fmt.COMPRESSION
        assert "adjacency_t" not in h5 or directed
    report = validate_file(path, show_progress=False)
    assert report.meta.weighted and report.to_dict()["weighted"] is True


def test_duplicates_are_summed_the_same_way_in_every_direction(tmp_path: Path) -> None:
    src = np.array([0, 1, 0, 2, 3, 1, 0])
    dst = np.array([1, 0, 1, 2, 1, 3, 1])
    w = np.array([0.1, 0.2, 0.3, 5.0, 0.7, 0.11, 1e-3], dtype=np.float32)
    expect = np.float32(np.sort(w[[0, 1, 2, 6]]).astype(np.float64).sum())
    with EdgeSorter(4, directed=False, weights=np.float32) as s:
        s.add(src, dst, weights=w)
        _write(tmp_path / "u.h5", s, 4)
    with EdgeSorter(4, directed=True, weights=np.float32) as s:
        s.add(src, dst, weights=w)
        _write(tmp_path / "d.h5", s, 4)
    with GraphFile(tmp_path / "u.h5") as f:
        a = f.read_csr(0, 4, weights=True).toarray()
    assert a[0, 1] == a[1, 0] == expect  # 0-1 four times, in both directions
    assert a[1, 3] == a[3, 1] == np.float32(np.float64(w[5]) + w[4])
    assert a[2, 2] == 0  # the self loop is dropped, weight and all
    with GraphFile(tmp_path / "d.h5") as f:
        a = f.read_csr(0, 4, weights=True).toarray()
        at = f.read_csr(0, 4, transpose=True, weights=True).toarray()
    assert a[0, 1] == np.float32(np.sort(w[[0, 2, 6]]).astype(np.float64).sum())
    assert a[1, 0] == w[1]
    np.testing.assert_array_equal(at, a.T)
    validate_file(tmp_path / "u.h5", show_progress=False)
    validate_file(tmp_path / "d.h5", show_progress=False)


def test_the_sum_does_not_depend_on_the_order_of_the_records() -> None:
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 5, 200)
    w = rng.normal(size=200) * 10.0 ** rng.integers(-8, 8, 200)
    first_keys, first = summed_duplicates(keys.copy(), w.copy())
    for _ in range(5):
        order = rng.permutation(200)
        k, s = summed_duplicates(keys[order], w[order])
        np.testing.assert_array_equal(k, first_keys)
        assert s.tobytes() == first.tobytes()


def test_many_buckets_give_the_same_weights(tmp_path: Path, monkeypatch) -> None:
    one = write_random_graph(tmp_path / "one.h5", n=90, directed=True, seed=4, weights=np.float32)
    monkeypatch.setattr(edges, "EDGES_PER_BUCKET", 16)
    many = write_random_graph(tmp_path / "many.h5", n=90, directed=True, seed=4,
                              weights=np.float32)
    with GraphFile(one) as f1, GraphFile(many) as f2:
        for t in (False, True):
            a, b = f1.read_csr(0, 90, t, weights=True), f2.read_csr(0, 90, t, weights=True)
            assert (a != b).nnz == 0


def test_an_unweighted_file_stays_version_1_without_data(tmp_path: Path) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=N, directed=True)
    with h5py.File(path, "r") as h5:
        assert h5.attrs["format_version"] == 1
        assert "data" not in h5["adjacency"] and "data" not in h5["adjacency_t"]
    with GraphFile(path) as f:
        assert not f.meta.weighted and f.meta.format_version == 1
        for t in (False, True):
            ones = f.read_csr(0, N, t, weights=True)  # no weights stored: ones
            assert ones.dtype == np.float32 and (ones.data == 1).all()
            assert (ones != f.read_csr(0, N, t)).nnz == 0


def test_the_sorter_checks_its_weights() -> None:
    with EdgeSorter(3, directed=False, weights=np.float32) as s:
        with pytest.raises(InputError, match=r"^e\.txt: edge weight nan is not a finite float32$"):
            s.add(np.array([0, 1]), np.array([1, 2]), "e.txt", weights=np.array([1.0, np.nan]))
        with pytest.raises(InputError, match=r"^edge weight 1e\+40 is not a finite float32$"):
            s.add(np.array([0]), np.array([1]), weights=np.array([1e40]))
        with pytest.raises(InputError, match="edge weights and endpoints differ in length"):
            s.add(np.array([0]), np.array([1]), weights=np.array([1.0, 2.0]))
        with pytest.raises(ValueError, match="takes weights"):
            s.add(np.array([0]), np.array([1]))
    with EdgeSorter(3, directed=False) as s, pytest.raises(ValueError, match="takes weights"):
        s.add(np.array([0]), np.array([1]), weights=np.array([1.0]))


def test_a_sum_beyond_the_weight_dtype_is_one_error() -> None:
    with EdgeSorter(3, directed=True, weights=np.float32) as s:
        s.add(np.array([0, 0]), np.array([2, 2]), weights=np.array([3e38, 3e38]))
        with pytest.raises(InputError, match=r"^the weights of the repeated edge 0 -> 2 sum to "
                                             r"6e\+38, beyond float32$"):
            list(s.rows())


def test_the_writer_checks_its_weights(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="edge weights must be float32 or float64, got int64"):
        GraphFileWriter(tmp_path / "g.h5", num_nodes=2, num_features=1, num_classes=1,
                        directed=False, weight_dtype=np.int64)
    w = GraphFileWriter(tmp_path / "g.h5", num_nodes=2, num_features=1, num_classes=1,
                        directed=False, show_progress=False, weight_dtype=np.float32)
    rows = CsrRows(0, np.array([1, 1]), np.array([1, 0]), np.array([1.0, np.inf]))
    with pytest.raises(InputError, match=r"^edge weights contain NaN or Inf$"):
        w.write_csr(fmt.ADJACENCY, [rows])
    w.abort()
    assert not (tmp_path / "g.h5").exists()


@pytest.mark.parametrize("directed", [False, True])
def test_a_nan_weight_is_one_line_naming_its_row(tmp_path: Path, directed: bool) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=N, directed=directed, seed=2,
                              weights=np.float32)
    group = "adjacency_t" if directed else "adjacency"
    with h5py.File(path, "r+") as h5:
        h5[f"{group}/data"][h5[f"{group}/indptr"][23] + 1] = -np.inf
    with GraphFile(path) as f:
        f.read_csr(0, N, transpose=True)  # the pattern alone reads
        f.read_csr(0, 23, transpose=True, weights=True)
        with pytest.raises(InputError) as err:
            f.read_csr(10, N, transpose=True, weights=True)
    assert str(err.value) == (
        f"{path}: edge weights contain NaN or Inf (first in row 23 of '{group}')"
    )
    with pytest.raises(InputError, match=r"NaN or Inf \(first in row 23 of"):
        validate_file(path, show_progress=False)


def _replace_data(h5: h5py.File, data: np.ndarray) -> None:
    del h5["adjacency/data"]
    h5.create_dataset("adjacency/data", data=data)


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda h5: h5.attrs.__setitem__("format_version", 1),
         "has edge weights ('adjacency/data') but format version 1; weighted files are version 2"),
        (lambda h5: h5.__delitem__("adjacency_t/data"), "missing dataset 'adjacency_t/data'"),
        (lambda h5: h5.__delitem__("adjacency/data"),
         "has 'adjacency_t/data' but no 'adjacency/data'"),
        (lambda h5: _replace_data(h5, np.ones(3, np.float32)),
         "dataset 'adjacency/data' has shape (3,), expected"),
        (lambda h5: _replace_data(h5, h5["adjacency/indices"][()]),
         "dataset 'adjacency/data' has dtype int32, expected kind 'f'"),
    ],
    ids=["version-1", "no-transposed-weights", "only-transposed-weights", "shape", "dtype"],
)
def test_the_header_of_a_weighted_file_is_checked(tmp_path: Path, change, words: str) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=20, directed=True)
    add_weights(path)
    with h5py.File(path, "r+") as h5:
        change(h5)
    with pytest.raises(InputError) as err:
        GraphFile(path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_newer_version_than_3_is_refused(tmp_path: Path) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=20)
    with h5py.File(path, "r+") as h5:
        h5.attrs["format_version"] = 4
    with pytest.raises(InputError, match=r"format version 4 is newer than this hpcgnn reads \(3\)"):
        GraphFile(path)


def test_the_weighted_fingerprint_sees_each_weight_not_its_width() -> None:
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 50, 180), rng.integers(0, 50, 180)
    w = rng.random(180).astype(np.float32)
    whole = edge_fingerprint(src, dst, 50, w)
    assert whole != edge_fingerprint(src, dst, 50)
    assert edge_fingerprint(src, dst, 50, w.astype(np.float64)) == whole
    order = rng.permutation(180)
    assert edge_fingerprint(src[order], dst[order], 50, w[order]) == whole
    other = w.copy()
    other[7] = np.nextafter(other[7], np.float32(2))
    assert edge_fingerprint(src, dst, 50, other) != whole
    zeros = np.zeros(180)
    assert edge_fingerprint(src, dst, 50, -zeros) == edge_fingerprint(src, dst, 50, zeros)
    assert edges_problem(False, 1, 1, (2, 2)) is None
    assert "not symmetric in its weights" in str(edges_problem(False, 1, 1, (2, 3)))
    assert "'adjacency_t/data' is not the transpose" in str(edges_problem(True, 1, 1, (2, 3)))
    assert "(the edges differ)" in str(edges_problem(True, 1, 2, (2, 3)))  # edges first
