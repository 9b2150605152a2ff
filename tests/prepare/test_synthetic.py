import numpy as np
import pytest

from hpcgnn.errors import ConfigError
from hpcgnn.io import GraphFile
from hpcgnn.prepare.synthetic import SyntheticSpec, generate, rmat_edges


def read_all(path):
    with GraphFile(path) as g:
        n = g.meta.num_nodes
        out = {
            "meta": g.meta,
            "a": g.read_csr(0, n),
            "x": g.read_features(0, n),
            "y": g.read_labels(0, n),
            "ids": g.read_node_ids(0, n),
            **{m: g.read_mask(m, 0, n) for m in ("train", "val", "test")},
        }
        if g.meta.directed:
            out["at"] = g.read_csr(0, n, transpose=True)
    return out


def make(tmp_path, name, **kwargs):
    params = dict(generator="sbm", nodes=2000, avg_degree=8, features=8, classes=4)
    params.update(kwargs)
    summary = generate(SyntheticSpec(**params), tmp_path / name, show_progress=False)
    return summary, read_all(tmp_path / name)


def assert_same(a, b):
    assert (a["a"] != b["a"]).nnz == 0
    for key in ("x", "y", "ids", "train", "val", "test"):
        np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("generator", ["sbm", "rmat"])
@pytest.mark.parametrize("directed", [False, True])
def test_same_seed_gives_identical_dataset(tmp_path, generator, directed):
    _, first = make(tmp_path, "a.h5", generator=generator, directed=directed, seed=3)
    _, again = make(tmp_path, "b.h5", generator=generator, directed=directed, seed=3)
    _, other = make(tmp_path, "c.h5", generator=generator, directed=directed, seed=4)
    assert_same(first, again)
    if directed:
        assert (first["at"] != again["at"]).nnz == 0
    assert (first["a"] != other["a"]).nnz > 0
    assert not np.array_equal(first["x"], other["x"])


def test_sbm_has_requested_homophily_degree_and_split(tmp_path):
    summary, g = make(tmp_path, "g.h5", nodes=3000, avg_degree=10, classes=5,
                      intra_fraction=0.7)
    a, y = g["a"].tocoo(), g["y"]
    assert summary.num_edges == a.nnz == g["meta"].num_edges
    assert (a != a.T).nnz == 0
    assert a.diagonal().sum() == 0
    intra = np.mean(y[a.row] == y[a.col])
    assert abs(intra - 0.7) < 0.03
    assert 9.5 < a.nnz / 3000 <= 10
    assert np.bincount(y).tolist() == [600] * 5
    train, val, test = g["train"], g["val"], g["test"]
    assert (train.sum(), val.sum(), test.sum()) == (1800, 600, 600)
    assert not (train & val).any() and not (train & test).any() and not (val & test).any()
    assert (train | val | test).all()
    assert g["x"].dtype == np.float32 and g["y"].dtype == np.int64


def test_sbm_features_separate_classes_but_not_perfectly(tmp_path):
    _, g = make(tmp_path, "g.h5", nodes=4000, features=16, classes=4)
    x, y, train, test = g["x"], g["y"], g["train"], g["test"]
    means = np.stack([x[train & (y == c)].mean(axis=0) for c in range(4)])
    pred = np.argmin(((x[test, None, :] - means[None]) ** 2).sum(-1), axis=1)
    accuracy = np.mean(pred == y[test])
    assert 0.3 < accuracy < 0.95  # chance is 0.25


def test_rmat_degrees_are_skewed_and_ids_scrambled(tmp_path):
    n = 5000  # not a power of two: ids >= n are rejected
    summary, g = make(tmp_path, "g.h5", generator="rmat", nodes=n, avg_degree=16)
    a = g["a"]
    degree = np.diff(a.indptr)
    assert a.indices.max() < n
    assert summary.edges_read == n * 16 // 2
    assert summary.num_edges < 2 * summary.edges_read  # duplicates were dropped
    assert degree.max() > 10 * degree.mean()
    assert abs(np.corrcoef(np.arange(n), degree)[0, 1]) < 0.1


def test_rmat_directed_stores_transpose(tmp_path):
    summary, g = make(tmp_path, "g.h5", generator="rmat", nodes=1024, avg_degree=6,
                      directed=True)
    assert g["meta"].directed and summary.directed
    assert (g["at"] != g["a"].T.tocsr()).nnz == 0
    assert (g["a"] != g["a"].T).nnz > 0


def test_rmat_edges_yield_exactly_the_requested_count():
    rng, perm_rng = np.random.default_rng(0), np.random.default_rng(1)
    chunks = list(rmat_edges(1025, 10_000, rng, perm_rng))
    src = np.concatenate([s for s, _ in chunks])
    dst = np.concatenate([d for _, d in chunks])
    assert src.size == dst.size == 10_000
    assert src.max() < 1025 and dst.max() < 1025 and min(src.min(), dst.min()) >= 0


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(nodes=1), "--nodes"),
        (dict(avg_degree=0), "--avg-degree"),
        (dict(avg_degree=5000), "--avg-degree"),
        (dict(features=0), "--features"),
        (dict(classes=0), "--classes"),
        (dict(seed=-1), "--seed"),
        (dict(intra_fraction=1.5), "--intra-fraction"),
        (dict(feature_noise=float("nan")), "--feature-noise"),
        (dict(train_frac=0.9, val_frac=0.2), "exceeds 1"),
        (dict(generator="er"), "unknown generator"),
    ],
)
def test_invalid_parameters_raise_config_error(tmp_path, change, match):
    params = dict(generator="sbm", nodes=100, avg_degree=4, features=4, classes=2)
    params.update(change)
    with pytest.raises(ConfigError, match=match):
        generate(SyntheticSpec(**params), tmp_path / "g.h5", show_progress=False)
    assert not (tmp_path / "g.h5").exists()
