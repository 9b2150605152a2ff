"""The device of each rank: one kind on every rank, the GPU by node-local rank."""

from __future__ import annotations

import pytest

from hpcgnn.backend import Device, cpu, cuda_unavailable
from hpcgnn.errors import ConfigError
from hpcgnn.grid import device as grid_device
from hpcgnn.grid.device import choose_device
from tests.mpi import assert_all


@pytest.mark.mpi
def test_cpu_by_default_and_on_request(world, monkeypatch):
    monkeypatch.setenv("HPCGNN_DEVICE", "cpu")
    assert_all(world, choose_device(world.mpi) is cpu())
    assert_all(world, choose_device(world.mpi, "cpu") is cpu())


@pytest.mark.mpi
@pytest.mark.skipif(cuda_unavailable() is None, reason="a GPU and CuPy are visible")
def test_cuda_without_a_gpu_fails_on_every_rank(world):
    with pytest.raises(ConfigError, match="--device cuda") as info:
        choose_device(world.mpi, "cuda")
    assert info.value.collective


@pytest.mark.mpi
@pytest.mark.ranks(2, 3)
def test_ranks_that_find_different_devices_are_refused(world, monkeypatch):
    if world.rank == 1:  # as if only this rank saw a GPU
        monkeypatch.setattr(grid_device, "get_device", lambda kind, local_rank: Device("cuda"))
    with pytest.raises(ConfigError, match=r"ranks found different devices \(cpu on"):
        choose_device(world.mpi, None)


@pytest.mark.gpu
@pytest.mark.mpi
def test_cuda_device_follows_the_node_local_rank(world):
    import torch

    from hpcgnn.comm.node import node_rank

    dev = choose_device(world.mpi, "cuda")
    local, _ = node_rank(world.mpi)
    assert_all(world, dev.index == local % torch.cuda.device_count())


@pytest.mark.mpi
def test_the_suite_runs_on_its_device(device, world):
    from tests.conftest import TEST_DEVICE

    assert_all(world, device.kind == TEST_DEVICE)
