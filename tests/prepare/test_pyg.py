"""``hpcgnn prepare pyg``: a PyG graph saved with torch.save, read weights-only."""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.io import GraphFile
from hpcgnn.prepare.pyg import convert_pyg, load_pyg, pyg_graph
from hpcgnn.prepare.splits import SplitSpec

N = 50
HAS_PYG = importlib.util.find_spec("torch_geometric") is not None


def graph_dict(masks: bool = True) -> dict:
    """A PyG ``Data.to_dict()``: both directions of each edge, as PyG stores a graph."""
    g = torch.Generator().manual_seed(0)
    e = torch.randint(0, N, (2, 120), generator=g)
    d = {"x": torch.rand(N, 5, generator=g), "edge_index": torch.cat([e, e.flip(0)], 1),
         "y": torch.randint(0, 3, (N,), generator=g)}
    if masks:
        idx = torch.arange(N)
        d |= {"train_mask": idx < 20, "val_mask": (idx >= 20) & (idx < 30),
              "test_mask": idx >= 30}
    return d


def convert(tmp_path: Path, obj: object, **kwargs) -> GraphFile:
    torch.save(obj, tmp_path / "d.pt")
    convert_pyg(tmp_path / "d.pt", tmp_path / "g.h5", show_progress=False, **kwargs)
    return GraphFile(tmp_path / "g.h5")


def test_a_to_dict_file_converts_with_its_masks(tmp_path: Path) -> None:
    d = graph_dict()
    with convert(tmp_path, d) as f:
        assert f.meta.num_nodes == N and f.meta.num_features == 5 and not f.meta.directed
        np.testing.assert_array_equal(f.read_features(0, N), d["x"].numpy())
        np.testing.assert_array_equal(f.read_labels(0, N), d["y"].numpy())
        np.testing.assert_array_equal(f.read_mask("val", 0, N), d["val_mask"].numpy())
        a = f.read_csr(0, N).toarray()
    e = d["edge_index"].numpy()
    expect = np.zeros((N, N))
    expect[e[0], e[1]] = 1
    np.fill_diagonal(expect, 0)
    np.testing.assert_array_equal(a, expect)


def test_no_pickle_code_runs(tmp_path: Path) -> None:
    class Boom:
        def __reduce__(self):
            return (sys.exit, ("ran",))

    (tmp_path / "d.pt").write_bytes(b"")
    torch.save({"x": Boom()}, tmp_path / "d.pt", _use_new_zipfile_serialization=True)
    with pytest.raises(InputError, match=r"not readable by a weights-only load \(it holds a "
                                         r"sys.exit\): save the graph's tensors with "
                                         r"torch.save\(data.to_dict\(\), path\)$"):
        load_pyg(tmp_path / "d.pt")


@pytest.mark.parametrize("obj, words", [
    ([1, 2], "holds a list, not a PyG graph"),
    (torch.ones(3), "holds a Tensor, not a PyG graph"),
    (({"x": torch.ones(4, 1)}, {"x": torch.tensor([0, 2, 4])}, None), "a dataset of 2 graphs"),
])
def test_other_objects_are_refused_saying_how_to_save(tmp_path, obj, words) -> None:
    torch.save(obj, tmp_path / "d.pt")
    with pytest.raises(InputError, match=words):
        load_pyg(tmp_path / "d.pt")


def test_a_file_that_is_no_torch_save_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "d.pt").write_bytes(pickle.dumps({"x": 1}))
    with pytest.raises(InputError, match=r"d.pt: not"):
        load_pyg(tmp_path / "d.pt")
    with pytest.raises(InputError, match="no such file"):
        load_pyg(tmp_path / "missing.pt")


def test_a_one_graph_dataset_file_converts(tmp_path: Path) -> None:
    d = graph_dict()
    slices = {k: torch.tensor([0, len(v)]) for k, v in d.items()}
    with convert(tmp_path, (d, slices, None)) as f:
        assert f.meta.num_nodes == N


@pytest.mark.parametrize("change, words", [
    (lambda d: d.pop("y"), "no 'y'"),
    (lambda d: d.update(y=torch.full((N, 2), 2.0)), "multi-label target 2.0 .* not 0 or 1"),
    (lambda d: d.update(train_mask=torch.zeros(N, 3, dtype=torch.bool)),
     r"'train_mask' has 3 columns \(one split each\)"),
    (lambda d: d.update(edge_attr=torch.ones(480, 4)), "one weight per edge"),
    (lambda d: d.update(num_nodes=N + 1), "num_nodes 51 but x has 50 rows"),
    (lambda d: d.update(x=torch.ones(N)), "'x' has shape"),
])
def test_what_cannot_be_stored_is_one_line(tmp_path, change, words) -> None:
    d = graph_dict()
    change(d)
    torch.save(d, tmp_path / "d.pt")
    with pytest.raises(InputError, match=words):
        pyg_graph(tmp_path / "d.pt", SplitSpec())


