import datetime
import pickle
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import GraphFile
from hpcgnn.prepare.planetoid import convert_planetoid

N_ALLX, N_TRAIN, N_CLASSES, N_FEATURES = 20, 6, 3, 5
MISSING = 25  # a test-range id absent from test.index, like CiteSeer's isolated vertices
TEST_IDS = np.array([28, 21, 29, 20, 24, 27, 22, 23, 26])  # unsorted, as in the real files
N = 30
EDGES = [(0, 1), (1, 2), (2, 0), (3, 20), (21, 22), (5, 25), (29, 4), (6, 7), (8, 9), (28, 10)]


def legacy_pickle(obj) -> bytes:
    """Pickle like the 2016 files: protocol 2 and pre-1.8 SciPy / pre-2.0 NumPy module paths."""
    data = pickle.dumps(obj, protocol=2)
    return data.replace(b"scipy.sparse._csr\n", b"scipy.sparse.csr\n").replace(
        b"numpy._core.multiarray\n", b"numpy.core.multiarray\n"
    )


def fake_planetoid(directory, name="citeseer", seed=0):
    """Write ind.NAME.* files for a 30-vertex graph; return the arrays used."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    allx = (rng.random((N_ALLX, N_FEATURES)) < 0.4).astype(np.float32)
    tx = (rng.random((TEST_IDS.size, N_FEATURES)) < 0.4).astype(np.float32) + 2.0
    ally = np.eye(N_CLASSES)[rng.integers(0, N_CLASSES, N_ALLX)]
    ty = np.eye(N_CLASSES)[rng.integers(0, N_CLASSES, TEST_IDS.size)]
    graph = defaultdict(list)
    for u, v in EDGES:
        graph[u].append(v)  # one direction only: the converter must symmetrise
    graph[0].append(1)  # duplicate
    graph[4].append(4)  # self loop
    parts = {
        "x": sp.csr_matrix(allx[:N_TRAIN]), "y": ally[:N_TRAIN],
        "tx": sp.csr_matrix(tx), "ty": ty,
        "allx": sp.csr_matrix(allx), "ally": ally, "graph": graph,
    }
    for part, obj in parts.items():
        (directory / f"ind.{name}.{part}").write_bytes(legacy_pickle(obj))
    (directory / f"ind.{name}.test.index").write_text("\n".join(map(str, TEST_IDS)) + "\n")
    return dict(allx=allx, tx=tx, ally=ally, ty=ty)


def read_all(path):
    with GraphFile(path) as g:
        n = g.meta.num_nodes
        return dict(meta=g.meta, a=g.read_csr(0, n), x=g.read_features(0, n),
                    y=g.read_labels(0, n),
                    **{m: g.read_mask(m, 0, n) for m in ("train", "val", "test")})


def test_fake_files_use_legacy_module_paths(tmp_path):
    fake_planetoid(tmp_path)
    assert b"scipy.sparse.csr\ncsr_matrix" in (tmp_path / "ind.citeseer.x").read_bytes()
    assert b"numpy.core.multiarray" in (tmp_path / "ind.citeseer.y").read_bytes()


def test_citeseer_like_dataset_reproduces_gcn_load_data(tmp_path):
    raw = fake_planetoid(tmp_path / "raw")
    summary = convert_planetoid(tmp_path, "CiteSeer", tmp_path / "g.h5", show_progress=False,
                                normalize_features=False)
    g = read_all(tmp_path / "g.h5")
    assert g["meta"].num_nodes == N and g["meta"].num_classes == N_CLASSES
    assert g["meta"].feature_normalization == ""
    assert g["meta"].name == "citeseer" and not g["meta"].directed
    assert g["meta"].feature_nnz == np.count_nonzero(g["x"])  # stored sparse (features_csr)

    x, y = g["x"], g["y"]
    np.testing.assert_array_equal(x[:N_ALLX], raw["allx"])
    np.testing.assert_array_equal(x[TEST_IDS], raw["tx"])  # row k of tx -> vertex TEST_IDS[k]
    np.testing.assert_array_equal(x[MISSING], 0.0)
    np.testing.assert_array_equal(y[:N_ALLX], raw["ally"].argmax(1))
    np.testing.assert_array_equal(y[TEST_IDS], raw["ty"].argmax(1))
    assert y[MISSING] == -1

    assert np.flatnonzero(g["train"]).tolist() == list(range(N_TRAIN))
    assert np.flatnonzero(g["val"]).tolist() == list(range(N_TRAIN, N_ALLX))  # clipped at allx
    assert np.flatnonzero(g["test"]).tolist() == sorted(TEST_IDS.tolist())
    assert (summary.train, summary.val, summary.test) == (N_TRAIN, N_ALLX - N_TRAIN, 9)
    assert summary.unlabelled == 1

    a = g["a"]
    expected = {(u, v) for u, v in EDGES} | {(v, u) for u, v in EDGES}
    assert set(zip(*a.nonzero(), strict=True)) == expected
    assert summary.num_edges == len(expected) == 2 * len(EDGES)
    assert summary.edges_read == len(EDGES) + 2


def test_features_are_row_normalised_as_kipfs_preprocessing_by_default(tmp_path):
    raw = fake_planetoid(tmp_path)
    convert_planetoid(tmp_path, "citeseer", tmp_path / "g.h5", show_progress=False)
    g = read_all(tmp_path / "g.h5")
    assert g["meta"].feature_normalization == "row"
    x = np.zeros((N, raw["allx"].shape[1]))
    x[:N_ALLX], x[TEST_IDS] = raw["allx"], raw["tx"]
    sums = x.sum(1, keepdims=True)
    want = np.divide(x, sums, out=np.zeros_like(x), where=sums != 0)  # zero rows stay zero
    np.testing.assert_allclose(g["x"], want.astype(np.float32), rtol=1e-6)
    sums = g["x"].sum(1)
    assert np.allclose(sums[sums > 0], 1.0, atol=1e-5) and (sums[MISSING] == 0).all()
    from hpcgnn.cli.main import main

    assert main(["partition", str(tmp_path / "g.h5"), "--parts", "2", "--method", "block",
                 "--out", str(tmp_path / "p.h5"), "--quiet"]) == 0
    assert GraphFile(tmp_path / "p.h5").meta.feature_normalization == "row"  # kept


def test_finds_pyg_layout_and_plain_directory(tmp_path):
    fake_planetoid(tmp_path / "Cora" / "raw", name="cora")
    convert_planetoid(tmp_path, "cora", tmp_path / "a.h5", show_progress=False)
    fake_planetoid(tmp_path / "flat", name="cora")
    convert_planetoid(tmp_path / "flat", "cora", tmp_path / "b.h5", show_progress=False)
    assert GraphFile(tmp_path / "a.h5").meta.num_nodes == N


def test_missing_file_names_it(tmp_path):
    fake_planetoid(tmp_path)
    (tmp_path / "ind.citeseer.graph").unlink()
    with pytest.raises(InputError, match=r"ind\.citeseer\.graph: no such file"):
        convert_planetoid(tmp_path, "citeseer", tmp_path / "g.h5", show_progress=False)
    with pytest.raises(InputError, match=r"no Planetoid files ind\.pubmed"):
        convert_planetoid(tmp_path, "pubmed", tmp_path / "g.h5", show_progress=False)
    assert not (tmp_path / "g.h5").exists()


def test_graph_vertex_out_of_range_is_an_input_error(tmp_path):
    fake_planetoid(tmp_path)
    graph = {0: [1], 1: [N + 5]}
    (tmp_path / "ind.citeseer.graph").write_bytes(pickle.dumps(graph, protocol=2))
    with pytest.raises(InputError, match=rf"ind\.citeseer\.graph: vertex id {N + 5} is out of"):
        convert_planetoid(tmp_path, "citeseer", tmp_path / "g.h5", show_progress=False)


def test_inconsistent_shapes_are_input_errors(tmp_path):
    fake_planetoid(tmp_path)
    (tmp_path / "ind.citeseer.test.index").write_text("20\n21\n")
    with pytest.raises(InputError, match="2 ids but tx has 9 rows"):
        convert_planetoid(tmp_path, "citeseer", tmp_path / "g.h5", show_progress=False)


def test_pickles_of_other_classes_are_refused(tmp_path):
    fake_planetoid(tmp_path)
    (tmp_path / "ind.citeseer.y").write_bytes(pickle.dumps(datetime.date(2020, 1, 1)))
    with pytest.raises(InputError, match=r"refusing to load datetime\.date"):
        convert_planetoid(tmp_path, "citeseer", tmp_path / "g.h5", show_progress=False)
