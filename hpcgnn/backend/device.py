"""The device a rank computes on: where tensors live, how they reach the host, one clock.

A :class:`Device` is chosen once (:func:`get_device`, the only place that picks CPU or
GPU), stored on the :class:`~hpcgnn.grid.process_grid.ProcessGrid` and handed to every
:class:`~hpcgnn.comm.communicator.Comm` of the grid. Code that allocates a buffer asks the
device (``comm.device.empty(...)``) instead of calling ``torch.empty`` with an implied CPU
placement, and code that moves data between NumPy and torch says so
(:meth:`Device.from_numpy`, :meth:`Device.to_host`), so no device/host copy is silent.

Two kinds:

- ``"cpu"``: tensors in host memory; :meth:`Device.from_numpy` and :meth:`Device.to_host`
  share memory (no copy); the clock is ``time.perf_counter``.
- ``"cuda"``: one GPU (or the emulated one of :mod:`hpcgnn.backend.emulation` under
  ``HPCGNN_EMULATE_CUDA=1``: host memory with the GPU's rules),
  ``torch.device("cuda", index)`` (the rank's node-local rank modulo
  the GPUs it sees, chosen by :func:`hpcgnn.grid.device.choose_device`); allocations go
  there, :meth:`Device.from_numpy` / :meth:`Device.to_host` are explicit host-to-device
  and device-to-host copies, :meth:`Device.pinned_empty` gives page-locked host buffers
  (staging for a non-CUDA-aware MPI, HongTu's host tier), :meth:`Device.synchronize` waits
  for the current stream, and the clock reads CUDA events (:class:`EventClock`), so the
  phases of :class:`~hpcgnn.comm.stats.CommStats` and the traces show device time; they
  are timed with :meth:`Device.mark` (an event recorded, no wait), read once an epoch. The
  raw kernels of ``cuda/`` run through CuPy, which the device therefore requires. The
  CUDA runtime calls go through one object (:class:`CudaRuntime`, or the emulation's).

The communication layer decides how a device buffer reaches MPI
(:mod:`hpcgnn.comm.wire`: handed over after :meth:`Device.synchronize` to a CUDA-aware
MPI, else staged through pinned host buffers).
"""

from __future__ import annotations

import functools
import importlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hpcgnn.backend import emulation
from hpcgnn.errors import ConfigError

#: Device kinds known to the library.
KINDS = ("cpu", "cuda")

#: Environment variable that sets the default device kind (``--device`` overrides it).
DEVICE_ENV = "HPCGNN_DEVICE"

Shape = int | Sequence[int]


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ConfigError(f"unknown device {kind!r}; choose one of {', '.join(KINDS)}")


@functools.cache
def cuda_unavailable() -> str | None:
    """Why the cuda device cannot be used here (one line), or ``None`` if it can.

    A GPU must be visible to torch (``CUDA_VISIBLE_DEVICES`` honoured) and CuPy importable
    (the raw kernels of ``cuda/``), or the emulated device asked for
    (``HPCGNN_EMULATE_CUDA=1``). Checked once per process.
    """
    if emulation.requested():
        return None
    if not torch.cuda.is_available():
        build = torch.__version__
        if torch.version.cuda is None:
            return f"--device cuda: no GPU is visible (this torch, {build}, is built without CUDA)"
        return "--device cuda: no GPU is visible (torch.cuda.is_available() is False)"
    try:
        importlib.import_module("cupy")
    except Exception as exc:  # missing, or built for another CUDA: either way unusable
        return (
            "--device cuda needs CuPy: pip install 'hpcgnn[cuda12]' (or 'hpcgnn[cuda13]' "
            f"for CUDA 13); importing it failed: {type(exc).__name__}: {exc}".splitlines()[0]
        )
    return None


