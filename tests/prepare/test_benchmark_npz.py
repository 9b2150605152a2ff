"""``hpcgnn prepare npz``: the benchmark ``.npz`` layout (Shchur et al., nettack)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import GraphFile
from hpcgnn.prepare.benchmark_npz import convert_benchmark_npz, npz_graph
from hpcgnn.prepare.splits import SplitSpec

N = 60
PER_CLASS = SplitSpec("per-class", seed=1, train_per_class=5, val_size=10, test_size=20)


def members(dense_attr: bool = False, weights: bool = False) -> dict:
    """A directed citation-like graph as the benchmark files store one, with their extras."""
    rng = np.random.default_rng(0)
    a = sp.random(N, N, density=0.05, format="csr", random_state=1)
    a.data[:] = rng.uniform(0.5, 2.0, a.nnz) if weights else 1.0
    x = sp.random(N, 30, density=0.2, format="csr", random_state=2)
    x.data[:] = 1.0
    out = dict(adj_data=a.data, adj_indices=a.indices, adj_indptr=a.indptr,
               adj_shape=np.array(a.shape), labels=rng.integers(0, 3, N),
               idx_to_node=np.array([{"never": "read"}], dtype=object))  # needs pickle
    if dense_attr:
        out["attr_matrix"] = x.toarray()
    else:
        out |= dict(attr_data=x.data, attr_indices=x.indices, attr_indptr=x.indptr,
                    attr_shape=np.array(x.shape))
    return out


def save(tmp_path: Path, **arrays) -> Path:
    np.savez(tmp_path / "g.npz", **arrays)
    return tmp_path / "g.npz"


@pytest.mark.parametrize("dense_attr", [False, True])
def test_the_layout_converts_undirected_with_a_per_class_split(tmp_path, dense_attr) -> None:
    m = members(dense_attr)
    summary = convert_benchmark_npz(save(tmp_path, **m), tmp_path / "g.h5", split=PER_CLASS,
                                    row_normalize=True, show_progress=False)
    assert (summary.train, summary.val, summary.test) == (15, 10, 20)
    a = sp.csr_matrix((m["adj_data"], m["adj_indices"], m["adj_indptr"]), shape=(N, N))
    expect = ((a + a.T) != 0).toarray()
    np.fill_diagonal(expect, False)
    with GraphFile(tmp_path / "g.h5") as f:
        assert not f.meta.weighted and f.meta.name == "g"
        assert (f.meta.feature_nnz is None) == dense_attr
        assert f.meta.feature_normalization == "row"
        np.testing.assert_array_equal(f.read_csr(0, N).toarray(), expect)
        np.testing.assert_array_equal(f.read_labels(0, N), m["labels"])
        x = f.read_features(0, N)
    rows = x.sum(axis=1)
    np.testing.assert_allclose(rows[rows != 0], 1, rtol=1e-6)


def test_directed_and_weighted(tmp_path: Path) -> None:
    m = members(weights=True)
    with pytest.raises(InputError, match="edge weights are not symmetric"):
        npz_graph(save(tmp_path, **m), PER_CLASS)
    g = npz_graph(tmp_path / "g.npz", PER_CLASS, directed=True)
    a = sp.csr_matrix((m["adj_data"], m["adj_indices"], m["adj_indptr"]), shape=(N, N))
    a.setdiag(0)
    a.eliminate_zeros()
    assert g.meta.weighted and g.meta.directed
    np.testing.assert_allclose(g.read_csr(0, N, weights=True).toarray(), a.toarray())


def test_masks_in_the_file_are_the_given_split(tmp_path: Path) -> None:
    m = members()
    idx = np.arange(N)
    m |= dict(train_mask=idx < 10, val_mask=(idx >= 10) & (idx < 20), test_mask=idx >= 40)
    g = npz_graph(save(tmp_path, **m), SplitSpec())
    np.testing.assert_array_equal(g.read_mask("test", 0, N), idx >= 40)


@pytest.mark.parametrize("change, words", [
    (lambda m: m.pop("labels"), r"no array 'labels' \(the benchmark layout"),
    (lambda m: [m.pop(k) for k in ("attr_data", "attr_indices", "attr_indptr",
                                   "attr_shape")], "no features"),
    (lambda m: m.update(adj_shape=np.array([N, N + 1])), "expected a square matrix"),
    (lambda m: m.update(adj_indices=m["adj_indices"] + N), "is not a CSR matrix"),
    (lambda m: m.update(labels=np.full((N, 2), 2)), "multi-label target 2 .* not 0 or 1"),
])
def test_a_broken_file_is_one_line(tmp_path, change, words) -> None:
    m = members()
    change(m)
    with pytest.raises(InputError, match=words):
        npz_graph(save(tmp_path, **m), PER_CLASS)


def test_the_split_is_asked_for_and_not_a_zip(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no train/val/test masks; draw them with --split"):
        npz_graph(save(tmp_path, **members()), SplitSpec())
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match=r"not a readable \.npz archive"):
        npz_graph(tmp_path / "bad.npz", PER_CLASS)


def test_a_label_matrix_is_written_as_multi_label_targets(tmp_path) -> None:
    m = members()
    m["labels"] = (np.random.default_rng(5).random((N, 3)) < 0.5).astype(np.int64)
    summary = convert_benchmark_npz(save(tmp_path, **m), tmp_path / "g.h5",
                                    split=SplitSpec("random", seed=1), show_progress=False)
    assert summary.unlabelled == 0 and summary.train + summary.val + summary.test == N
    with GraphFile(tmp_path / "g.h5") as f:
        assert f.meta.multi_label and f.meta.num_classes == 3
        np.testing.assert_array_equal(f.read_labels(0, N), m["labels"])
