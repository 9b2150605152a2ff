"""A flipped bit in any dataset of a file hpcgnn wrote is one line naming the dataset.

Every chunked dataset the writers make carries HDF5's Fletcher-32 checksum
(:data:`hpcgnn.io.output.CHECKSUM`); before it, a flip that the deflate stream still
decoded (in ``adjacency/indices``, say) was read as wrong values and accepted.
"""

import shutil

import h5py
import pytest

from hpcgnn.cli.main import main
from tests.graphs import write_random_graph
from tests.mpi import assert_all, on_rank0
from tests.robustness.harness import expect_error

#: (file layout, dataset) pairs: dense and CSR features, and a partitioned file.
DATASETS = [
    ("dense", "adjacency/indptr"), ("dense", "adjacency/indices"), ("dense", "features"),
    ("dense", "labels"), ("dense", "masks/train"), ("dense", "node_ids"),
    ("csr", "features_csr/indptr"), ("csr", "features_csr/indices"),
    ("csr", "features_csr/data"), ("partitioned", "partition/offsets"),
    ("partitioned", "partition/perm"),
]


def _write(world, tmp, layout):
    """The file of ``layout`` (collective: partition runs on every rank)."""
    path = tmp / f"{layout}.h5"
    on_rank0(world, write_random_graph, path, n=80, features=12, feature_density=0.3, seed=2,
             sparse_features=layout == "csr")
    if layout != "partitioned":
        return path
    out = tmp / "partitioned-p.h5"
    rc = main(["partition", str(path), "--parts", "2", "--method", "block", "--quiet",
               "--out", str(out)])
    assert_all(world, rc == 0, f"partition exited {rc}")
    return out


def _flip(src, dst, dataset):
    """Copy ``src`` to ``dst`` with one bit flipped in the middle of ``dataset``'s first chunk."""
    with h5py.File(src, "r") as f:
        chunk = f[dataset].id.get_chunk_info(0)
    shutil.copy(src, dst)
    with open(dst, "r+b") as fh:
        fh.seek(chunk.byte_offset + chunk.size // 2)
        byte = fh.read(1)[0]
        fh.seek(chunk.byte_offset + chunk.size // 2)
        fh.write(bytes([byte ^ 0x04]))


@pytest.mark.mpi
@pytest.mark.ranks(1, 4)
@pytest.mark.parametrize(("layout", "dataset"), DATASETS)
def test_info_catches_a_flipped_bit_in_every_dataset(world, shared_tmp, capfd, layout, dataset):
    on_rank0(world, _flip, _write(world, shared_tmp, layout), shared_tmp / "flipped.h5", dataset)
    expect_error(world, capfd, ["info", shared_tmp / "flipped.h5", "--quiet"],
                 f"'{dataset}'", "corrupt")


@pytest.mark.mpi
@pytest.mark.ranks(1, 4)
@pytest.mark.parametrize("argv", [
    ["partition", "--parts", "2", "--out", "{tmp}/p.h5", "--quiet"],
    ["sample", "--batch-size", "4", "--fanout", "2", "--out", "{tmp}/s.h5", "--quiet"],
    ["train", "--epochs", "1", "--quiet", "--threads", "1"],
], ids=["partition", "sample", "train"])
def test_every_command_catches_the_flip_deflate_let_through(world, shared_tmp, capfd, argv):
    on_rank0(world, _flip, _write(world, shared_tmp, "dense"), shared_tmp / "flipped.h5",
             "adjacency/indices")
    command, *flags = (str(a).format(tmp=shared_tmp) for a in argv)
    expect_error(world, capfd, [command, shared_tmp / "flipped.h5", *flags],
                 "'adjacency/indices'", "corrupt")
