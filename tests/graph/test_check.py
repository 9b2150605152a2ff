"""The distributed structural check of a graph file (`check_graph`) and its content fingerprint."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from hpcgnn.errors import InputError
from hpcgnn.graph.check import check_graph, rows_fingerprint
from hpcgnn.io import validate as validate_mod
from hpcgnn.io.validate import validate_file
from tests.graphs import ALTERED, BROKEN, add_partition, write_broken_graph, write_random_graph
from tests.mpi import assert_all, assert_same_on_all_ranks, on_rank0


def _error(run) -> str | None:
    """The message of the ``InputError`` ``run()`` raises, without its path, or ``None``."""
    try:
        run()
    except InputError as err:
        return str(err).split(": ", 1)[1]
    return None


# -- fingerprints -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, bool])
def test_rows_fingerprint_adds_over_row_ranges_and_sees_positions(dtype) -> None:
    x = (np.random.default_rng(0).normal(size=(30, 4)) * 3).astype(dtype)
    whole = rows_fingerprint(x, 0)
    assert (rows_fingerprint(x[:11], 0) + rows_fingerprint(x[11:], 11)) % 2**64 == whole
    swapped = x[[1, 0, *range(2, 30)]]
    assert (rows_fingerprint(swapped, 0) == whole) == bool(np.array_equal(swapped, x))
    assert rows_fingerprint(x, 1) != whole


# -- serial -------------------------------------------------------------------------------------
def test_a_valid_file_passes_and_content_only_when_asked(tmp_path: Path, world) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=50, directed=True, seed=2)
    assert check_graph(world, path) is None
    content = check_graph(world, path, content=True)
    assert isinstance(content, str) and len(content) == 16
    assert check_graph(world, path, content=True) == content


def test_small_blocks_give_the_same_content(tmp_path: Path, world, monkeypatch) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=50, seed=2)
    content = check_graph(world, path, content=True)
    monkeypatch.setattr(validate_mod, "EDGE_BLOCK", 5)
    monkeypatch.setattr(validate_mod, "ROW_BLOCK", 3)
    monkeypatch.setattr(validate_mod, "FEATURE_BLOCK_BYTES", 16)
    assert check_graph(world, path, content=True) == content


@pytest.mark.parametrize("change", sorted(ALTERED))
def test_content_changes_with_every_part_of_the_graph(tmp_path: Path, world, change) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=50, seed=2)
    other = tmp_path / "other.h5"
    shutil.copy(path, other)
    ALTERED[change](other)
    validate_file(other, show_progress=False)  # still a valid graph of the same size
    assert check_graph(world, other, content=True) != check_graph(world, path, content=True)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_files_fail_with_the_line_of_info(tmp_path: Path, world, name) -> None:
    path = write_broken_graph(tmp_path / "g.h5", name)
    words = BROKEN[name][2]
    line = _error(lambda: check_graph(world, path))
    assert line is not None and words in line
    assert line == _error(lambda: validate_file(path, show_progress=False))


# -- distributed --------------------------------------------------------------------------------
@pytest.mark.mpi
def test_content_does_not_depend_on_the_number_of_ranks(world, graph_file, shared_tmp) -> None:
    from mpi4py import MPI

    from hpcgnn.comm import Comm

    path = graph_file(n=37, directed=True, seed=4)  # 37: uneven slices at 2, 3, 4 ranks
    on_rank0(world, add_partition, path, [0, 20, 37], np.random.default_rng(1).permutation(37))
    everyone = check_graph(world, path, content=True)
    alone = Comm(MPI.COMM_SELF, name="self")
    assert_all(world, everyone == check_graph(alone, path, content=True), "content differs")
    assert_same_on_all_ranks(world, everyone)


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_files_fail_on_every_rank(world, shared_tmp, name) -> None:
    path = shared_tmp / f"{name}.h5"
    on_rank0(world, write_broken_graph, path, name)
    line = _error(lambda: check_graph(world, path))
    assert_all(world, line == _error(lambda: validate_file(path, show_progress=False)), line)
    assert_same_on_all_ranks(world, line)


# -- edge weights -------------------------------------------------------------------------------
@pytest.mark.parametrize("directed", [False, True])
def test_a_weighted_file_passes_and_its_weights_are_content(tmp_path: Path, world, directed):
    path = write_random_graph(tmp_path / "g.h5", n=50, directed=directed, seed=2,
                              weights=np.float32)
    content = check_graph(world, path, content=True)
    other = tmp_path / "other.h5"
    shutil.copy(path, other)
    with h5py.File(other, "r+") as h5:  # one edge's weight, in every place it is stored
        group = "adjacency_t" if directed else "adjacency"
        rows, cols = _entries(h5, "adjacency")
        i, j = int(rows[5]), int(cols[5])
        h5["adjacency/data"][5] *= 2
        rows_t, cols_t = _entries(h5, group)
        k = int(np.flatnonzero((rows_t == j) & (cols_t == i))[0])
        h5[f"{group}/data"][k] = h5["adjacency/data"][5]
    validate_file(other, show_progress=False)  # still valid
    assert check_graph(world, other, content=True) != content


def _entries(h5: h5py.File, group: str) -> tuple[np.ndarray, np.ndarray]:
    ptr = h5[f"{group}/indptr"][()]
    return np.repeat(np.arange(len(ptr) - 1), np.diff(ptr)), h5[f"{group}/indices"][()]


@pytest.mark.mpi
def test_weighted_content_does_not_depend_on_the_number_of_ranks(world, shared_tmp) -> None:
    from mpi4py import MPI

    from hpcgnn.comm import Comm

    path = shared_tmp / "w.h5"
    on_rank0(world, write_random_graph, path, n=37, directed=True, seed=4, weights=np.float64)
    everyone = check_graph(world, path, content=True)
    alone = Comm(MPI.COMM_SELF, name="self")
    assert_all(world, everyone == check_graph(alone, path, content=True), "content differs")
    assert_same_on_all_ranks(world, everyone)
