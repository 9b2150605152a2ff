"""``prepare`` inputs that declare impossible sizes: one line, in seconds, nothing written.

The memory checks run against ``HPCGNN_MEMORY_LIMIT`` = 4 GiB, so the cases fail the same
way on a laptop and on a large node.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from tests.mpi import on_rank0
from tests.prepare.test_ogb import fake_ogb
from tests.prepare.test_planetoid import TEST_IDS, fake_planetoid, legacy_pickle
from tests.robustness.harness import expect_error_untouched


@pytest.fixture(autouse=True)
def _memory_limit(monkeypatch):
    monkeypatch.setenv("HPCGNN_MEMORY_LIMIT", str(4 << 30))


def _test_index(root: Path, last: int) -> Path:
    """A fake CiteSeer under ``root`` whose last test id is ``last``; returns the index file."""
    fake_planetoid(root)
    path = root / "ind.citeseer.test.index"
    path.write_text("\n".join(map(str, [*TEST_IDS[:-1], last])) + "\n")
    return path


@pytest.mark.mpi
@pytest.mark.parametrize(("last", "words"), [
    (10**10, ["test id 10000000000 is beyond the 30 vertices"]),
    (30, ["test id 30 is beyond the 30 vertices"]),
    (-3, ["test id -3 is negative"]),
])
def test_planetoid_test_ids_outside_the_graph(shared_tmp, world, capfd, last, words):
    root = shared_tmp / "planetoid"
    index = on_rank0(world, _test_index, root, last)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["prepare", "planetoid", "--root", root, "--name", "citeseer",
         "--out", shared_tmp / "g.h5"],
        str(index), *words,
    )


def _huge_planetoid(root: Path) -> None:
    """A fake CiteSeer whose allx and ally declare 10^10 rows in a few bytes (COO, empty)."""
    fake_planetoid(root)
    rows = 10**10
    for part, width in (("allx", 5), ("ally", 3)):
        (root / f"ind.citeseer.{part}").write_bytes(legacy_pickle(sp.coo_matrix((rows, width))))
    (root / "ind.citeseer.test.index").write_text(
        "\n".join(str(rows + k) for k in range(TEST_IDS.size)) + "\n"
    )


@pytest.mark.mpi
def test_planetoid_declaring_more_vertices_than_fit_in_memory(shared_tmp, world, capfd):
    root = shared_tmp / "planetoid"
    on_rank0(world, _huge_planetoid, root)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["prepare", "planetoid", "--root", root, "--name", "citeseer",
         "--out", shared_tmp / "g.h5"],
        "10000000009 vertices", "GiB of memory", "4.00 GiB available",
    )


@pytest.mark.mpi
@pytest.mark.parametrize(("flags", "words"), [
    (["--nodes", "1000000000000"], "--nodes 1000000000000"),
    (["--features", "1000000000"], "--features 1000000000"),
    (["--nodes", "100000", "--classes", "100000", "--features", "100000"], "--classes 100000"),
])
def test_synthetic_sizes_beyond_memory(shared_tmp, world, capfd, flags, words):
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["prepare", "synthetic", *flags, "--out", shared_tmp / "g.h5", "--quiet"],
        words, "GiB of memory", "4.00 GiB available",
    )


def _edges(path: Path) -> None:
    path.write_text("0 1\n1 2\n2 0\n")


@pytest.mark.mpi
@pytest.mark.parametrize(("flags", "words"), [
    (["--num-nodes", "1000000000000"], "--num-nodes 1000000000000"),
    (["--feature-dim", "1000000000"], "--feature-dim 1000000000"),
])
def test_edgelist_sizes_beyond_memory(shared_tmp, world, capfd, flags, words):
    edges = shared_tmp / "e.txt"
    on_rank0(world, _edges, edges)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["prepare", "edgelist", "--edges", edges, *flags, "--out", shared_tmp / "g.h5"],
        words, "GiB of memory",
    )


def _huge_npy(path: Path) -> None:
    """A few bytes whose ``.npy`` header declares 10^12 int64 labels."""
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(
            fh, {"descr": "<i8", "fortran_order": False, "shape": (10**12,)}
        )
        fh.write(np.arange(3, dtype=np.int64).tobytes())


@pytest.mark.mpi
def test_edgelist_labels_declaring_a_huge_array(shared_tmp, world, capfd):
    edges, labels = shared_tmp / "e.txt", shared_tmp / "y.npy"
    on_rank0(world, _edges, edges)
    on_rank0(world, _huge_npy, labels)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["prepare", "edgelist", "--edges", edges, "--labels", labels,
         "--out", shared_tmp / "g.h5"],
        str(labels),
    )


def _huge_count(root: Path) -> None:
    fake_ogb(root)
    with gzip.open(root / "raw" / "num-node-list.csv.gz", "wt") as fh:
        fh.write("1000000000000\n")


@pytest.mark.mpi
def test_ogb_declaring_a_huge_vertex_count(shared_tmp, world, capfd):
    root = shared_tmp / "ogbn_fake"
    on_rank0(world, _huge_count, root)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["prepare", "ogb", "--root", root, "--out", shared_tmp / "g.h5", "--quiet"],
        "num-node-list.csv.gz says 1000000000000 vertices",
    )



def _good_output(path: Path) -> None:
    path.write_bytes(b"a previous good output")


def _big_ogb_label(root: Path) -> None:
    fake_ogb(root)
    with gzip.open(root / "raw" / "node-label.csv.gz", "rt") as fh:
        lines = fh.read().splitlines()
    lines[0] = "1000000000000"
    with gzip.open(root / "raw" / "node-label.csv.gz", "wt") as fh:
        fh.write("\n".join(lines) + "\n")


@pytest.mark.mpi
def test_a_label_beyond_any_class_count_is_refused(shared_tmp, world, capfd):
    # a file the reader would refuse (num_classes > 2^31 - 1) is never written, and the
    # previous output stays
    edges, labels, out = shared_tmp / "e.txt", shared_tmp / "y.npy", shared_tmp / "g.h5"
    on_rank0(world, _edges, edges)
    on_rank0(world, np.save, labels, np.array([0, 10**12, 1]))
    on_rank0(world, _good_output, out)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["prepare", "edgelist", "--edges", edges, "--labels", labels, "--out", out],
        "label 1000000000000 is beyond the largest class id",
    )
    root = shared_tmp / "ogbn_fake"
    on_rank0(world, _big_ogb_label, root)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["prepare", "ogb", "--root", root, "--out", out, "--quiet"],
        "label 1000000000000 is beyond the largest class id",
    )
