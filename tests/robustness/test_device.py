"""``--device cuda`` where it cannot run, and a bad CUDA-aware setting: one line everywhere."""

import pytest

from hpcgnn.backend import cuda_unavailable
from tests.robustness.harness import expect_error_untouched

needs_no_gpu = pytest.mark.skipif(cuda_unavailable() is None, reason="a GPU and CuPy are visible")


@pytest.mark.mpi
@pytest.mark.ranks(1, 4)
@needs_no_gpu
@pytest.mark.parametrize("command", ["train", "sample"])
def test_cuda_without_a_gpu(graph_file, shared_tmp, world, capfd, command):
    path = graph_file(n=40, seed=1)
    out = ["--out", shared_tmp / "s.h5"] if command == "sample" else []
    expect_error_untouched(
        world, capfd, [shared_tmp], [command, path, "--device", "cuda", *out],
        "--device cuda", "GPU",
    )


@pytest.mark.mpi
@pytest.mark.ranks(1, 4)
def test_bad_cuda_aware_setting(graph_file, shared_tmp, world, capfd, monkeypatch):
    path = graph_file(n=40, seed=1)
    monkeypatch.setenv("HPCGNN_CUDA_AWARE_MPI", "banana")
    expect_error_untouched(
        world, capfd, [shared_tmp], ["train", path, "--metrics", shared_tmp / "m.json"],
        "HPCGNN_CUDA_AWARE_MPI must be 0 or 1, not 'banana'",
    )
