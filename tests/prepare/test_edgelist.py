import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.io import GraphFile
from hpcgnn.prepare.edgelist import DistinctIds, convert_edgelist

SNAP = """\
# Directed graph (each unordered pair of nodes is saved once): example.txt
# Nodes: 6 Edges: 7
# FromNodeId\tToNodeId
10\t20
20\t35
35\t10
1000\t7
7\t10
% a KONECT-style comment
20 10
10\t10
"""
IDS = [7, 10, 20, 35, 1000]
# The edges above in relabelled ids (7 -> 0, 10 -> 1, 20 -> 2, 35 -> 3, 1000 -> 4).
RELABELLED = [(1, 2), (2, 3), (3, 1), (4, 0), (0, 1), (2, 1)]


def read_all(path):
    with GraphFile(path) as g:
        n = g.meta.num_nodes
        out = dict(meta=g.meta, a=g.read_csr(0, n), x=g.read_features(0, n),
                   y=g.read_labels(0, n), ids=g.read_node_ids(0, n),
                   **{m: g.read_mask(m, 0, n) for m in ("train", "val", "test")})
        if g.meta.directed:
            out["at"] = g.read_csr(0, n, transpose=True)
    return out


def edge_set(a):
    return set(zip(*a.nonzero(), strict=True))


def write(tmp_path, text, name="edges.txt"):
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["edges.txt", "edges.txt.gz"])
def test_relabels_sparse_ids_and_symmetrises(tmp_path, name):
    edges = write(tmp_path, SNAP, name)
    summary = convert_edgelist(edges, tmp_path / "g.h5", feature_dim=5, classes=2,
                               show_progress=False)
    g = read_all(tmp_path / "g.h5")
    assert g["ids"].tolist() == IDS
    assert g["meta"].name == "edges" and not g["meta"].directed
    expected = set(RELABELLED) | {(v, u) for u, v in RELABELLED}
    assert edge_set(g["a"]) == expected
    assert summary.num_edges == len(expected) and summary.edges_read == 7
    assert g["x"].shape == (5, 5) and g["meta"].num_classes == 2
    assert sorted(np.bincount(g["y"]).tolist()) == [2, 3]
    assert (g["train"] | g["val"] | g["test"]).all()


def test_directed_with_arrays(tmp_path):
    edges = write(tmp_path, SNAP)
    x = np.arange(15, dtype=np.float64).reshape(5, 3)
    y = np.array([0, 2, -1, 1, 2])
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    summary = convert_edgelist(edges, tmp_path / "g.h5", features=tmp_path / "x.npy",
                               labels=tmp_path / "y.npy", directed=True, name="toy",
                               train_frac=0.5, val_frac=0.25, show_progress=False)
    g = read_all(tmp_path / "g.h5")
    assert g["meta"].directed and g["meta"].name == "toy"
    assert edge_set(g["a"]) == set(RELABELLED)
    assert (g["at"] != g["a"].T.tocsr()).nnz == 0
    np.testing.assert_array_equal(g["x"], x.astype(np.float32))
    assert g["y"].tolist() == y.tolist() and g["meta"].num_classes == 3
    assert not (g["train"] | g["val"] | g["test"])[2]  # unlabelled
    assert (summary.train, summary.val, summary.test, summary.unlabelled) == (2, 1, 1, 1)


def test_sparse_npz_features_are_stored_as_csr(tmp_path):
    edges = write(tmp_path, SNAP)
    x = sp.random(5, 40, density=0.1, random_state=2, format="coo", dtype=np.float64)
    sp.save_npz(tmp_path / "x.npz", x)
    convert_edgelist(edges, tmp_path / "g.h5", features=tmp_path / "x.npz", show_progress=False)
    with GraphFile(tmp_path / "g.h5") as g:
        assert g.meta.feature_nnz == x.nnz and g.meta.num_features == 40
        stored = g.read_feature_csr(0, 5)
    assert stored.dtype == np.float32
    np.testing.assert_array_equal(stored.toarray(), x.toarray().astype(np.float32))


def test_a_bad_npz_is_an_input_error(tmp_path):
    edges = write(tmp_path, SNAP)
    np.savez(tmp_path / "x.npz", a=np.zeros(3))
    with pytest.raises(InputError, match=r"x\.npz: not a SciPy sparse matrix"):
        convert_edgelist(edges, tmp_path / "g.h5", features=tmp_path / "x.npz",
                         show_progress=False)
    sp.save_npz(tmp_path / "x.npz", sp.random(4, 3, density=0.5, format="csr"))
    with pytest.raises(InputError, match=r"features have shape \(4, 3\), expected \(5, F\)"):
        convert_edgelist(edges, tmp_path / "g.h5", features=tmp_path / "x.npz",
                         show_progress=False)