def default_kind() -> str:
    """The device kind when none is asked for: ``$HPCGNN_DEVICE``, else cuda if usable, else cpu.

    Raises
    ------
    ConfigError
        If ``$HPCGNN_DEVICE`` names no known kind.
    """
    env = os.environ.get(DEVICE_ENV)
    if env:
        if env not in KINDS:
            raise ConfigError(f"{DEVICE_ENV} must be one of {', '.join(KINDS)}, not {env!r}")
        return env
    real_gpu = not emulation.requested() and cuda_unavailable() is None
    return "cuda" if real_gpu else "cpu"


class CudaRuntime:
    """The CUDA runtime calls the cuda :class:`Device` makes (torch's), in one place."""

    def device_count(self) -> int:
        """GPUs this process sees."""
        return torch.cuda.device_count()

    def set_device(self, index: int) -> None:
        """Make GPU ``index`` the current one."""
        torch.cuda.set_device(index)

    def name(self, index: int) -> str:
        """The GPU's model name."""
        return torch.cuda.get_device_name(index)

    def synchronize(self, index: int) -> None:
        """Wait for the work queued on the GPU's current stream."""
        torch.cuda.current_stream(index).synchronize()

    def event(self) -> Any:
        """A new timing event (recorded on the current stream)."""
        return torch.cuda.Event(enable_timing=True)

    def free_bytes(self, index: int) -> int:
        """Bytes of GPU ``index``'s memory free now (``cudaMemGetInfo``)."""
        return int(torch.cuda.mem_get_info(index)[0])

    def peak_bytes(self, index: int) -> int:
        """The most bytes torch's allocator held in tensors on GPU ``index`` so far.

        ``torch.cuda.max_memory_allocated`` (:data:`DEVICE_PEAK_SOURCE`): every device
        tensor of the run is torch's (the raw kernels of ``cuda/`` take torch's memory by
        DLPack), a high-water mark since the process started (nothing resets it).
        """
        return int(torch.cuda.max_memory_allocated(index))


#: What :meth:`CudaRuntime.peak_bytes` reads (the metrics' ``memory.device.source``).
DEVICE_PEAK_SOURCE = "torch.cuda.max_memory_allocated"

_RUNTIMES: dict[bool, Any] = {False: CudaRuntime(), True: emulation.EmulatedRuntime()}


class Mark:
    """A point on a device's timeline, in seconds since its clock started, read lazily.

    A CPU mark is read when made. A GPU mark is a CUDA event recorded on the current
    stream, with no wait: its :attr:`seconds` are known once the device has passed it, and
    reading them settles every pending mark of the clock at once (one wait).
    """

    __slots__ = ("_clock", "_event", "_seconds")

    def __init__(
        self, seconds: float | None = None, clock: EventClock | None = None, event: Any = None,
    ) -> None:
        self._seconds = seconds
        self._clock = clock
        self._event = event

    @property
    def seconds(self) -> float:
        """Seconds since the clock started (waits for the device the first time on a GPU)."""
        if self._seconds is None:
            assert self._clock is not None
            self._clock.settle()
        assert self._seconds is not None
        return self._seconds


class EventClock:
    """Seconds of device time on one GPU, read from CUDA events without a wait per reading.

    :meth:`mark` records an event on the current stream and returns at once; :meth:`settle`
    waits for the last pending event (one synchronisation) and converts every pending mark:
    seconds since the clock was made, the sum in float64 of the intervals between
    consecutive events. (An event pair's elapsed time is a float32 of milliseconds;
    measured from the clock's creation it would lose resolution as the run grows: 62 µs
    steps after 10 minutes, 250 µs after an hour.) An interval between two marks is the
    device time of the work queued between them: finished work, not launch time. Calling
    the clock is a mark settled at once (a synchronising reading). At most
    :data:`MAX_PENDING` marks wait; one more settles them.
    """

    MAX_PENDING = 4096

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime
        self._last = self._record()
        self._last.synchronize()
        self._seconds = 0.0
        self._pending: list[Mark] = []

    def _record(self) -> Any:
        ev = self._runtime.event()
        ev.record()
        return ev

    def mark(self) -> Mark:
        """A mark on the current stream, now (no wait)."""
        if len(self._pending) >= self.MAX_PENDING:
            self.settle()
        m = Mark(clock=self, event=self._record())
        self._pending.append(m)
        return m

    def settle(self) -> None:
        """Wait for the pending marks (one synchronisation) and give them their seconds."""
        if not self._pending:
            return
        self._pending[-1]._event.synchronize()
        for m in self._pending:
            self._seconds += self._last.elapsed_time(m._event) / 1e3
            m._seconds = self._seconds
            self._last, m._event = m._event, None
        self._pending.clear()

    def __call__(self) -> float:
        """Seconds of device time since the clock was made (a synchronising reading)."""
        return self.mark().seconds


