"""The device seam: allocation, host <-> device conversion, the clock, the CPU/GPU choice."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from hpcgnn.backend import KINDS, Device, cpu, get_device
from hpcgnn.errors import ConfigError


def test_cpu_device():
    dev = cpu()
    assert dev.kind == "cpu" and str(dev) == "cpu"
    assert dev.torch_device == torch.device("cpu")
    assert dev == Device() == Device("cpu")
    assert hash(dev) == hash(Device("cpu"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        dev.kind = "cuda"  # type: ignore[misc]


def test_get_device_is_the_one_chooser():
    assert get_device() is cpu()
    assert get_device(None) is cpu()
    assert get_device("cpu") is cpu()
    mine = Device("cpu")
    assert get_device(mine) is mine
    assert KINDS == ("cpu", "cuda")


def test_cuda_is_a_slot_that_says_so():
    for make in (lambda: get_device("cuda"), lambda: Device("cuda")):
        with pytest.raises(ConfigError, match="the cuda device is not implemented yet") as info:
            make()
        assert info.value.collective  # every rank asks for the same device


def test_unknown_device_kind():
    with pytest.raises(ConfigError, match="unknown device 'tpu'"):
        get_device("tpu")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_allocation(dtype):
    dev = cpu()
    e = dev.empty((3, 2), dtype)
    z = dev.zeros((3, 2), dtype)
    assert e.shape == z.shape == (3, 2)
    assert e.dtype == z.dtype == dtype
    assert e.device == z.device == dev.torch_device
    assert not z.any()
    assert dev.zeros(4, dtype).shape == (4,)
    assert dev.empty((0, 5), dtype).shape == (0, 5)
    like = dev.empty_like(torch.ones((2, 7), dtype=dtype, requires_grad=dtype.is_floating_point))
    assert like.shape == (2, 7) and like.dtype == dtype and not like.requires_grad


def test_from_numpy_shares_memory_and_to_host_is_a_view():
    dev = cpu()
    arr = np.arange(6, dtype=np.int64).reshape(2, 3)
    t = dev.from_numpy(arr)
    assert t.dtype == torch.int64 and t.device == dev.torch_device
    t[0, 0] = 99
    assert arr[0, 0] == 99  # CPU: no copy
    back = dev.to_host(t)
    assert isinstance(back, np.ndarray) and np.shares_memory(back, arr)
    grad = torch.ones(3, requires_grad=True)
    assert np.array_equal(dev.to_host(grad), np.ones(3, dtype=np.float32))  # detached


def test_as_tensor():
    dev = cpu()
    t = torch.arange(4)
    assert dev.as_tensor(t) is t  # already on the device, same dtype: no copy
    arr = np.arange(4, dtype=np.float64)
    u = dev.as_tensor(arr)
    assert u.dtype == torch.float64 and np.shares_memory(u.numpy(), arr)
    v = dev.as_tensor([1, 2, 3], dtype=torch.float32)
    assert v.dtype == torch.float32 and v.tolist() == [1.0, 2.0, 3.0]


def test_synchronize_and_clock():
    dev = cpu()
    assert dev.synchronize() is None
    a = dev.clock()
    b = dev.clock()
    assert isinstance(a, float) and b >= a
