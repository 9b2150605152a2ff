"""Files ``info`` rejects never train or sample; partitions the ranks cannot follow are refused.

Each broken file (:data:`tests.graphs.BROKEN`) fails ``train`` with ``info``'s line, on
every rank, before anything is written.
"""

import h5py
import numpy as np
import pytest

from hpcgnn.layout.blocks import even_offsets
from tests.graphs import BROKEN, add_partition, write_broken_graph, write_random_graph
from tests.mpi import assert_all, on_rank0
from tests.robustness.harness import expect_error, expect_error_untouched, run_cli

TRAIN = ["--epochs", "1", "--hidden", "4", "--quiet", "--threads", "1"]


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_train_refuses_what_info_refuses_with_its_line(world, shared_tmp, capfd, name):
    path = shared_tmp / f"{name}.h5"
    on_rank0(world, write_broken_graph, path, name)
    words = BROKEN[name][2]
    info = expect_error(world, capfd, ["info", path, "--quiet"], words)
    train = expect_error_untouched(
        world, capfd, [shared_tmp], ["train", path, *TRAIN, "--metrics", shared_tmp / "m.json"],
        words,
    )
    assert train == info


@pytest.mark.mpi
@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--algo", "halo"],
        ["train", "--algo", "2d"],
        ["train", "--mode", "offload", "--chunks", "2"],
        ["train", "--mode", "minibatch", "--batch-size", "4", "--fanout", "2"],
        ["sample", "--batch-size", "4", "--fanout", "2", "--out", "{tmp}/s.h5"],
    ],
    ids=["halo", "2d", "offload", "minibatch", "sample"],
)
def test_every_mode_and_sample_check_the_file(world, shared_tmp, capfd, argv):
    path = shared_tmp / "asymmetric.h5"
    on_rank0(world, write_broken_graph, path, "not-symmetric")
    command, *flags = (str(a).format(tmp=shared_tmp) for a in argv)
    extra = TRAIN if command == "train" else ["--quiet"]
    expect_error_untouched(
        world, capfd, [shared_tmp], [command, path, *flags, *extra], BROKEN["not-symmetric"][2]
    )


@pytest.mark.mpi
@pytest.mark.parametrize("parts", [2, 8])
@pytest.mark.parametrize(
    "mode", [["--algo", "halo"], ["--mode", "offload", "--chunks", "2"]], ids=["halo", "offload"]
)
def test_a_partition_the_ranks_cannot_follow_is_refused(world, shared_tmp, capfd, parts, mode):
    path = shared_tmp / f"p{parts}.h5"

    def write():
        write_random_graph(path, n=40, seed=5)
        add_partition(path, even_offsets(40, parts), np.arange(40))

    on_rank0(world, write)
    argv = ["train", path, *TRAIN, *mode]
    p = world.size
    if parts % p:  # neither P parts nor a multiple of P to coarsen
        expect_error_untouched(
            world, capfd, [shared_tmp], argv, f"its partition has {parts} parts",
            f"re-partition it for {p} parts", f"--parts {p}",
        )
    else:
        rc, _, err = run_cli(world, capfd, argv)
        assert_all(world, rc == 0, f"exit {rc}: {err[-2000:]}")


@pytest.mark.mpi
@pytest.mark.parametrize(
    "mode", [["--algo", "1d"], ["--mode", "gist", "--subnets", "1"],
             ["--mode", "minibatch", "--batch-size", "4", "--fanout", "2"]],
    ids=["fullbatch", "gist", "minibatch"],
)
def test_an_empty_train_mask_is_refused(world, shared_tmp, capfd, mode):
    path = shared_tmp / "untrained.h5"

    def write():
        write_random_graph(path, n=40, seed=5)
        with h5py.File(path, "r+") as f:
            f["masks/train"][...] = False

    on_rank0(world, write)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["train", path, *TRAIN, *mode, "--metrics", shared_tmp / "m.json"],
        "the graph has no training vertices (empty train mask)",
    )
