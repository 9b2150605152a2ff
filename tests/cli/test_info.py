"""``hpcgnn info``: statistics of valid files, one clear error line for each bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest

from hpcgnn.cli.common import launched_by_mpi
from hpcgnn.cli.main import main
from tests.graphs import BROKEN, write_broken_graph, write_random_graph
from tests.mpi import assert_all, error_output, on_rank0

N = 60

#: Serial tests call the CLI as one process; under an MPI launcher the CLI turns collective
#: and only rank 0 prints, so they are skipped there (the ``mpi`` tests cover that path).
serial = pytest.mark.skipif(launched_by_mpi(), reason="serial test; MPI tests cover mpiexec")


def _replace(h5: h5py.File, name: str, data: np.ndarray) -> None:
    del h5[name]
    h5.create_dataset(name, data=data)


def _set(name: str, index: int | tuple, value: object) -> Callable[[h5py.File], None]:
    def corrupt(h5: h5py.File) -> None:
        h5[name][index] = value

    return corrupt


def _delete(name: str) -> Callable[[h5py.File], None]:
    def corrupt(h5: h5py.File) -> None:
        del h5[name]

    return corrupt


def _rename(name: str, new: str) -> Callable[[h5py.File], None]:
    def corrupt(h5: h5py.File) -> None:
        h5.move(name, new)

    return corrupt


def _retype(name: str, dtype: str) -> Callable[[h5py.File], None]:
    def corrupt(h5: h5py.File) -> None:
        _replace(h5, name, h5[name][()].astype(dtype))

    return corrupt


def _reshape(name: str, shape: Callable[[tuple], tuple]) -> Callable[[h5py.File], None]:
    def corrupt(h5: h5py.File) -> None:
        old = h5[name][()]
        _replace(h5, name, np.resize(old, shape(old.shape)))

    return corrupt


def _indptr_not_monotone(h5: h5py.File) -> None:
    ptr = h5["adjacency/indptr"]
    ptr[10] = ptr[12] + 1


def _indptr_wrong_end(h5: h5py.File) -> None:
    ptr = h5["adjacency/indptr"]
    ptr[N] = ptr[N] - 1


def _newer_version(h5: h5py.File) -> None:
    h5.attrs["format_version"] = 99


def _attr(name: str, value: object) -> Callable[[h5py.File], None]:
    def corrupt(h5: h5py.File) -> None:
        h5.attrs[name] = value

    return corrupt


def _drop_attr(name: str) -> Callable[[h5py.File], None]:
    def corrupt(h5: h5py.File) -> None:
        del h5.attrs[name]

    return corrupt


#: case id -> (corruption, words the error line must contain)
BAD_INPUTS: dict[str, tuple[Callable[[h5py.File], None], tuple[str, ...]]] = {
    "missing_labels": (_delete("labels"), ("missing dataset 'labels'",)),
    "missing_indices": (_delete("adjacency/indices"), ("missing dataset 'adjacency/indices'",)),
    "misnamed_mask": (_rename("masks/train", "masks/training"), ("missing dataset 'masks/train'",)),
    "misnamed_features": (_rename("features", "feats"), ("missing dataset 'features'",)),
    "features_int_dtype": (_retype("features", "int32"), ("'features'", "dtype int32")),
    "labels_float_dtype": (_retype("labels", "float64"), ("'labels'", "dtype float64")),
    "indices_float_dtype": (
        _retype("adjacency/indices", "float32"), ("'adjacency/indices'", "dtype float32"),
    ),
    "features_wrong_shape": (
        _reshape("features", lambda s: (s[0], s[1] + 1)), ("'features'", "shape (60, 7)"),
    ),
    "labels_2d": (_reshape("labels", lambda s: (s[0], 2)), ("'labels'", "shape (60, 2)")),
    "indptr_wrong_length": (
        _reshape("adjacency/indptr", lambda s: (s[0] - 1,)), ("'adjacency/indptr'", "shape"),
    ),
    "indptr_not_monotone": (_indptr_not_monotone, ("'adjacency/indptr'", "not monotone")),
    "indptr_not_ending_at_nnz": (_indptr_wrong_end, ("'adjacency/indptr'", "ends at", "num_edges")),
    "indptr_not_starting_at_0": (_set("adjacency/indptr", 0, 1), ("'adjacency/indptr'", "starts")),
    "index_out_of_range": (
        _set("adjacency/indices", 5, N), ("'adjacency/indices'", f"{N} out of range"),
    ),
    "negative_index": (
        _set("adjacency/indices", 7, -3), ("'adjacency/indices'", "-3 out of range"),
    ),
    "label_too_large": (_set("labels", 4, 3), ("label 3 out of range",)),
    "label_below_minus_one": (_set("labels", 4, -2), ("label -2 out of range",)),
    "nan_feature": (_set("features", (17, 2), np.nan), ("NaN or Inf", "vertex 17")),
    "inf_feature": (_set("features", (33, 0), -np.inf), ("NaN or Inf", "vertex 33")),
    "train_mask_too_short": (
        _reshape("masks/train", lambda s: (s[0] - 1,)), ("'masks/train'", "shape (59,)"),
    ),
    "test_mask_too_long": (
        _reshape("masks/test", lambda s: (s[0] + 5,)), ("'masks/test'", "shape (65,)"),
    ),
    "newer_format_version": (_newer_version, ("format version 99", "newer")),
    "not_an_hpcgnn_file": (_attr("format", "something-else"), ("not an hpcgnn graph file",)),
    "missing_num_nodes": (_drop_attr("num_nodes"), ("missing root attribute 'num_nodes'",)),
}


def make_bad_file(path: Path, case: str) -> Path:
    """Write a valid graph to ``path`` and apply the corruption ``case``."""
    write_random_graph(path, n=N)
    if case == "truncated":
        size = path.stat().st_size
        with open(path, "r+b") as f:
            f.truncate(size // 2)
        return path
    corrupt, _ = BAD_INPUTS[case]
    with h5py.File(path, "r+") as h5:
        corrupt(h5)
    return path


def _single_error_line(capsys: pytest.CaptureFixture) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {captured.err!r}"
    assert lines[0].startswith("hpcgnn: error: ")
    assert captured.out == ""
    return lines[0]


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
@serial
def test_info_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture, case: str) -> None:
    path = make_bad_file(tmp_path / "bad.h5", case)
    assert main(["info", str(path)]) == 1
    line = _single_error_line(capsys)
    assert f"{path}: " in line
    for words in BAD_INPUTS[case][1]:
        assert words in line


@serial
def test_info_rejects_truncated_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = make_bad_file(tmp_path / "bad.h5", "truncated")
    assert main(["info", str(path)]) == 1
    line = _single_error_line(capsys)
    assert str(path) in line
    assert "truncated" in line


@serial
def test_info_rejects_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["info", str(tmp_path / "nope.h5")]) == 1
    assert "no such file" in _single_error_line(capsys)


@serial
def test_info_rejects_broken_transpose(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_random_graph(tmp_path / "d.h5", n=N, directed=True)
    with h5py.File(path, "r+") as h5:
        idx = h5["adjacency_t/indices"]
        idx[0] = (idx[0] + 1) % N
    assert main(["info", str(path)]) == 1
    assert "not the transpose" in _single_error_line(capsys)


@serial
def test_info_prints_statistics(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=N, classes=3)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "valid"
    text = "\n".join(out)
    for key in ("vertices:    60", "features:    6", "classes:     3", "train:", "val:",
                "test:", "degree:", "isolated:", "partition:   none"):
        assert key in text


@serial
def test_info_directed_shows_in_and_out_degree(tmp_path: Path, capsys) -> None:
    path = write_random_graph(tmp_path / "d.h5", n=N, directed=True)
    assert main(["info", str(path)]) == 0
    text = capsys.readouterr().out
    assert "out-degree:" in text and "in-degree:" in text and "(directed)" in text


@serial
def test_info_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=N, classes=4)
    assert main(["info", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is True
    assert report["vertices"] == N
    assert report["classes"] == 4
    assert report["train"] + report["val"] + report["test"] == N
    assert sum(report["class_histogram"]) + report["unlabelled"] == N
    assert report["edges"] == 2 * report["undirected_edges"]
    assert report["in_degree"] is None
    assert report["partition"] is None


@pytest.mark.mpi
def test_info_bad_input_fails_on_every_rank(world, shared_tmp: Path, capsys) -> None:
    path = shared_tmp / "bad.h5"
    on_rank0(world, make_bad_file, path, "index_out_of_range")
    rc = main(["info", str(path)])
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, rc == 1, f"rank {world.rank} returned {rc}")
    assert_all(world, len(err) == 1 and "out of range" in err[0], f"stderr: {err}")


def test_info_under_mpiexec_fails_cleanly(tmp_path: Path) -> None:
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        pytest.skip("no mpiexec next to the Python interpreter")
    if launched_by_mpi():
        pytest.skip("already running under an MPI launcher")
    path = make_bad_file(tmp_path / "bad.h5", "label_too_large")
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]
    ))
    proc = subprocess.run(
        [str(mpiexec), "-n", "2", sys.executable, "-m", "hpcgnn", "info", str(path)],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )
    assert proc.returncode != 0
    # printed once, by rank 0, saying that both ranks agree
    messages = [m.strip() for m in proc.stderr.split("hpcgnn: error: ")[1:]]
    assert len(messages) == 1, proc.stderr
    assert f"{path}: label 3 out of range" in messages[0]
    assert messages[0].endswith("2 agree)") or messages[0].endswith("2 ranks agree)"), messages


@serial
@pytest.mark.parametrize("weights", [None, np.float32])
def test_info_says_whether_the_graph_is_weighted(tmp_path: Path, capsys, weights) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=N, weights=weights)
    assert main(["info", str(path)]) == 0
    text = capsys.readouterr().out
    expected = "weights:     stored (a weight per edge)" if weights else "weights:     none"
    assert expected in text.splitlines()
    assert f"format:      version {2 if weights else 1}" in text
    assert main(["info", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["weighted"] is (weights is not None)


@serial
@pytest.mark.parametrize("name", ["nan-weight", "asymmetric-weight", "weight-not-transposed"])
def test_info_rejects_bad_weights_in_one_line(tmp_path: Path, capsys, name: str) -> None:
    path = write_broken_graph(tmp_path / "bad.h5", name)
    assert main(["info", str(path)]) == 1
    line = _single_error_line(capsys)
    assert line.startswith(f"hpcgnn: error: {path}: {BROKEN[name][2]}")
