"""Checkpoints are bound to the graph's content: another graph of the same size is refused."""

import shutil

import pytest

from tests.graphs import ALTERED, write_random_graph
from tests.mpi import assert_all, on_rank0
from tests.robustness.harness import expect_error_untouched, run_cli

TRAIN = ["--hidden", "4", "--quiet", "--threads", "1"]


@pytest.mark.mpi
@pytest.mark.parametrize("change", ["features", "labels", "edges", None])
def test_resuming_on_another_graph_of_the_same_size_is_refused(world, shared_tmp, capfd, change):
    path, other = shared_tmp / "g.h5", shared_tmp / "other.h5"
    ckpt = shared_tmp / "ckpt"

    def write():
        write_random_graph(path, n=40, seed=5)
        shutil.copy(path, other)  # None: an identical copy under another name resumes
        if change is not None:
            ALTERED[change](other)

    on_rank0(world, write)
    rc, _, err = run_cli(world, capfd, ["train", path, *TRAIN, "--epochs", "2",
                                        "--checkpoint-dir", ckpt, "--checkpoint-every", "1"])
    assert_all(world, rc == 0, f"checkpointing run: exit {rc}: {err[-2000:]}")
    resume = ["train", other, *TRAIN, "--epochs", "3", "--resume", ckpt]
    if change is None:
        rc, _, err = run_cli(world, capfd, resume)
        assert_all(world, rc == 0, f"resume on a copy: exit {rc}: {err[-2000:]}")
    else:
        expect_error_untouched(
            world, capfd, [shared_tmp], resume, "was written for a graph with other content",
            "graph content",
        )
