"""The device seam: allocation, host <-> device conversion, the clock, the CPU/GPU choice."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
import torch

from hpcgnn.backend import (
    KINDS,
    Device,
    EventClock,
    cpu,
    cuda_unavailable,
    default_kind,
    emulation,
    get_device,
)
from hpcgnn.errors import ConfigError

no_gpu = pytest.mark.skipif(cuda_unavailable() is None, reason="a GPU and CuPy are visible")


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


@no_gpu
def test_cuda_without_a_gpu_is_one_clear_line():
    with pytest.raises(ConfigError, match=r"^--device cuda: no GPU is visible") as info:
        get_device("cuda", local_rank=3)
    assert "\n" not in str(info.value)
    assert info.value.collective  # every rank asks for the same device


def test_cuda_without_cupy_is_one_clear_line(monkeypatch):
    monkeypatch.delenv(emulation.EMULATE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "cupy", None)  # importing it fails
    cuda_unavailable.cache_clear()
    try:
        reason = cuda_unavailable()
    finally:
        cuda_unavailable.cache_clear()
    assert reason is not None and "\n" not in reason
    assert reason.startswith("--device cuda needs CuPy: pip install 'hpcgnn[cuda12]'")


def test_cuda_device_names_its_gpu_without_touching_it():
    dev = Device("cuda", 1)  # constructing checks the kind only
    assert dev.is_cuda and not cpu().is_cuda
    assert dev.torch_device == torch.device("cuda", 1) and str(dev) == "cuda:1"
    assert dev != Device("cuda", 0) and cpu().name == "cpu"


def test_default_kind(monkeypatch):
    monkeypatch.setenv("HPCGNN_DEVICE", "cpu")
    assert default_kind() == "cpu"
    monkeypatch.setenv("HPCGNN_DEVICE", "tpu")
    with pytest.raises(ConfigError, match="HPCGNN_DEVICE must be one of cpu, cuda, not 'tpu'"):
        default_kind()
    monkeypatch.delenv("HPCGNN_DEVICE", raising=False)
    real_gpu = cuda_unavailable() is None and not emulation.requested()
    assert default_kind() == ("cuda" if real_gpu else "cpu")  # never the emulated GPU


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


def test_pinned_empty_is_host_memory():
    t = cpu().pinned_empty(16, torch.uint8)
    assert t.shape == (16,) and t.device.type == "cpu" and not t.is_pinned()


def test_synchronize_and_clock():
    dev = cpu()
    assert dev.synchronize() is None
    a = dev.clock()
    b = dev.clock()
    assert isinstance(a, float) and b >= a


@pytest.mark.gpu
def test_cuda_device_copies_explicitly_and_times_with_events():
    dev = get_device("cuda")
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = dev.from_numpy(arr)
    assert t.device == dev.torch_device
    t[0, 0] = 99
    assert arr[0, 0] == 0  # a copy, not a view
    back = dev.to_host(t)
    assert back[0, 0] == 99 and not np.shares_memory(back, arr)
    assert dev.zeros((2, 2), torch.float32).device == dev.torch_device
    assert dev.pinned_empty(8, torch.uint8).is_pinned()
    a = dev.clock()
    x = dev.zeros((512, 512), torch.float32) + 1
    x.matmul(x)
    b = dev.clock()
    assert b > a >= 0.0
    assert dev.name


class _FakeTime:
    """A settable clock for emulated events."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_event_clock_keeps_microseconds_after_an_hour():
    """Intervals of consecutive events, summed in float64: no float32 steps late in a run."""
    t = _FakeTime()

    class Runtime(emulation.EmulatedRuntime):
        def event(self):
            return emulation.EmulatedEvent(t)

    clock = EventClock(Runtime())
    readings = []
    for now in (600.0, 600.000001, 3600.0, 3600.000001):
        t.now = now
        readings.append(clock())
    assert readings[1] - readings[0] == pytest.approx(1e-6, abs=1e-9)
    assert readings[3] - readings[2] == pytest.approx(1e-6, abs=1e-9)
    # one event pair from the origin: a float32 of ms, 250 us steps after an hour
    ms = np.float32(3600.000001e3) - np.float32(3600.0e3)
    assert ms in (0.0, 0.25)
