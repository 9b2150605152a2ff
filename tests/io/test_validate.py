"""Full validation (:func:`hpcgnn.io.validate.validate_file`): statistics and content checks."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import GraphFile, GraphFileWriter
from hpcgnn.io import validate as validate_mod
from hpcgnn.io.edges import CsrRows
from hpcgnn.io.validate import edge_fingerprint, validate_file
from tests.graphs import random_graph_arrays, write_random_graph


def expected_adjacency(g: dict) -> sp.csr_matrix:
    """The CSR the writer should store for ``random_graph_arrays`` output."""
    n = g["n"]
    src, dst = g["src"], g["dst"]
    if not g["directed"]:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    keep = src != dst
    a = sp.csr_matrix((np.ones(keep.sum()), (src[keep], dst[keep])), shape=(n, n))
    a.sum_duplicates()
    a.data[:] = 1
    return a


def write_rows(
    path: Path,
    rows: list[list[int]],
    *,
    directed: bool = False,
    rows_t: list[list[int]] | None = None,
    labels: list[int] | None = None,
    train: list[int] | None = None,
    val: list[int] | None = None,
    test: list[int] | None = None,
    node_ids: list[int] | None = None,
) -> Path:
    """Write a tiny graph whose CSR rows are given literally (nothing is cleaned up).

    ``train`` defaults to the first labelled vertex (a file without one is refused).
    """
    n = len(rows)
    y = labels if labels is not None else [0] * n
    if train is None:
        train = [next(v for v, c in enumerate(y) if c >= 0)] if any(c >= 0 for c in y) else []

    def blocks(rs: list[list[int]]) -> list[CsrRows]:
        counts = np.array([len(r) for r in rs], dtype=np.int64)
        flat = np.array([c for r in rs for c in r], dtype=np.int32)
        return [CsrRows(0, counts, flat)]

    def mask(ids: list[int] | None) -> np.ndarray:
        m = np.zeros(n, bool)
        m[ids or []] = True
        return m

    with GraphFileWriter(path, num_nodes=n, num_features=2, num_classes=2, directed=directed,
                         show_progress=False) as w:
        w.write_csr("adjacency", blocks(rows))
        if directed:
            w.write_csr("adjacency_t", blocks(rows_t or []))
        w.write_features(0, np.ones((n, 2), np.float32))
        w.write_labels(np.array(y))
        w.write_masks(mask(train), mask(val), mask(test))
        if node_ids is not None:
            w.write_node_ids(np.array(node_ids))
    return path


# -- statistics -----------------------------------------------------------------------------
@pytest.mark.parametrize("directed", [False, True])
def test_statistics_match_the_arrays(tmp_path: Path, directed: bool) -> None:
    g = random_graph_arrays(n=80, classes=4, directed=directed, seed=3)
    path = write_random_graph(tmp_path / "g.h5", n=80, classes=4, directed=directed, seed=3)
    report = validate_file(path, show_progress=False)
    a = expected_adjacency(g)
    out_deg = np.diff(a.indptr)
    in_deg = np.bincount(a.indices, minlength=80)
    meta = report.meta
    assert (meta.num_nodes, meta.num_edges, meta.num_features, meta.num_classes) == (
        80, a.nnz, 6, 4,
    )
    assert meta.directed is directed
    assert (report.train, report.val, report.test) == (
        g["train"].sum(), g["val"].sum(), g["test"].sum(),
    )
    assert report.class_histogram == tuple(np.bincount(g["y"], minlength=4))
    assert report.unlabelled == 0
    assert report.out_degree.minimum == out_deg.min()
    assert report.out_degree.maximum == out_deg.max()
    assert report.out_degree.mean == pytest.approx(out_deg.mean())
    assert report.out_degree.median == np.median(out_deg)
    assert report.out_degree.zero == np.count_nonzero(out_deg == 0)
    if directed:
        assert report.undirected_edges is None
        assert report.in_degree is not None
        assert report.in_degree.maximum == in_deg.max()
        assert report.isolated == np.count_nonzero((out_deg == 0) & (in_deg == 0))
    else:
        assert report.undirected_edges == a.nnz // 2
        assert report.in_degree is None
        assert report.isolated == np.count_nonzero(out_deg == 0)
    assert report.partition is None
    assert report.warnings == ()
    assert (report.self_loops, report.duplicates, report.unsorted_rows) == (0, 0, 0)


def test_small_blocks_give_the_same_report(tmp_path: Path, monkeypatch) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=70, directed=True, seed=5)
    whole = validate_file(path, show_progress=False)
    monkeypatch.setattr(validate_mod, "EDGE_BLOCK", 7)
    monkeypatch.setattr(validate_mod, "ROW_BLOCK", 5)
    monkeypatch.setattr(validate_mod, "FEATURE_BLOCK_BYTES", 16)
    assert validate_file(path, show_progress=False) == whole


def test_errors_name_the_right_vertex_with_small_blocks(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(validate_mod, "ROW_BLOCK", 8)
    monkeypatch.setattr(validate_mod, "FEATURE_BLOCK_BYTES", 16)
    path = write_random_graph(tmp_path / "g.h5", n=60)
    with h5py.File(path, "r+") as h5:
        h5["features"][45, 1] = np.nan
    with pytest.raises(InputError, match="vertex 45"):
        validate_file(path, show_progress=False)
    path = write_random_graph(tmp_path / "g2.h5", n=60)
    with h5py.File(path, "r+") as h5:
        ptr = h5["adjacency/indptr"]
        ptr[37] = ptr[38] + 1
    with pytest.raises(InputError, match="between positions 37 and 38"):
        validate_file(path, show_progress=False)


# -- harmless irregularities --------------------------------------------------------------------
def test_self_loops_duplicates_and_unsorted_rows_are_warnings(tmp_path: Path) -> None:
    rows = [[0, 1], [0, 2, 2], [1, 1, 3], [2]]  # symmetric multiset, loop at 0, 1-2 twice
    rows[2] = [3, 1, 1]  # unsorted row
    report = validate_file(write_rows(tmp_path / "g.h5", rows), show_progress=False)
    assert report.self_loops == 1
    assert report.duplicates == 2
    assert report.unsorted_rows == 1
    assert len(report.warnings) == 3
    assert any("self loop" in w for w in report.warnings)


# -- content errors -----------------------------------------------------------------------------
def test_undirected_must_be_symmetric(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [], []])
    with pytest.raises(InputError, match="not symmetric: vertex 0"):
        validate_file(path, show_progress=False)


def test_symmetry_checked_beyond_degrees(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [2], [0]])  # a directed cycle
    with pytest.raises(InputError, match=r"not symmetric \(some edge i -> j has no j -> i\)"):
        validate_file(path, show_progress=False)


def test_transpose_degrees_must_match(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1, 2], [], []], directed=True,
                      rows_t=[[], [0], [1]])
    with pytest.raises(InputError, match="not the transpose"):
        validate_file(path, show_progress=False)


def test_transpose_edges_must_match(tmp_path: Path) -> None:
    # A: 0->1, 1->2, 2->0; claimed A^T reverses the cycle the wrong way round.
    path = write_rows(tmp_path / "g.h5", [[1], [2], [0]], directed=True,
                      rows_t=[[1], [2], [0]])
    with pytest.raises(InputError, match=r"not the transpose of .adjacency. \(the edges differ\)"):
        validate_file(path, show_progress=False)


def test_masked_vertex_must_be_labelled(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [0], []], labels=[0, -1, 1], val=[1])
    with pytest.raises(InputError, match="vertex 1 is in the val mask but unlabelled"):
        validate_file(path, show_progress=False)


def test_unlabelled_vertices_outside_masks_are_fine(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [0], []], labels=[0, -1, 1], train=[0, 2])
    report = validate_file(path, show_progress=False)
    assert report.unlabelled == 1
    assert report.class_histogram == (1, 1)


def test_masks_must_be_disjoint(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [0], []], train=[0, 2], test=[2])
    with pytest.raises(InputError, match="vertex 2 is in both the train and test masks"):
        validate_file(path, show_progress=False)


def test_node_ids_must_be_unique(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [0], []], node_ids=[7, 9, 7])
    with pytest.raises(InputError, match="original id 7"):
        validate_file(path, show_progress=False)


def _add_partition(path: Path, offsets: list[int], perm: list[int]) -> None:
    with h5py.File(path, "r+") as h5:
        g = h5.create_group("partition")
        g.create_dataset("offsets", data=np.array(offsets))
        g.create_dataset("perm", data=np.array(perm))
        g.attrs["method"] = "block"
        g.attrs["edge_cut"] = 1


def test_partition_statistics(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [0, 2], [1, 3], [2]])
    _add_partition(path, [0, 2, 4], [0, 1, 2, 3])
    report = validate_file(path, show_progress=False)
    p = report.partition
    assert p is not None
    assert p.method == "block"
    assert p.sizes == (2, 2)
    assert p.edges == (3, 3)
    assert p.edge_cut == 1  # the undirected edge 1-2, counted once
    assert p.vertex_balance == 1.0
    assert report.warnings == ()


def test_recorded_edge_cut_mismatch_is_a_warning(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [0, 2], [1, 3], [2]])
    _add_partition(path, [0, 1, 4], [0, 1, 2, 3])  # cut is 1 here too...
    with h5py.File(path, "r+") as h5:
        h5["partition"].attrs["edge_cut"] = 5  # ...but 5 was recorded
    report = validate_file(path, show_progress=False)
    assert any("recorded edge cut 5" in w for w in report.warnings)


def test_partition_perm_must_be_a_permutation(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [0], [], []])
    _add_partition(path, [0, 2, 4], [0, 1, 1, 3])
    with pytest.raises(InputError, match=r"not a permutation .* id 2 is missing"):
        validate_file(path, show_progress=False)


def test_partition_perm_range(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [0], [], []])
    _add_partition(path, [0, 2, 4], [0, 1, 4, 3])
    with pytest.raises(InputError, match="vertex id 4 out of range"):
        validate_file(path, show_progress=False)


def test_partition_offsets_must_cover_the_vertices(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [0], [], []])
    _add_partition(path, [0, 3, 2, 4], [0, 1, 2, 3])
    with pytest.raises(InputError, match="partition offsets"):
        validate_file(path, show_progress=False)


# -- fingerprints -------------------------------------------------------------------------------
def test_edge_fingerprint_is_order_independent_and_additive() -> None:
    rng = np.random.default_rng(0)
    src = rng.integers(0, 50, 200)
    dst = rng.integers(0, 50, 200)
    whole = edge_fingerprint(src, dst, 50)
    order = rng.permutation(200)
    assert edge_fingerprint(src[order], dst[order], 50) == whole
    halves = edge_fingerprint(src[:90], dst[:90], 50) + edge_fingerprint(src[90:], dst[90:], 50)
    assert halves % 2**64 == whole
    assert edge_fingerprint(dst, src, 50) != whole


# -- checks shared with the distributed check (hpcgnn.graph.check) ----------------------------
def test_indptr_problem_of_overlapping_slices_is_that_of_the_whole() -> None:
    n, nnz, cuts = 6, 9, [0, 2, 2, 4, 6]  # slices overlap by one entry; one is empty
    for ptr, whole in [
        ([0, 2, 2, 5, 6, 7, 9], None),
        ([1, 2, 2, 5, 6, 7, 9], "'p' starts at 1, expected 0"),
        ([0, 2, 2, 5, 4, 7, 9], "'p' is not monotone: it decreases from 5 to 4 between "
                                "positions 3 and 4"),
        ([0, 2, 2, 5, 6, 7, 8], "'p' ends at 8, expected num_edges=9"),
    ]:
        ptr = np.array(ptr)
        assert validate_mod.indptr_problem("p", ptr, 0, n, nnz) == whole
        found = [
            validate_mod.indptr_problem("p", ptr[a : b + 1], a, n, nnz)
            for a, b in zip(cuts[:-1], cuts[1:], strict=True)
        ]
        assert [f for f in found if f] == ([whole] if whole else [])


def test_row_blocks_and_csr_scans_of_row_slices_add_up(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(validate_mod, "EDGE_BLOCK", 5)
    path = write_random_graph(tmp_path / "g.h5", n=30, seed=6)

    def scan(gf, ptr: np.ndarray, lo: int) -> validate_mod.CsrScan:
        res = validate_mod.CsrScan(30)
        blocks = validate_mod.row_blocks(ptr, lo)
        assert [a for a, _ in blocks[1:]] == [b for _, b in blocks[:-1]]
        for a, b in blocks:
            assert b > a and (ptr[b - lo] - ptr[a - lo] <= 5 or b == a + 1)
            res.add(a, gf.read_csr(a, b))
        return res

    with GraphFile(path) as gf:
        ptr = gf.read_indptr(0, 30)
        whole = scan(gf, ptr, 0)
        parts = [scan(gf, ptr[a : b + 1], a) for a, b in [(0, 7), (7, 7), (7, 30)]]
    assert whole.forward == whole.backward  # symmetric
    assert validate_mod.edges_problem(False, whole.forward, whole.backward) is None
    for field in ("forward", "backward", "self_loops", "duplicates"):
        assert sum(getattr(p, field) for p in parts) % 2**64 == getattr(whole, field)
    assert "not the transpose" in validate_mod.edges_problem(True, whole.forward, 1)


def test_node_ids_problem_names_the_smallest_repeat_of_any_part() -> None:
    assert validate_mod.first_duplicate(np.array([9, 4, 9, 4, 7])) == 4
    assert validate_mod.first_duplicate(np.array([3, 1, 2])) is None
    assert validate_mod.node_ids_problem([None, 9, 4]) == (
        "'node_ids' is not unique: original id 4 occurs more than once"
    )
    assert validate_mod.node_ids_problem([None, None]) is None


def test_permutation_problem_of_id_ranges_is_that_of_the_whole() -> None:
    values = np.array([0, 1, 1, 3, 5, 5, 5, 7])  # 2, 4 and 6 missing; 5 three times
    IdCounts = validate_mod.IdCounts
    whole = validate_mod.permutation_problem("p", 8, [IdCounts.of(values, 0, 8)])
    assert whole == "'p' is not a permutation of 0..7: id 2 is missing (id 5 occurs 3 times)"
    cuts = [0, 3, 3, 6, 8]
    parts = [
        IdCounts.of(values[(values >= a) & (values < b)], a, b)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True)
    ]
    assert validate_mod.permutation_problem("p", 8, parts) == whole
    assert validate_mod.permutation_problem("p", 4, [IdCounts.of(np.array([2, 0, 3, 1]), 0, 4)]) \
        is None
    assert validate_mod.id_range_problem("p", -2, 9, 8) == (
        "'p' has vertex id -2 out of range [0, 8)"
    )


def test_a_huge_class_count_costs_only_the_labels_present(tmp_path):
    path = write_random_graph(tmp_path / "g.h5", n=30, classes=3, seed=2)
    with h5py.File(path, "r+") as h5:
        h5.attrs["num_classes"] = 2**31 - 1
    report = validate_file(path)
    assert report.meta.num_classes == 2**31 - 1
    assert len(report.class_histogram) <= 3 and sum(report.class_histogram) == 30


def test_an_empty_train_mask_is_refused(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "g.h5", [[1], [0]], train=[], val=[0], test=[1])
    with pytest.raises(InputError, match="the train mask is empty: no vertex to train on"):
        validate_file(path, show_progress=False)