def test_num_nodes_keeps_ids_and_isolated_vertices(tmp_path):
    edges = write(tmp_path, "0 1\n1 2\n4,0\n")
    convert_edgelist(edges, tmp_path / "g.h5", num_nodes=6, show_progress=False)
    g = read_all(tmp_path / "g.h5")
    assert g["meta"].num_nodes == 6 and g["ids"].tolist() == list(range(6))
    assert np.diff(g["a"].indptr).tolist() == [2, 2, 1, 0, 1, 0]


def test_same_seed_same_file(tmp_path):
    edges = write(tmp_path, SNAP)
    convert_edgelist(edges, tmp_path / "a.h5", seed=5, show_progress=False)
    convert_edgelist(edges, tmp_path / "b.h5", seed=5, show_progress=False)
    a, b = read_all(tmp_path / "a.h5"), read_all(tmp_path / "b.h5")
    for key in ("x", "y", "train", "val", "test"):
        np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize(
    "text, kwargs, error, match",
    [
        ("0 1\n1 x\n", {}, InputError, r"edges\.txt, line 2: 'x' is not an integer"),
        ("0 1\n2\n", {}, InputError, r"line 2: expected at least 2 values, got 1"),
        ("0 1\n-3 1\n", {}, InputError, "negative vertex id -3"),
        ("0 1\n1 9\n", dict(num_nodes=5), InputError, "vertex id 9 is not below --num-nodes 5"),
        ("# only comments\n", {}, InputError, "no edges"),
        ("0 1\n", dict(train_frac=0.8, val_frac=0.5), ConfigError, "exceeds 1"),
        ("0 1\n", dict(feature_dim=0), ConfigError, "--feature-dim"),
    ],
)
def test_bad_input_is_reported(tmp_path, text, kwargs, error, match):
    edges = write(tmp_path, text)
    with pytest.raises(error, match=match):
        convert_edgelist(edges, tmp_path / "g.h5", show_progress=False, **kwargs)
    assert not (tmp_path / "g.h5").exists()


@pytest.mark.parametrize(
    "array, option, match",
    [
        (np.zeros((4, 2)), "features", r"x\.npy: features have shape \(4, 2\), expected \(5, F\)"),
        (np.zeros(6, dtype=int), "labels", r"x\.npy: labels have shape \(6,\), expected \(5,\)"),
        (np.array([0.5, 1, 1, 1, 1]), "labels", r"x\.npy: label 0\.5 is not an integer class id"),
    ],
)
def test_array_mismatches_are_input_errors(tmp_path, array, option, match):
    edges = write(tmp_path, SNAP)
    np.save(tmp_path / "x.npy", array)
    with pytest.raises(InputError, match=match):
        convert_edgelist(edges, tmp_path / "g.h5", show_progress=False,
                         **{option: tmp_path / "x.npy"})


def test_labels_must_fit_classes(tmp_path):
    edges = write(tmp_path, SNAP)
    np.save(tmp_path / "y.npy", np.array([0, 1, 2, 3, 4]))
    with pytest.raises(ConfigError, match="label 4 does not fit --classes 3"):
        convert_edgelist(edges, tmp_path / "g.h5", labels=tmp_path / "y.npy", classes=3,
                         show_progress=False)


def test_distinct_ids_merge_batches():
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, 10**12, 1000) for _ in range(5)] + [np.array([5, 5, 3])]
    ids = DistinctIds()
    for batch in batches:
        ids.add(batch)
    np.testing.assert_array_equal(ids.sorted(), np.unique(np.concatenate(batches)))


# -- weighted edge lists --------------------------------------------------------------------
WEIGHTED = """\
# u v weight
10 20 0.5
20 35 2
35 10 0.25
1000,7,1.5
7 10 -0.125
20 10 0.75
10 20 1.25
10 10 8
"""
# The lines above in relabelled ids (7 -> 0, 10 -> 1, 20 -> 2, 35 -> 3, 1000 -> 4).
WEIGHTED_EDGES = [(1, 2, 0.5), (2, 3, 2.0), (3, 1, 0.25), (4, 0, 1.5), (0, 1, -0.125),
                  (2, 1, 0.75), (1, 2, 1.25), (1, 1, 8.0)]


def scipy_reference(edges, n, directed):
    """The weighted ``A`` built directly: both directions if undirected, duplicates summed,
    self loops dropped."""
    src, dst, w = (np.array(c) for c in zip(*edges, strict=True))
    if not directed:
        src, dst, w = np.r_[src, dst], np.r_[dst, src], np.r_[w, w]
    keep = src != dst
    return sp.coo_matrix((w[keep], (src[keep], dst[keep])), shape=(n, n)).toarray()


