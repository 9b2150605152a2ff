"""Multi-label targets in the graph format: a ``(n, C)`` 0/1 ``labels`` matrix (version 3).

Written, read in row blocks, held in memory, validated, fingerprinted, partitioned and
printed by ``hpcgnn info``; a file of class ids reads as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from hpcgnn.cli.main import main
from hpcgnn.errors import InputError
from hpcgnn.graph.check import check_graph
from hpcgnn.io import GraphFile
from hpcgnn.io import format as fmt
from hpcgnn.io.memory import MemoryGraph
from hpcgnn.io.validate import validate_file
from tests.graphs import random_graph_arrays, write_random_graph


def _graph(tmp_path: Path, **kwargs) -> tuple[Path, dict]:
    kwargs = {"n": 70, "classes": 4, "seed": 1, **kwargs}
    return write_random_graph(tmp_path / "ml.h5", multi_label=True, **kwargs), \
        random_graph_arrays(multi_label=True, **kwargs)


def test_the_matrix_is_written_as_version_3_and_read_in_row_blocks(tmp_path: Path) -> None:
    path, g = _graph(tmp_path)
    with h5py.File(path) as h5:
        assert h5["labels"].shape == (70, 4) and h5["labels"].dtype == np.uint8
        assert h5.attrs["format_version"] == fmt.MULTI_LABEL_VERSION == 3
    with GraphFile(path) as f:
        assert f.meta.multi_label and f.meta.num_classes == 4 and f.meta.format_version == 3
        for lo, hi in ((0, 70), (13, 41), (69, 70), (5, 5)):
            y = f.read_labels(lo, hi)
            assert y.dtype == np.uint8 and y.shape == (hi - lo, 4)
            np.testing.assert_array_equal(y, g["y"][lo:hi])
    plain = write_random_graph(tmp_path / "plain.h5", n=70, classes=4, seed=1)
    with GraphFile(plain) as f:  # class ids: as before
        assert not f.meta.multi_label and f.meta.format_version == 1
        assert f.read_labels(0, 70).dtype == np.int64 and f.read_labels(0, 70).ndim == 1


@pytest.mark.parametrize("change, words", [
    (lambda h5: h5["labels"].__setitem__((7, 2), 2), "multi-label target 2 of vertex 7, class 2"
                                                      " is not 0 or 1"),
    (lambda h5: h5.attrs.__setitem__("format_version", 2), "has multi-label targets ('labels' of"
                                                           " shape (70, 4)) but format version 2"),
    (lambda h5: h5.attrs.__setitem__("num_classes", 5), "dataset 'labels' has shape (70, 4),"
                                                        " expected (70, 5)"),
])
def test_a_broken_matrix_is_one_line(tmp_path: Path, change, words) -> None:
    path, _ = _graph(tmp_path)
    with h5py.File(path, "r+") as h5:
        change(h5)
    with pytest.raises(InputError) as err:
        with GraphFile(path) as f:
            f.read_labels(0, 70)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_writer_refuses_what_is_not_a_0_1_matrix(tmp_path: Path) -> None:
    from hpcgnn.io import GraphFileWriter

    w = GraphFileWriter(tmp_path / "w.h5", num_nodes=4, num_features=1, num_classes=3,
                        directed=False, show_progress=False, multi_label=True)
    try:
        with pytest.raises(InputError, match=r"shape \(4,\), expected \(4, 3\)"):
            w.write_labels(np.zeros(4))
        with pytest.raises(InputError, match="must be 0 or 1"):
            w.write_labels(np.full((4, 3), 2))
    finally:
        w.abort()
    assert not (tmp_path / "w.h5").exists()


def test_validation_counts_each_class_and_info_says_multi_label(tmp_path: Path, capsys) -> None:
    path, g = _graph(tmp_path)
    report = validate_file(path, show_progress=False)
    assert report.class_histogram == tuple(int(k) for k in g["y"].sum(axis=0))
    assert report.unlabelled == 0 and report.to_dict()["multi_label"] is True
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "classes:     4 (multi-label: a 0/1 target per class)" in out
    assert "labels:      vertices with each class: 0: " in out


def test_memory_graph_and_file_agree_and_the_fingerprint_sees_the_matrix(
    tmp_path: Path, world
) -> None:
    path, g = _graph(tmp_path)
    mem = MemoryGraph.from_arrays(
        features=g["x"], labels=g["y"], train_mask=g["train"], val_mask=g["val"],
        test_mask=g["test"], edge_index=np.stack([g["src"], g["dst"]]))
    assert mem.meta.multi_label and mem.meta.num_classes == 4 and mem.meta.format_version == 3
    np.testing.assert_array_equal(mem.read_labels(10, 20), g["y"][10:20])
    content = check_graph(world, path, content=True)
    assert check_graph(world, mem, content=True) == content
    other = tmp_path / "other.h5"
    other.write_bytes(path.read_bytes())
    with h5py.File(other, "r+") as h5:
        h5["labels"][3, 0] = 1 - h5["labels"][3, 0]
    assert check_graph(world, other, content=True) != content
    with pytest.raises(InputError, match="num_classes 3 but 4 label columns"):
        MemoryGraph.from_arrays(features=g["x"], labels=g["y"], train_mask=g["train"],
                                val_mask=g["val"], test_mask=g["test"], num_classes=3,
                                edge_index=np.stack([g["src"], g["dst"]]))


def test_a_partitioned_copy_permutes_the_rows(tmp_path: Path) -> None:
    path, g = _graph(tmp_path)
    out = tmp_path / "p.h5"
    assert main(["partition", str(path), "--out", str(out), "--parts", "3", "--method",
                 "random"]) == 0
    with GraphFile(out) as f:
        assert f.meta.multi_label and f.meta.format_version == 3
        perm = f.read_partition_perm()
        np.testing.assert_array_equal(f.read_labels(0, 70), g["y"][perm])
    assert json.loads(json.dumps(validate_file(out, show_progress=False).to_dict()))["valid"]