@functools.cache
def _event_clock(index: int, emulated: bool) -> EventClock:
    return EventClock(_RUNTIMES[emulated])


@dataclass(frozen=True)
class Device:
    """Where this rank's tensors live: the host (``"cpu"``) or one GPU (``"cuda"``).

    Make it with :func:`get_device` (which checks that a GPU and CuPy are there);
    constructing one directly only checks the kind.

    Parameters
    ----------
    kind
        ``"cpu"`` or ``"cuda"``.
    index
        The GPU's ordinal among those this process sees (``"cuda"`` only; 0 for the CPU).
    emulated
        The emulated GPU of :mod:`hpcgnn.backend.emulation` (``"cuda"`` only).

    Raises
    ------
    ConfigError
        For an unknown ``kind`` (on every rank alike).

    Examples
    --------
    >>> dev = cpu()
    >>> dev.zeros((2, 3), torch.float32).shape
    torch.Size([2, 3])
    """

    kind: str = "cpu"
    index: int = 0
    emulated: bool = False

    def __post_init__(self) -> None:
        _check_kind(self.kind)
        if self.emulated and self.kind != "cuda":
            raise ConfigError("only the cuda device is emulated")

    def __str__(self) -> str:
        return self.kind if self.kind == "cpu" else f"{self.kind}:{self.index}"

    @property
    def is_cuda(self) -> bool:
        """Whether tensors live on a GPU."""
        return self.kind == "cuda"

    @property
    def torch_device(self) -> torch.device:
        """The ``torch.device`` of this device's tensors."""
        return torch.device("cuda", self.index) if self.is_cuda else torch.device("cpu")

    @property
    def name(self) -> str:
        """What the device is: ``"cpu"``, or the GPU's model name."""
        return self.runtime.name(self.index) if self.is_cuda else "cpu"

    @property
    def runtime(self) -> Any:
        """The CUDA runtime calls of this device (:class:`CudaRuntime` or the emulation's)."""
        return _RUNTIMES[self.emulated]

    def free_bytes(self) -> int | None:
        """The GPU's free memory now (the emulated one's: the host's); ``None`` on the CPU."""
        return self.runtime.free_bytes(self.index) if self.is_cuda else None

    def peak_bytes(self) -> int | None:
        """The GPU's peak of allocated bytes so far (:meth:`CudaRuntime.peak_bytes`).

        ``None`` on the CPU, and on the emulated GPU, whose memory is host memory (in the
        process's peak resident set, :func:`hpcgnn.utils.memory.peak_rss_bytes`) and not
        counted apart.
        """
        return self.runtime.peak_bytes(self.index) if self.is_cuda else None

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

    def pinned_empty(self, shape: Shape, dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised host tensor, page-locked on the cuda device.

        For host memory that device copies read or write often: the staging buffers of a
        non-CUDA-aware MPI and HongTu's host tier. The CPU device gives ordinary memory.
        """
        return torch.empty(shape, dtype=dtype, pin_memory=self.is_cuda)

    def pinned(self, t: torch.Tensor) -> torch.Tensor:
        """Host tensor ``t`` in page-locked memory on the cuda device (a copy); CPU: ``t``."""
        if not self.is_cuda:
            return t
        return self.pinned_empty(tuple(t.shape), t.dtype).copy_(t)

    # -- host <-> device -------------------------------------------------------------------
    def from_numpy(self, arr: np.ndarray) -> torch.Tensor:
        """``arr`` as a tensor on this device.

        CPU: shares ``arr``'s memory, no copy. CUDA: a host-to-device copy.
        """
        t = torch.from_numpy(arr)
        return t.to(self.torch_device) if self.is_cuda else t

    def as_tensor(self, data: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
        """``data`` (tensor, NumPy array or nested sequence) as a tensor on this device.

        No copy when ``data`` already is a tensor on this device of the requested dtype, or
        (CPU) a NumPy array of a matching dtype.
        """
        return torch.as_tensor(data, dtype=dtype, device=self.torch_device)

    def to_host(self, t: torch.Tensor) -> np.ndarray:
        """A host NumPy array of ``t``, detached from autograd.

        CPU: a view of ``t``, no copy. CUDA: a device-to-host copy (waits for ``t``).
        """
        t = t.detach()
        return (t.cpu() if t.device.type != "cpu" else t).numpy()

    def to_device(self, rows: torch.Tensor) -> torch.Tensor:
        """Host tensor ``rows`` on this device: one host-to-device copy (CPU: the same memory)."""
        return self.from_numpy(rows.detach().numpy())

    def host_tensor(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` as a host tensor, detached: one device-to-host copy (CPU: the same memory)."""
        return torch.from_numpy(self.to_host(t))

    # -- synchronisation and time ----------------------------------------------------------
    def synchronize(self) -> None:
        """Wait until the work queued on this device's current stream is done (CPU: no-op)."""
        if self.is_cuda:
            self.runtime.synchronize(self.index)

    def mark(self) -> Mark:
        """A :class:`Mark` of now on this device's clock, read lazily (no wait on a GPU).

        What :class:`~hpcgnn.comm.stats.CommStats` times calls and phases with: their
        seconds are read once an epoch, not at every mark.
        """
        if self.is_cuda:
            return _event_clock(self.index, self.emulated).mark()
        return Mark(time.perf_counter())

    def clock(self) -> float:
        """Seconds on a monotonic clock, of finished work (a synchronising reading).

        This is the one clock of the library: :class:`~hpcgnn.comm.stats.CommStats` times
        its communication categories and compute phases with it. CPU: ``perf_counter``
        after :meth:`synchronize`. CUDA: device time from CUDA events
        (:class:`EventClock`).
        """
        if self.is_cuda:
            return _event_clock(self.index, self.emulated)()
        self.synchronize()
        return time.perf_counter()


_CPU = Device("cpu")


def cpu() -> Device:
    """The CPU device."""
    return _CPU


def get_device(kind: str | Device | None = None, local_rank: int = 0) -> Device:
    """The device of kind ``kind``: the one place that picks CPU or GPU.

    Parameters
    ----------
    kind
        ``"cpu"``, ``"cuda"``, a :class:`Device` (returned as is), or ``None`` for the CPU
        (library objects made without a device; the command line's default is
        :func:`default_kind`).
    local_rank
        This rank's rank among the ranks of its node: the cuda device is GPU
        ``local_rank % torch.cuda.device_count()`` (of those ``CUDA_VISIBLE_DEVICES``
        shows), so several ranks may share a GPU. Made the current CUDA device.

    Raises
    ------
    ConfigError
        For an unknown kind, or ``"cuda"`` where no GPU is visible or CuPy is missing
        (:func:`cuda_unavailable`'s line).

    Under ``HPCGNN_EMULATE_CUDA=1`` the cuda device is the emulated one (installed in the
    process by :func:`hpcgnn.backend.emulation.activate`).
    """
    if kind is None:
        return _CPU
    if isinstance(kind, Device):
        return kind
    _check_kind(kind)
    if kind == "cpu":
        return _CPU
    reason = cuda_unavailable()
    if reason is not None:
        raise ConfigError(reason)
    emulated = emulation.requested()
    if emulated:
        emulation.activate()
    runtime = _RUNTIMES[emulated]
    index = local_rank % runtime.device_count()
    runtime.set_device(index)
    return Device("cuda", index, emulated)
