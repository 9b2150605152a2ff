import gzip

import numpy as np
import pytest

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.io import GraphFile
from hpcgnn.prepare.ogb import convert_ogb

N = 12
EDGES = np.array([[0, 1], [1, 2], [2, 0], [3, 4], [4, 3], [5, 6], [7, 7], [8, 9], [9, 10],
                  [10, 11], [11, 0], [0, 1]])
LABELS = ["3", "0", "1", "nan", "2", "0", "1", "2", "3", "0", "1", "2"]
SPLIT = {"train": [0, 1, 2, 4, 5, 6], "valid": [7, 8], "test": [9, 10, 11]}


def write_gz(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write("".join(f"{line}\n" for line in lines))


def fake_ogb(root, split_names=("time",), counts=True, seed=0):
    """Write an OGB node-property raw layout; return the feature matrix."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, 3)).astype(np.float32)
    write_gz(root / "raw" / "edge.csv.gz", [f"{u},{v}" for u, v in EDGES])
    write_gz(root / "raw" / "node-feat.csv.gz", [",".join(map(repr, row.tolist())) for row in x])
    write_gz(root / "raw" / "node-label.csv.gz", LABELS)
    if counts:
        write_gz(root / "raw" / "num-node-list.csv.gz", [str(N)])
        write_gz(root / "raw" / "num-edge-list.csv.gz", [str(len(EDGES))])
    for split in split_names:
        for part, ids in SPLIT.items():
            write_gz(root / "split" / split / f"{part}.csv.gz", map(str, ids))
    return x


def read_all(path):
    with GraphFile(path) as g:
        n = g.meta.num_nodes
        out = dict(meta=g.meta, a=g.read_csr(0, n), x=g.read_features(0, n),
                   y=g.read_labels(0, n),
                   **{m: g.read_mask(m, 0, n) for m in ("train", "val", "test")})
        if g.meta.directed:
            out["at"] = g.read_csr(0, n, transpose=True)
    return out


def edge_set(a):
    return set(zip(*a.nonzero(), strict=True))


def test_undirected_conversion(tmp_path):
    root = tmp_path / "ogbn_fake"
    x = fake_ogb(root)
    summary = convert_ogb(root, tmp_path / "g.h5", show_progress=False)
    g = read_all(tmp_path / "g.h5")
    assert g["meta"].name == "ogbn-fake" and not g["meta"].directed
    assert g["meta"].num_classes == 4 and g["meta"].num_features == 3
    np.testing.assert_array_equal(g["x"], x)
    assert g["y"].tolist() == [3, 0, 1, -1, 2, 0, 1, 2, 3, 0, 1, 2]
    for mask, part in zip(("train", "val", "test"), SPLIT, strict=True):
        assert np.flatnonzero(g[mask]).tolist() == SPLIT[part]
    expected = {(u, v) for u, v in EDGES if u != v} | {(v, u) for u, v in EDGES if u != v}
    assert edge_set(g["a"]) == expected
    assert summary.num_edges == len(expected) and summary.edges_read == len(EDGES)
    assert (summary.train, summary.val, summary.test, summary.unlabelled) == (6, 2, 3, 1)


def test_directed_conversion_keeps_direction(tmp_path):
    fake_ogb(tmp_path / "d", counts=False)
    convert_ogb(tmp_path / "d", tmp_path / "g.h5", directed=True, name="arxiv",
                show_progress=False)
    g = read_all(tmp_path / "g.h5")
    assert g["meta"].directed and g["meta"].name == "arxiv"
    assert edge_set(g["a"]) == {(u, v) for u, v in EDGES if u != v}
    assert (g["at"] != g["a"].T.tocsr()).nnz == 0


def test_several_splits_need_a_choice(tmp_path):
    fake_ogb(tmp_path / "d", split_names=("time", "random"))
    with pytest.raises(ConfigError, match=r"holds 2 splits \(random, time\); choose one"):
        convert_ogb(tmp_path / "d", tmp_path / "g.h5", show_progress=False)
    convert_ogb(tmp_path / "d", tmp_path / "g.h5", split="random", show_progress=False)
    with pytest.raises(InputError, match="no such split"):
        convert_ogb(tmp_path / "d", tmp_path / "g.h5", split="species", show_progress=False)


def test_malformed_edge_line_names_file_and_line(tmp_path):
    fake_ogb(tmp_path / "d")
    write_gz(tmp_path / "d" / "raw" / "edge.csv.gz", ["0,1", "1,2", "2;3"])
    with pytest.raises(InputError, match=r"edge\.csv\.gz, line 3: expected 2 values, got 1"):
        convert_ogb(tmp_path / "d", tmp_path / "g.h5", show_progress=False)
    assert not (tmp_path / "g.h5").exists()


def test_edge_out_of_range(tmp_path):
    fake_ogb(tmp_path / "d")
    write_gz(tmp_path / "d" / "raw" / "edge.csv.gz", ["0,1", f"1,{N}"])
    with pytest.raises(InputError, match=rf"edge\.csv\.gz: vertex id {N} is out of range"):
        convert_ogb(tmp_path / "d", tmp_path / "g.h5", show_progress=False)


@pytest.mark.parametrize(
    "path, lines, match",
    [
        ("raw/node-feat.csv.gz", ["1,2,3"] * (N - 1), "11 feature rows, expected one per vertex"),
        ("raw/num-node-list.csv.gz", ["13"], "12 labels but num-node-list.csv.gz says 13"),
        ("split/time/valid.csv.gz", ["3"], "val vertex 3 has no label"),
        ("split/time/test.csv.gz", ["0"], "vertex 0 is in more than one of train/val/test"),
        ("raw/node-label.csv.gz", ["0,1"] * N, "only single-label datasets"),
    ],
)
def test_inconsistent_files_are_input_errors(tmp_path, path, lines, match):
    fake_ogb(tmp_path / "d")
    write_gz(tmp_path / "d" / path, lines)
    with pytest.raises(InputError, match=match):
        convert_ogb(tmp_path / "d", tmp_path / "g.h5", show_progress=False)


def test_missing_raw_file(tmp_path):
    fake_ogb(tmp_path / "d")
    (tmp_path / "d" / "raw" / "node-feat.csv.gz").unlink()
    with pytest.raises(InputError, match=r"node-feat\.csv\.gz: no such file"):
        convert_ogb(tmp_path / "d", tmp_path / "g.h5", show_progress=False)


def fake_ogb_bin(root, x, fortran_edges=False, compressed=True, **extra):
    """The binary layout (``raw/data.npz``, ``raw/node-label.npz``) of the same dataset."""
    (root / "raw").mkdir(parents=True, exist_ok=True)
    edge_index = EDGES.T.astype(np.int64)
    if fortran_edges:
        edge_index = np.asfortranarray(edge_index)
    labels = np.array([float(v) for v in LABELS])[:, None]
    save = np.savez_compressed if compressed else np.savez
    arrays = dict(edge_index=edge_index, node_feat=x.astype(np.float32),
                  num_nodes_list=np.array([N]), num_edges_list=np.array([len(EDGES)]))
    save(root / "raw" / "data.npz", **{**arrays, **extra})
    save(root / "raw" / "node-label.npz", node_label=labels)
    for part, ids in SPLIT.items():
        write_gz(root / "split" / "time" / f"{part}.csv.gz", map(str, ids))


@pytest.mark.parametrize("fortran_edges, compressed", [(False, True), (True, False)])
def test_binary_layout_converts_as_the_csv_layout(tmp_path, fortran_edges, compressed):
    x = fake_ogb(tmp_path / "csv" / "ogbn_fake")
    fake_ogb_bin(tmp_path / "bin" / "ogbn_fake", x, fortran_edges, compressed)
    convert_ogb(tmp_path / "csv" / "ogbn_fake", tmp_path / "csv.h5", show_progress=False)
    convert_ogb(tmp_path / "bin" / "ogbn_fake", tmp_path / "bin.h5", show_progress=False)
    a, b = read_all(tmp_path / "csv.h5"), read_all(tmp_path / "bin.h5")
    assert edge_set(a["a"]) == edge_set(b["a"])
    for key in ("x", "y", "train", "val", "test"):
        np.testing.assert_array_equal(a[key], b[key])
    assert a["meta"].num_classes == b["meta"].num_classes


def test_binary_layout_streams_in_blocks(tmp_path, monkeypatch):
    import hpcgnn.prepare.npz as npz

    monkeypatch.setattr(npz, "BLOCK_BYTES", 40)  # 5 edges, 3 feature rows per block
    x = fake_ogb(tmp_path / "csv")
    fake_ogb_bin(tmp_path / "bin", x)
    convert_ogb(tmp_path / "csv", tmp_path / "csv.h5", show_progress=False)
    convert_ogb(tmp_path / "bin", tmp_path / "bin.h5", show_progress=False)
    a, b = read_all(tmp_path / "csv.h5"), read_all(tmp_path / "bin.h5")
    assert edge_set(a["a"]) == edge_set(b["a"])
    np.testing.assert_array_equal(a["x"], b["x"])


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(node_feat=np.zeros((N - 1, 3), np.float32)), r"node_feat has shape \(11, 3\)"),
        (dict(num_nodes_list=np.array([N + 1])), r"12 labels but data\.npz num_nodes_list says 13"),
        (dict(edge_index=np.zeros((3, 4), np.int64)), r"edge_index.*expected \(2, E\)"),
    ],
)
def test_bad_binary_archives_are_input_errors(tmp_path, change, match):
    x = fake_ogb(tmp_path / "csv")
    fake_ogb_bin(tmp_path / "bin", x, **change)
    with pytest.raises(InputError, match=match):
        convert_ogb(tmp_path / "bin", tmp_path / "g.h5", show_progress=False)
    assert not (tmp_path / "g.h5").exists()


def test_an_archive_without_features_names_what_it_holds(tmp_path):
    x = fake_ogb(tmp_path / "csv")
    fake_ogb_bin(tmp_path / "bin", x)
    data = dict(np.load(tmp_path / "bin" / "raw" / "data.npz"))
    del data["node_feat"]
    np.savez(tmp_path / "bin" / "raw" / "data.npz", **data)
    with pytest.raises(InputError, match=r"no array 'node_feat' \(it holds: edge_index,"):
        convert_ogb(tmp_path / "bin", tmp_path / "g.h5", show_progress=False)