@pytest.mark.parametrize("directed", [False, True])
def test_a_weighted_edge_list_round_trips(tmp_path, directed):
    edges = write(tmp_path, WEIGHTED)
    summary = convert_edgelist(edges, tmp_path / "g.h5", directed=directed, show_progress=False)
    expected = scipy_reference(WEIGHTED_EDGES, 5, directed)
    with GraphFile(tmp_path / "g.h5") as g:
        assert g.meta.weighted and g.meta.format_version == 2
        a = g.read_csr(0, 5, weights=True)
        at = g.read_csr(0, 5, transpose=True, weights=True)
        pattern = g.read_csr(0, 5)
        assert g.read_node_ids(0, 5).tolist() == IDS
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a.toarray(), expected)  # exact: the weights are dyadic
    np.testing.assert_array_equal(at.toarray(), expected.T)
    assert (pattern.data == 1).all() and (pattern != (a != 0)).nnz == 0
    assert summary.weighted and summary.num_edges == np.count_nonzero(expected)
    assert "weighted edges" in summary.describe() and "weights of duplicates summed" in (
        summary.describe()
    )
    if not directed:
        assert a[1, 2] == a[2, 1] == 0.5 + 0.75 + 1.25  # three records of one edge, summed


@pytest.mark.parametrize("directed", [False, True])
def test_random_weights_match_scipy(tmp_path, directed):
    rng = np.random.default_rng(3)
    m, n = 400, 30
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    w = rng.normal(size=m) * 10.0 ** rng.integers(-3, 4, m)
    edges = tmp_path / "e.txt"
    edges.write_text("".join(f"{u}\t{v}\t{x:.17g}\n" for u, v, x in zip(src, dst, w, strict=True)))
    convert_edgelist(edges, tmp_path / "g.h5", directed=directed, num_nodes=n,
                     show_progress=False)
    w32 = w.astype(np.float32).astype(np.float64)  # as parsed
    expected = scipy_reference(list(zip(src, dst, w32, strict=True)), n, directed)
    with GraphFile(tmp_path / "g.h5") as g:
        a = g.read_csr(0, n, weights=True).toarray()
    np.testing.assert_allclose(a, expected, rtol=1e-6, atol=1e-6)
    if not directed:
        np.testing.assert_array_equal(a, a.T)  # bit for bit


def test_an_unweighted_edge_list_is_version_1(tmp_path):
    edges = write(tmp_path, SNAP)
    summary = convert_edgelist(edges, tmp_path / "g.h5", show_progress=False)
    with GraphFile(tmp_path / "g.h5") as g:
        assert not g.meta.weighted and g.meta.format_version == 1
        a = g.read_csr(0, 5)
        assert a.dtype == np.float32 and (a.data == 1).all()
        assert (g.read_csr(0, 5, weights=True) != a).nnz == 0
    assert not summary.weighted and "weighted edges" not in summary.describe()


def test_columns_after_the_weight_are_ignored(tmp_path):
    edges = write(tmp_path, "0 1 0.5 1999\n1 2 4 2001 x\n")
    convert_edgelist(edges, tmp_path / "g.h5", directed=True, show_progress=False)
    with GraphFile(tmp_path / "g.h5") as g:
        np.testing.assert_array_equal(
            g.read_csr(0, 3, weights=True).toarray(), [[0, 0.5, 0], [0, 0, 4], [0, 0, 0]]
        )


@pytest.mark.parametrize(
    "text, match",
    [
        ("0 1\n1 2\n# c\n2 3 0.5\n",
         r"^\S*edges\.txt, line 4: a weight, but the first line has none \(a weight on every "
         r"line or on none\): '2 3 0\.5' \(edge list\)$"),
        ("0 1 0.5\n\n1 2\n",
         r"^\S*edges\.txt, line 3: no weight, but the first line has one \(a weight on every "
         r"line or on none\): '1 2' \(edge list\)$"),
        ("0 1 0.5\n1 2 nan\n", r"line 2: weight nan is not a finite float32: '1 2 nan'"),
        ("0 1 0.5\n1 2 -inf\n", r"line 2: weight -inf is not a finite float32"),
        ("0 1 0.5\n1 2 1e39\n", r"line 2: weight 1e39 is not a finite float32"),
        ("0 1 0.5\n1 2 heavy\n", r"line 2: 'heavy' is not a number: '1 2 heavy'"),
        ("0 1 0.5\n1 x 2\n", r"line 2: 'x' is not an integer"),
        ("0 1 0.5\n3\n", r"line 2: expected at least 2 values, got 1"),
        ("0 1 3e38\n0 1 3e38\n",
         r"^the weights of the repeated edge 0 -> 1 sum to 6e\+38, beyond float32$"),
    ],
    ids=["weight-later", "weight-missing", "nan", "inf", "overflow", "word", "bad-id",
         "short", "sum-overflow"],
)
def test_bad_weights_are_one_line(tmp_path, text, match):
    edges = write(tmp_path, text)
    with pytest.raises(InputError, match=match) as err:
        convert_edgelist(edges, tmp_path / "g.h5", show_progress=False)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "g.h5").exists()
