"""Round trips through :class:`GraphFileWriter` and :class:`GraphFile` block reads."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

from hpcgnn.errors import ConfigError, InputError, OutputError
from hpcgnn.io import EdgeSorter, GraphFile, GraphFileWriter, edges
from hpcgnn.io import format as fmt
from hpcgnn.layout.block_counts import BlockCounts
from tests.graphs import random_graph_arrays, write_random_graph
from tests.io.test_validate import expected_adjacency


@pytest.mark.parametrize("directed", [False, True])
def test_round_trip(tmp_path: Path, directed: bool) -> None:
    g = random_graph_arrays(n=50, directed=directed, seed=1)
    path = write_random_graph(tmp_path / "g.h5", n=50, directed=directed, seed=1)
    a = expected_adjacency(g)
    with GraphFile(path) as f:
        meta = f.meta
        assert (meta.num_nodes, meta.num_edges, meta.num_features, meta.num_classes) == (
            50, a.nnz, 6, 3,
        )
        assert meta.directed is directed
        assert meta.format_version == fmt.UNWEIGHTED_VERSION == 1  # no weights: version 1
        assert meta.feature_dtype == np.float32
        assert meta.partition_offsets is None
        assert (f.read_csr(0, 50).toarray() == a.toarray()).all()
        assert (f.read_csr(0, 50, transpose=True).toarray() == a.T.toarray()).all()
        np.testing.assert_array_equal(f.read_features(0, 50), g["x"])
        np.testing.assert_array_equal(f.read_labels(0, 50), g["y"])
        for name in fmt.MASK_NAMES:
            np.testing.assert_array_equal(f.read_mask(name, 0, 50), g[name])
        np.testing.assert_array_equal(f.read_node_ids(0, 50), np.arange(50))


def test_block_reads_are_slices_of_the_whole(tmp_path: Path) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=50, directed=True, seed=2)
    with GraphFile(path) as f:
        whole = f.read_csr(0, 50).toarray()
        whole_t = f.read_csr(0, 50, transpose=True).toarray()
        x = f.read_features(0, 50)
        for lo, hi in [(0, 7), (7, 30), (30, 50), (13, 13)]:
            block = f.read_csr(lo, hi)
            assert block.shape == (hi - lo, 50)
            assert (block.toarray() == whole[lo:hi]).all()
            assert (f.read_csr(lo, hi, transpose=True).toarray() == whole_t[lo:hi]).all()
            np.testing.assert_array_equal(f.read_features(lo, hi), x[lo:hi])
            ptr = f.read_indptr(lo, hi)
            assert ptr.dtype == np.int64 and len(ptr) == hi - lo + 1


def test_datasets_are_chunked_and_compressed(tmp_path: Path) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=50, directed=True)
    with h5py.File(path, "r") as h5:
        names = ["adjacency/indptr", "adjacency/indices", "adjacency_t/indptr",
                 "adjacency_t/indices", "features", "labels", "masks/train", "masks/val",
                 "masks/test", "node_ids"]
        for name in names:
            ds = h5[name]
            assert ds.chunks is not None, name
            assert ds.compression == fmt.COMPRESSION, name
        assert h5["adjacency/indptr"].dtype == fmt.INDPTR_DTYPE
        assert h5["adjacency/indices"].dtype == fmt.index_dtype(50)
        assert h5.attrs["format"] == fmt.FORMAT_NAME
        assert h5.attrs["format_version"] == fmt.UNWEIGHTED_VERSION


def test_edge_sorter_with_many_buckets_gives_the_same_csr(tmp_path: Path, monkeypatch) -> None:
    one = write_random_graph(tmp_path / "one.h5", n=90, directed=True, seed=4)
    monkeypatch.setattr(edges, "EDGES_PER_BUCKET", 16)
    many = write_random_graph(tmp_path / "many.h5", n=90, directed=True, seed=4)
    with GraphFile(one) as f1, GraphFile(many) as f2:
        for t in (False, True):
            assert (f1.read_csr(0, 90, t) != f2.read_csr(0, 90, t)).nnz == 0


def test_a_full_disk_while_sorting_edges_is_one_error(tmp_path: Path, monkeypatch) -> None:
    def full(fh, array):
        raise OSError(errno.ENOSPC, "injected")

    monkeypatch.setattr(edges, "write_array", full)
    with pytest.raises(OutputError, match=rf"^temporary edge files in {tmp_path}/hpcgnn-edges-\w+: "
                                          r"No space left on device$"):
        with EdgeSorter(4, directed=False, tmpdir=tmp_path) as sorter:
            sorter.add(np.array([0, 1]), np.array([1, 2]))
    assert list(tmp_path.iterdir()) == []


def test_sorter_drops_self_loops_and_duplicates(tmp_path: Path) -> None:
    with EdgeSorter(4, directed=False) as s:
        s.add(np.array([0, 0, 1, 2, 2]), np.array([1, 1, 1, 3, 2]))
        with GraphFileWriter(tmp_path / "g.h5", num_nodes=4, num_features=1, num_classes=1,
                             directed=False, show_progress=False) as w:
            w.write_adjacency(s)
            w.write_features(0, np.zeros((4, 1)))
            w.write_labels(np.zeros(4, int))
            w.write_masks(*(np.zeros(4, bool),) * 3)
    with GraphFile(tmp_path / "g.h5") as f:
        a = f.read_csr(0, 4).toarray()
    expected = np.zeros((4, 4))
    expected[0, 1] = expected[1, 0] = expected[2, 3] = expected[3, 2] = 1
    np.testing.assert_array_equal(a, expected)


def test_sorter_bucket_of_self_loops_only_is_empty() -> None:
    with EdgeSorter(3, directed=True) as s:
        s.add(np.array([0, 1]), np.array([0, 1]))
        rows = [(b.counts.tolist(), b.indices.tolist()) for b in s.rows()]
    assert rows == [([0, 0, 0], [])]


def test_sorter_names_the_source_of_a_bad_id() -> None:
    with EdgeSorter(3, directed=False) as s:
        with pytest.raises(InputError, match=r"^e\.txt: vertex id 3 is out of range \[0, 3\)$"):
            s.add(np.array([0]), np.array([3]), "e.txt")
        with pytest.raises(InputError, match=r"^edge endpoint -1 is out of range \[0, 3\)$"):
            s.add(np.array([-1]), np.array([0]))


def _writer(path: Path) -> GraphFileWriter:
    return GraphFileWriter(path, num_nodes=3, num_features=2, num_classes=2, directed=False,
                           show_progress=False)


def test_incomplete_file_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "g.h5"
    with pytest.raises(InputError, match="incomplete"), _writer(path) as w:
        w.write_features(0, np.zeros((3, 2)))
    assert list(tmp_path.iterdir()) == []  # neither the file nor its temporary


def test_error_while_writing_removes_the_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "g.h5"
    path.write_text("previous")
    with pytest.raises(InputError, match="NaN"), _writer(path) as w:
        w.write_features(0, np.full((3, 2), np.nan))
    assert list(tmp_path.iterdir()) == [path] and path.read_text() == "previous"


def test_writer_never_follows_symlinks(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "g.h5.partial").symlink_to(victim)  # the temporary name writers once used
    write_random_graph(tmp_path / "g.h5", n=20)
    assert victim.read_text() == "precious" and (tmp_path / "g.h5.partial").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.h5", "g.h5.partial", "victim"]
    (tmp_path / "l.h5").symlink_to(victim)
    with pytest.raises(ConfigError, match="not a regular file"):
        _writer(tmp_path / "l.h5")
    assert victim.read_text() == "precious"


def test_writer_checks_its_inputs(tmp_path: Path) -> None:
    w = _writer(tmp_path / "g.h5")
    try:
        with pytest.raises(InputError, match="out of range"):
            w.write_labels(np.array([0, 2, 1]))
        with pytest.raises(InputError, match="shape"):
            w.write_masks(np.zeros(2, bool), np.zeros(3, bool), np.zeros(3, bool))
        with pytest.raises(InputError, match="out of order"):
            w.write_features(1, np.zeros((2, 2)))
    finally:
        w.abort()


def test_reader_rejects_missing_and_non_hdf5_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        GraphFile(tmp_path / "missing.h5")
    text = tmp_path / "text.h5"
    text.write_text("not hdf5\n")
    with pytest.raises(InputError, match="not a readable HDF5 file") as err:
        GraphFile(text)
    assert "\n" not in str(err.value)  # one line, whatever HDF5 says
    with pytest.raises(InputError, match="not a regular file"):
        GraphFile(tmp_path)  # a directory
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        GraphFile(fifo)  # opening it would block until a writer came


def test_reader_rejects_newer_format_versions(tmp_path: Path) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=20)
    with h5py.File(path, "r+") as h5:
        h5.attrs["format_version"] = fmt.FORMAT_VERSION + 1
    with pytest.raises(InputError, match="newer"):
        GraphFile(path)


def test_partition_is_recorded(tmp_path: Path) -> None:
    path = partitioned(tmp_path / "g.h5", None)
    with GraphFile(path) as f:
        assert f.meta.partition_offsets == (0, 1, 3)
        assert f.meta.partition_method == "metis"
        np.testing.assert_array_equal(f.read_partition_perm(), [2, 0, 1])
        assert f.meta.partition_blocks == () and f.meta.block_counts(2) is None  # none given


def partitioned(path: Path, blocks: dict[int, BlockCounts] | None) -> Path:
    """A 3-vertex file in 2 parts with the blocks' counts ``blocks``."""
    with _writer(path) as w:
        with EdgeSorter(3, directed=False) as s:
            s.add(np.array([0]), np.array([2]))
            w.write_adjacency(s)
        w.write_features(0, np.zeros((3, 2)))
        w.write_labels(np.array([0, 1, 1]))
        w.write_masks(*(np.zeros(3, bool),) * 3)
        w.write_partition(np.array([0, 1, 3]), np.array([2, 0, 1]), "metis", 1, blocks)
    return path


