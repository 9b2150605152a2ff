"""Bad flag values: one identical line on every rank, exit 1, nothing written."""

import pytest

from tests.robustness.harness import expect_error_untouched


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--lr", "nan"], "--lr"),
        (["--lr", "inf"], "--lr"),
        (["--weight-decay", "nan"], "--weight-decay"),
        (["--seed", "-1"], "--seed"),
        (["--mode", "offload", "--chunks", "100000"], "--chunks"),
        (["--mode", "offload", "--device-memory=-1G"], "--device-memory must be a byte count"),
        (["--mode", "offload", "--device-memory", "lots"], "got 'lots'"),
        (["--device-memory", "1G"], "--device-memory applies to --mode offload only"),
        (["--mode", "minibatch", "--global-batch", "7", "--batch-size", "8"], "not both"),
    ],
)
def test_bad_training_flags(graph_file, shared_tmp, world, capfd, flags, words):
    path = graph_file(n=40, seed=1)
    metrics = shared_tmp / "m.json"
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["train", path, "--epochs", "2", "--quiet", "--metrics", metrics, *flags], words,
    )