def test_without_masks_the_split_is_drawn_per_class(tmp_path: Path) -> None:
    torch.save(graph_dict(masks=False), tmp_path / "d.pt")
    with pytest.raises(InputError, match="no train/val/test masks; draw them with --split"):
        pyg_graph(tmp_path / "d.pt", SplitSpec())
    spec = SplitSpec("per-class", seed=3, train_per_class=4, val_size=10, test_size=15)
    g = pyg_graph(tmp_path / "d.pt", spec)
    y, train = g.read_labels(0, N), g.read_mask("train", 0, N)
    assert np.bincount(y[train]).tolist() == [4, 4, 4]
    assert g.read_mask("val", 0, N).sum() == 10 and g.read_mask("test", 0, N).sum() == 15
    again = pyg_graph(tmp_path / "d.pt", spec)
    np.testing.assert_array_equal(again.read_mask("test", 0, N), g.read_mask("test", 0, N))


def test_weights_and_row_normalisation(tmp_path: Path) -> None:
    d = graph_dict()
    d["edge_attr"] = torch.full((d["edge_index"].shape[1], 1), 2.5)
    with convert(tmp_path, d, row_normalize=True) as f:
        assert f.meta.weighted and f.meta.feature_normalization == "row"
        w = f.read_csr(0, N, weights=True).toarray()
    e = d["edge_index"].numpy()
    expect = np.zeros((N, N))
    np.add.at(expect, (e[0], e[1]), 2.5)  # both directions given: taken as they are, repeats
    np.fill_diagonal(expect, 0)           # summed
    np.testing.assert_array_equal(w, expect)
    with GraphFile(tmp_path / "g.h5") as f:
        np.testing.assert_allclose(f.read_features(0, N).sum(axis=1), 1, rtol=1e-6)


def test_sparse_features_stay_sparse(tmp_path: Path) -> None:
    d = graph_dict()
    d["x"] = (d["x"] * (d["x"] > 0.7)).to_sparse()
    with convert(tmp_path, d) as f:
        assert f.meta.feature_nnz == int((d["x"].to_dense() != 0).sum())
        np.testing.assert_array_equal(f.read_features(0, N), d["x"].to_dense().numpy())


@pytest.mark.skipif(not HAS_PYG, reason="torch_geometric is not installed")
def test_a_data_object_saved_whole_converts_without_pyg_code(tmp_path: Path) -> None:
    from torch_geometric.data import Data

    d = graph_dict()
    torch.save(Data(**d), tmp_path / "d.pt")
    blocked = (  # PyG cannot be imported in this process: a load that needed it fails
        "import sys; sys.modules['torch_geometric'] = None\n"
        "from hpcgnn.prepare.pyg import convert_pyg\n"
        f"convert_pyg({str(tmp_path / 'd.pt')!r}, {str(tmp_path / 'g.h5')!r},"
        " show_progress=False)"
    )
    subprocess.run([sys.executable, "-c", blocked], check=True)
    with GraphFile(tmp_path / "g.h5") as f:
        np.testing.assert_array_equal(f.read_features(0, N), d["x"].numpy())
        np.testing.assert_array_equal(f.read_mask("train", 0, N), d["train_mask"].numpy())


@pytest.mark.skipif(not HAS_PYG, reason="torch_geometric is not installed")
def test_pyg_dataset_files_of_one_graph_convert_of_several_are_refused(tmp_path) -> None:
    from torch_geometric.data import Data, InMemoryDataset

    d = graph_dict()
    InMemoryDataset.save([Data(**d)], str(tmp_path / "one.pt"))  # slices None
    g = pyg_graph(tmp_path / "one.pt", SplitSpec())
    np.testing.assert_array_equal(g.read_features(0, N), d["x"].numpy())
    InMemoryDataset.save([Data(**d), Data(**d)], str(tmp_path / "two.pt"))
    with pytest.raises(InputError, match=r"a dataset of 2 graphs; hpcgnn trains on one: save"
                                         r" it with torch.save\(dataset\[k\].to_dict\(\)"):
        pyg_graph(tmp_path / "two.pt", SplitSpec())


def test_a_2d_y_is_written_as_multi_label_targets_and_trains_as_the_graph(tmp_path) -> None:
    """PPI's ``Data.y``: an (n, C) 0/1 matrix round-trips; the file trains as the graph."""
    import hpcgnn

    d = graph_dict()
    d["y"] = (torch.rand(N, 4, generator=torch.Generator().manual_seed(1)) < 0.4).float()
    with convert(tmp_path, d) as f:
        assert f.meta.multi_label and f.meta.num_classes == 4 and f.meta.format_version == 3
        np.testing.assert_array_equal(f.read_labels(0, N), d["y"].numpy())
        np.testing.assert_array_equal(f.read_mask("train", 0, N), d["train_mask"].numpy())
    graph = pyg_graph(tmp_path / "d.pt", SplitSpec())
    runs = [hpcgnn.train(g, loss="bce", epochs=2, quiet=True) for g in (tmp_path / "g.h5", graph)]
    assert runs[0].metrics["params_sha256"] == runs[1].metrics["params_sha256"]
    assert (runs[0].metrics["graph"]["content_fingerprint"]
            == runs[1].metrics["graph"]["content_fingerprint"])
    torch.save({k: v for k, v in d.items() if not k.endswith("_mask")}, tmp_path / "d.pt")
    spec = SplitSpec("random", seed=2)
    g = pyg_graph(tmp_path / "d.pt", spec)  # every vertex is labelled: all in a split
    assert sum(int(g.read_mask(m, 0, N).sum()) for m in ("train", "val", "test")) == N
    with pytest.raises(ConfigError, match="--split per-class draws per class id; multi-label"):
        pyg_graph(tmp_path / "d.pt", SplitSpec("per-class"))