TWO_PARTS = {
    1: BlockCounts((2,), (2,), (0,), (0,), (0,), (0,)),
    2: BlockCounts((1, 1), (1, 1), (1, 1), (1, 1), (1, 1), (1, 1)),
}


def test_the_blocks_counts_are_recorded(tmp_path: Path) -> None:
    with GraphFile(partitioned(tmp_path / "g.h5", TWO_PARTS)) as f:
        assert f.meta.partition_blocks == tuple(TWO_PARTS.items())
        assert f.meta.block_counts(2) == TWO_PARTS[2] and f.meta.block_counts(4) is None


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda g: g.move("2", "3"), "'partition/blocks/3' does not name a block count of 2"),
        (lambda g: g.move("2", "two"), "'partition/blocks/two' does not name a block count"),
        (lambda g: g["2"].pop("fwd_recv"),
         "missing dataset 'partition/blocks/2/fwd_recv'"),
        (lambda g: g["2"]["in_edges"].write_direct(np.array([1, -1])),
         "'partition/blocks/2' has negative counts"),
    ],
)
def test_reader_refuses_counts_that_do_not_fit(tmp_path: Path, edit, words) -> None:
    path = partitioned(tmp_path / "g.h5", TWO_PARTS)
    with h5py.File(path, "r+") as h5:
        edit(h5[f"{fmt.PARTITION}/{fmt.PART_BLOCKS}"])
    with pytest.raises(InputError, match=re.escape(words)):
        GraphFile(path)


