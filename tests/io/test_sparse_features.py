"""Features stored as CSR (``features_csr``): written, read by blocks, checked, partitioned."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import GraphFile
from hpcgnn.io import format as fmt
from hpcgnn.io.validate import validate_file
from tests.graphs import random_graph_arrays, write_random_graph

KW = dict(n=50, features=20, feature_density=0.2, seed=4)


def sparse_file(tmp_path: Path) -> Path:
    return write_random_graph(tmp_path / "s.h5", sparse_features=True, **KW)


def test_sparse_round_trip_and_blocks(tmp_path: Path) -> None:
    x = random_graph_arrays(**KW)["x"]
    with GraphFile(sparse_file(tmp_path)) as f:
        assert fmt.FEATURES not in f._h5 and fmt.FEATURES_CSR in f._h5
        assert f.meta.feature_nnz == np.count_nonzero(x)
        np.testing.assert_array_equal(f.read_features(0, 50), x)
        for lo, hi in [(0, 7), (7, 30), (30, 50), (13, 13)]:
            block = f.read_feature_csr(lo, hi)
            assert sp.issparse(block) and block.shape == (hi - lo, 20)
            np.testing.assert_array_equal(block.toarray(), x[lo:hi])
    with GraphFile(write_random_graph(tmp_path / "d.h5", **KW)) as f:  # a dense file
        assert f.meta.feature_nnz is None
        np.testing.assert_array_equal(f.read_feature_csr(3, 9).toarray(), x[3:9])
    report = validate_file(tmp_path / "s.h5", show_progress=False)
    assert report.to_dict()["feature_nonzeros"] == np.count_nonzero(x)


def _spoil(path: Path, change) -> None:
    with h5py.File(path, "r+") as h5:
        change(h5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda h5: h5[f"{fmt.FEATURES_CSR}/{fmt.DATA}"].__setitem__(3, np.nan),
         "features contain NaN or Inf (first at vertex"),
        (lambda h5: h5[f"{fmt.FEATURES_CSR}/{fmt.INDICES}"].__setitem__(0, 20),
         "feature column 20 out of range [0, 20)"),
        (lambda h5: h5[f"{fmt.FEATURES_CSR}/{fmt.INDPTR}"].__setitem__(5, 10**6),
         "is not monotone"),
        (lambda h5: h5.create_dataset(fmt.FEATURES, data=np.zeros((50, 20), np.float32)),
         "has both 'features' and 'features_csr' (one expected)"),
        (lambda h5: h5.__delitem__(fmt.FEATURES_CSR),
         "missing dataset 'features' (or group 'features_csr')"),
    ],
    ids=["nan", "column", "indptr", "both", "neither"],
)
def test_a_broken_csr_is_one_input_error(tmp_path: Path, change, message) -> None:
    path = sparse_file(tmp_path)
    _spoil(path, change)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        validate_file(path, show_progress=False)


def test_the_nan_is_found_at_its_vertex(tmp_path: Path) -> None:
    path = sparse_file(tmp_path)
    with GraphFile(path) as f:
        ptr = f._h5[f"{fmt.FEATURES_CSR}/{fmt.INDPTR}"][()]
    vertex = 17 + int(np.flatnonzero(np.diff(ptr)[17:])[0])  # the first row from 17 with data
    first = int(ptr[vertex])
    _spoil(path, lambda h5: h5[f"{fmt.FEATURES_CSR}/{fmt.DATA}"].__setitem__(first, np.inf))
    with GraphFile(path) as f, pytest.raises(InputError, match=f"first at vertex {vertex}\\)"):
        f.read_feature_csr(10, 30)


def test_partition_keeps_the_sparse_layout(tmp_path: Path) -> None:
    from hpcgnn.cli.main import main

    out = tmp_path / "p.h5"
    assert main(["partition", str(sparse_file(tmp_path)), "--parts", "3", "--method", "random",
                 "--out", str(out), "--quiet"]) == 0
    x = random_graph_arrays(**KW)["x"]
    with GraphFile(out) as f:
        assert f.meta.feature_nnz == np.count_nonzero(x)
        perm = f.read_partition_perm()
        np.testing.assert_array_equal(f.read_features(0, 50), x[perm])


@pytest.mark.parametrize("sparse", [False, True])
def test_partition_keeps_float16_features(tmp_path: Path, sparse: bool) -> None:
    """info calls float16 features valid and train reads them: partition keeps them too."""
    from hpcgnn.cli.main import main
    from hpcgnn.io import EdgeSorter, GraphFileWriter

    g = random_graph_arrays(**KW)
    src = tmp_path / "h.h5"
    with EdgeSorter(g["n"], False, len(g["src"])) as sorter:
        sorter.add(g["src"], g["dst"])
        with GraphFileWriter(src, num_nodes=g["n"], num_features=20, num_classes=3,
                             directed=False, feature_dtype=np.float16, show_progress=False,
                             sparse_features=sparse) as w:
            w.write_adjacency(sorter)
            w.write_features(0, g["x"].astype(np.float16))
            w.write_labels(g["y"])
            w.write_masks(g["train"], g["val"], g["test"])
    out = tmp_path / "p.h5"
    assert main(["partition", str(src), "--parts", "2", "--method", "random", "--out", str(out),
                 "--quiet"]) == 0
    with GraphFile(out) as f:
        assert f.meta.feature_dtype == np.float16
        perm = f.read_partition_perm()
        # SciPy has no float16 CSR: a block read as CSR carries the values as float32
        np.testing.assert_array_equal(f.read_feature_csr(0, 50).toarray(),
                                      g["x"].astype(np.float16)[perm])
        np.testing.assert_array_equal(f.read_features(0, 50), g["x"].astype(np.float16)[perm])
