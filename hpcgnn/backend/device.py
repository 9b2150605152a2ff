"""The device a rank computes on: where tensors live, how they reach the host, one clock.

A :class:`Device` is chosen once (:func:`get_device`, the only place that picks CPU or
GPU), stored on the :class:`~hpcgnn.grid.process_grid.ProcessGrid` and handed to every
:class:`~hpcgnn.comm.communicator.Comm` of the grid. Code that allocates a buffer asks the
device (``comm.device.empty(...)``) instead of calling ``torch.empty`` with an implied CPU
placement, and code that moves data between NumPy and torch says so
(:meth:`Device.from_numpy`, :meth:`Device.to_host`), so no device/host copy is silent.

Only the CPU device exists today. ``"cuda"`` is a reserved slot; requesting it raises a
:class:`~hpcgnn.errors.ConfigError`. When it is implemented:

- :attr:`Device.torch_device` becomes ``torch.device("cuda", local_rank)`` and the
  allocation methods place tensors there;
- :meth:`Device.from_numpy` / :meth:`Device.to_host` become explicit host-to-device and
  device-to-host copies;
- :meth:`Device.synchronize` waits for the current CUDA stream; the communication layer
  calls it before handing a device buffer to MPI;
- :meth:`Device.clock` synchronises first (or is replaced by a timer built on CUDA events),
  so the phases recorded in :class:`~hpcgnn.comm.stats.CommStats` measure finished work;
- the local kernels (:mod:`hpcgnn.kernels`) dispatch on :attr:`Device.kind` to the CUDA
  sources of ``cuda/`` loaded as CuPy ``RawModule`` objects;
- :class:`~hpcgnn.comm.communicator.Comm` passes device buffers straight to a CUDA-aware
  MPI, or stages them through host memory when MPI is not CUDA-aware (detected once).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hpcgnn.errors import ConfigError

#: Device kinds known to the library; only ``"cpu"`` is implemented.
KINDS = ("cpu", "cuda")
IMPLEMENTED = ("cpu",)

Shape = int | Sequence[int]


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ConfigError(f"unknown device {kind!r}; choose one of {', '.join(KINDS)}")
    if kind not in IMPLEMENTED:
        raise ConfigError(f"the {kind} device is not implemented yet")


@dataclass(frozen=True)
class Device:
    """Where this rank's tensors live (CPU today; ``"cuda"`` is a reserved slot).

    Parameters
    ----------
    kind
        ``"cpu"``. ``"cuda"`` raises :class:`~hpcgnn.errors.ConfigError` until the GPU
        backend exists.

    Raises
    ------
    ConfigError
        For an unknown or not yet implemented ``kind`` (on every rank alike).

    Examples
    --------
    >>> dev = cpu()
    >>> dev.zeros((2, 3), torch.float32).shape
    torch.Size([2, 3])
    """

    kind: str = "cpu"

    def __post_init__(self) -> None:
        _check_kind(self.kind)

    def __str__(self) -> str:
        return self.kind

    @property
    def torch_device(self) -> torch.device:
        """The ``torch.device`` of this device's tensors."""
        return torch.device(self.kind)

    # -- allocation ------------------------------------------------------------------------
    def empty(self, shape: Shape, dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised tensor on this device."""
        return torch.empty(shape, dtype=dtype, device=self.torch_device)

    def zeros(self, shape: Shape, dtype: torch.dtype) -> torch.Tensor:
        """A zero tensor on this device."""
        return torch.zeros(shape, dtype=dtype, device=self.torch_device)

    def empty_like(self, t: torch.Tensor) -> torch.Tensor:
        """An uninitialised tensor of ``t``'s shape and dtype on this device."""
        return torch.empty_like(t, device=self.torch_device)

    # -- host <-> device -------------------------------------------------------------------
    def from_numpy(self, arr: np.ndarray) -> torch.Tensor:
        """``arr`` as a tensor on this device (CPU: shares ``arr``'s memory, no copy)."""
        return torch.from_numpy(arr)

    def as_tensor(self, data: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
        """``data`` (tensor, NumPy array or nested sequence) as a tensor on this device.

        No copy when ``data`` already is a tensor on this device of the requested dtype, or
        (CPU) a NumPy array of a matching dtype.
        """
        return torch.as_tensor(data, dtype=dtype, device=self.torch_device)

    def to_host(self, t: torch.Tensor) -> np.ndarray:
        """A host NumPy array of ``t`` (CPU: a view of ``t``, no copy; detached from autograd)."""
        return t.detach().numpy()

    # -- synchronisation and time ----------------------------------------------------------
    def synchronize(self) -> None:
        """Wait until the work queued on this device is done (a no-op on the CPU)."""

    def clock(self) -> float:
        """Seconds on a monotonic clock, after :meth:`synchronize` (CPU: ``perf_counter``).

        This is the one clock of the library: :class:`~hpcgnn.comm.stats.CommStats` times
        its communication categories and compute phases with it. A GPU device may replace
        it by a timer on CUDA events.
        """
        self.synchronize()
        return time.perf_counter()


_CPU = Device("cpu")


def cpu() -> Device:
    """The CPU device."""
    return _CPU


def get_device(kind: str | Device | None = None) -> Device:
    """The device of kind ``kind`` (default: CPU): the one place that picks CPU or GPU.

    Parameters
    ----------
    kind
        ``"cpu"`` or ``"cuda"`` (not implemented yet), a :class:`Device` (returned as is),
        or ``None`` for the CPU.

    Raises
    ------
    ConfigError
        For an unknown kind, or ``"cuda"``: "the cuda device is not implemented yet".
    """
    if kind is None:
        return _CPU
    if isinstance(kind, Device):
        return kind
    return _CPU if kind == "cpu" else Device(kind)