@pytest.mark.parametrize(
    "value, words",
    [
        (3.5, "attribute 'num_classes' is not an integer: 3.5"),
        (3.0, "attribute 'num_classes' is not an integer: 3.0"),
        ("3", "attribute 'num_classes' is not an integer: '3'"),
        (np.array([3, 4]), "attribute 'num_classes' is not an integer"),
        (True, "attribute 'num_classes' is not an integer: True"),
        (2**31, "num_classes=2147483648 is more than 2147483647; not a class count"),
        (10**12, "num_classes=1000000000000 is more than 2147483647"),
        (np.uint64(2**64 - 1), f"num_classes={2**64 - 1} is more than"),
    ],
)
def test_reader_refuses_a_num_classes_that_cannot_be_right(tmp_path: Path, value, words) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=20)
    with h5py.File(path, "r+") as h5:
        h5.attrs[fmt.ATTR_NUM_CLASSES] = value
    with pytest.raises(InputError, match=re.escape(words)) as info:
        GraphFile(path)
    assert "\n" not in str(info.value)


def test_reader_accepts_every_integer_attribute_type(tmp_path: Path) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=20, classes=3)
    for value in (np.int32(7), np.uint8(7), 7, np.int64(2**31 - 1)):
        with h5py.File(path, "r+") as h5:
            h5.attrs[fmt.ATTR_NUM_CLASSES] = value
        with GraphFile(path) as f:
            assert f.meta.num_classes == int(value) and type(f.meta.num_classes) is int


@pytest.mark.parametrize("attr", ["name", "source", "format"])
def test_text_attributes_that_are_not_utf8_are_one_line(tmp_path: Path, attr: str) -> None:
    path = write_random_graph(tmp_path / "g.h5", n=20)
    with h5py.File(path, "r+") as h5:
        h5.attrs[attr] = np.bytes_(b"\xff\xfe" + attr.encode())
    with pytest.raises(InputError, match=f"attribute '{attr}' is not UTF-8 text"):
        GraphFile(path)
