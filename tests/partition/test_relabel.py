"""Relabelled files: valid, isomorphic under ``perm``, parts contiguous, data permuted."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.errors import OutputError
from hpcgnn.io import GraphFile
from hpcgnn.io import format as fmt
from hpcgnn.io.validate import validate_file
from hpcgnn.layout.block_counts import partition_block_counts
from hpcgnn.partition import (
    METHODS,
    compute_partition,
    inverse_permutation,
    permute_csr,
    relabel,
    relabelling,
    summarise,
    write_relabelled,
)
from tests.graphs import write_random_graph

N = 70


def read_all(path: Path) -> dict:
    with GraphFile(path) as f:
        n = f.meta.num_nodes
        out = {
            "meta": f.meta,
            "a": f.read_csr(0, n).toarray(),
            "at": f.read_csr(0, n, transpose=True).toarray(),
            "x": f.read_features(0, n),
            "y": f.read_labels(0, n),
            "ids": f.read_node_ids(0, n),
            **{m: f.read_mask(m, 0, n) for m in fmt.MASK_NAMES},
        }
        if f.meta.partition_offsets is not None:
            out["perm"] = f.read_partition_perm()
    return out


def partition(src_path: Path, out: Path, method: str, k: int, **kwargs) -> np.ndarray:
    with GraphFile(src_path) as src:
        a = src.read_csr(0, src.meta.num_nodes)
        parts = compute_partition(method, a, k, seed=3)
        s = summarise(a, parts, k, method, src.meta.directed)
        write_relabelled(src, out, parts, k, method, s.edge_cut, show_progress=False, **kwargs)
    return parts


def test_relabelling_orders_by_part_then_old_id() -> None:
    perm, offsets = relabelling(np.array([2, 0, 2, 1, 0]), 4)
    np.testing.assert_array_equal(perm, [1, 4, 3, 0, 2])
    np.testing.assert_array_equal(offsets, [0, 2, 3, 5, 5])
    np.testing.assert_array_equal(inverse_permutation(perm)[perm], np.arange(5))


def test_permute_csr_is_p_a_pt_with_sorted_rows() -> None:
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    a = sp.random(30, 30, density=0.2, format="csr", random_state=1)
    perm = rng.permutation(30)
    b = permute_csr(a, perm, inverse_permutation(perm))
    np.testing.assert_array_equal(b.toarray(), a.toarray()[np.ix_(perm, perm)])
    assert b.has_sorted_indices
    for i in range(30):
        row = b.indices[b.indptr[i] : b.indptr[i + 1]]
        assert (np.diff(row) > 0).all()


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("method", METHODS)
def test_relabelled_file_is_the_same_graph(tmp_path: Path, method: str, directed: bool) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=N, directed=directed, seed=11)
    out = tmp_path / "gp.h5"
    parts = partition(src, out, method, 4)
    report = validate_file(out, show_progress=False)
    old, new = read_all(src), read_all(out)
    perm = new["perm"]
    assert sorted(perm) == list(range(N))
    offsets = np.array(new["meta"].partition_offsets)
    assert new["meta"].partition_method == method
    # parts are contiguous id ranges, stable by old id within a part
    new_parts = parts[perm]
    assert (np.diff(new_parts) >= 0).all()
    np.testing.assert_array_equal(np.searchsorted(offsets, np.arange(N), "right") - 1, new_parts)
    for k in range(4):
        assert (np.diff(perm[offsets[k] : offsets[k + 1]]) > 0).all()
    # A_new[i, j] == A_old[perm[i], perm[j]], A^T likewise
    np.testing.assert_array_equal(new["a"], old["a"][np.ix_(perm, perm)])
    np.testing.assert_array_equal(new["at"], new["a"].T)
    np.testing.assert_array_equal(new["x"], old["x"][perm])
    np.testing.assert_array_equal(new["y"], old["y"][perm])
    np.testing.assert_array_equal(new["ids"], old["ids"][perm])
    for m in fmt.MASK_NAMES:
        np.testing.assert_array_equal(new[m], old[m][perm])
    # the recorded partition statistics are those of the new file
    assert report.partition is not None
    assert report.warnings == ()
    assert report.partition.sizes == tuple(np.bincount(parts, minlength=4))
    meta = new["meta"]
    assert (meta.num_edges, meta.directed, meta.num_classes) == (
        old["meta"].num_edges, directed, old["meta"].num_classes,
    )
    # every coarsening a run can follow has its blocks' nonzeros and halos recorded
    a = sp.csr_matrix(new["a"])
    assert meta.partition_blocks == tuple(
        partition_block_counts(a, a.T.tocsr(), offsets).items()
    )
    assert meta.block_counts(2) is not None and meta.block_counts(3) is None


def test_one_part_keeps_the_order(tmp_path: Path) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=N)
    partition(src, tmp_path / "gp.h5", "metis", 1)
    old, new = read_all(src), read_all(tmp_path / "gp.h5")
    np.testing.assert_array_equal(new["perm"], np.arange(N))
    np.testing.assert_array_equal(new["a"], old["a"])
    np.testing.assert_array_equal(new["x"], old["x"])
    assert new["meta"].partition_offsets == (0, N)


def test_features_spilled_to_disk_match(tmp_path: Path) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=N, features=5)
    partition(src, tmp_path / "mem.h5", "random", 3)
    # 5 float32 features = 20 bytes a row: 7 buckets of 11 rows, through spill files
    partition(src, tmp_path / "disk.h5", "random", 3, feature_memory_bytes=220)
    mem, disk = read_all(tmp_path / "mem.h5"), read_all(tmp_path / "disk.h5")
    np.testing.assert_array_equal(mem["x"], disk["x"])
    np.testing.assert_array_equal(disk["x"], read_all(src)["x"][disk["perm"]])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk.h5", "g.h5", "mem.h5"]


def test_repartitioning_composes_the_permutation(tmp_path: Path) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=N, directed=True)
    partition(src, tmp_path / "p1.h5", "random", 3)
    partition(tmp_path / "p1.h5", tmp_path / "p2.h5", "metis", 2)
    orig, p2 = read_all(src), read_all(tmp_path / "p2.h5")
    perm = p2["perm"]  # relative to the original, unpartitioned numbering
    np.testing.assert_array_equal(p2["ids"], orig["ids"][perm])
    np.testing.assert_array_equal(p2["a"], orig["a"][np.ix_(perm, perm)])
    np.testing.assert_array_equal(p2["x"], orig["x"][perm])
    assert len(p2["meta"].partition_offsets) == 3
    validate_file(tmp_path / "p2.h5", show_progress=False)


def test_a_full_disk_while_spilling_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=N, features=5)

    def full(fh, array):
        raise OSError(errno.ENOSPC, "injected")

    monkeypatch.setattr(relabel, "write_array", full)
    with pytest.raises(OutputError, match=r"^temporary feature files in .*/\.hpcgnn-permute-\w+: "
                                          r"No space left on device$"):
        partition(src, tmp_path / "disk.h5", "random", 3, feature_memory_bytes=220)
    assert [p.name for p in tmp_path.iterdir()] == ["g.h5"]


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("method", ["random", "metis"])
def test_relabelling_keeps_the_weights(tmp_path: Path, method: str, directed: bool) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=N, directed=directed, seed=11,
                             weights=np.float64)
    out = tmp_path / "gp.h5"
    partition(src, out, method, 4)
    validate_file(out, show_progress=False)  # finite, symmetric or transposed weights
    with GraphFile(src) as f:
        a_old = f.read_csr(0, N, weights=True).toarray()
    with GraphFile(out) as f:
        assert f.meta.weighted and f.meta.format_version == 2
        a_new = f.read_csr(0, N, weights=True)
        at_new = f.read_csr(0, N, transpose=True, weights=True).toarray()
        perm = f.read_partition_perm()
    assert a_new.dtype == np.float64  # the input's weight dtype kept
    inv = inverse_permutation(perm)
    np.testing.assert_array_equal(a_new.toarray()[np.ix_(inv, inv)], a_old)  # permuted back
    np.testing.assert_array_equal(at_new, a_new.toarray().T)


def test_an_unweighted_file_stays_unweighted(tmp_path: Path) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=N, seed=11)
    partition(src, tmp_path / "gp.h5", "random", 3)
    with GraphFile(tmp_path / "gp.h5") as f:
        assert not f.meta.weighted and f.meta.format_version == 1
