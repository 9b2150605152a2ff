"""How a buffer reaches MPI: one code path, three placements of the memory MPI sees.

Every message of :class:`~hpcgnn.comm.communicator.Comm` goes through a
:class:`Transfer`: it asks for the memory MPI reads (:meth:`Transfer.read`), writes
(:meth:`Transfer.write`) or both (:meth:`Transfer.update`) for each buffer of the call,
makes the MPI call, and :meth:`Transfer.finish` lands what MPI wrote. Only where that
memory is differs, the *path* of the buffer:

``"direct"``
    A host buffer (NumPy array or CPU tensor): MPI reads and writes a NumPy view of it.
``"cuda-aware"``
    A GPU tensor with a CUDA-aware MPI: the device's stream is synchronised, then MPI
    gets the device tensor itself (DLPack / CUDA array interface).
``"staged"``
    A GPU tensor without a CUDA-aware MPI: the bytes MPI reads are copied into a pinned
    host buffer first, the bytes it writes are copied back after the call. The host
    buffers come from a :class:`StagingPool` and are reused. ``HPCGNN_CUDA_AWARE_MPI=0``
    stages *every* buffer, host ones included: pointless copies on the CPU, but the
    identical code path, which a CPU run therefore tests.

A message between two ranks may carry its pair's method (DGCL's per-pair choice,
:mod:`hpcgnn.planning.methods`): ``"host-staged"`` stages a device buffer through pinned
host memory even with a CUDA-aware MPI (DGCL's way between CPU sockets); ``"ipc"`` and
``"nic"`` take the path above (the device buffer itself where MPI is CUDA-aware). Host
buffers take their path whatever the method.

Whether MPI is CUDA-aware is read once per process: ``HPCGNN_CUDA_AWARE_MPI=0|1`` decides
when set; otherwise mpi4py's ``MPI.Query_cuda_support()`` where the build has it, else the
MPI 4.1 info key ``mpi_memory_alloc_kinds`` of ``COMM_WORLD`` naming ``cuda``, else a
vendor's variable (Cray's ``MPICH_GPU_SUPPORT_ENABLED=1``, MPICH's
``MPIR_CVAR_ENABLE_GPU=1``...), else ``False`` (staging is always correct, only slower);
:attr:`Wire.reason` says which, and ``hpcgnn train`` prints it on rank 0. Staging copies are
not network traffic: they count apart from the category bytes (:attr:`Transfer.staged_bytes`).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np
import torch
from mpi4py import MPI

from hpcgnn.backend import Device
from hpcgnn.errors import ConfigError

#: Environment variable that overrides the detection of a CUDA-aware MPI (``0`` or ``1``).
CUDA_AWARE_ENV = "HPCGNN_CUDA_AWARE_MPI"


def cuda_aware_setting() -> bool | None:
    """``$HPCGNN_CUDA_AWARE_MPI`` as a bool, or ``None`` when unset or empty.

    Raises
    ------
    ConfigError
        For any other value than ``0`` or ``1``.
    """
    value = os.environ.get(CUDA_AWARE_ENV, "").strip()
    if not value:
        return None
    if value not in ("0", "1"):
        raise ConfigError(f"{CUDA_AWARE_ENV} must be 0 or 1, not {value!r}")
    return value == "1"


#: Variables by which vendors' MPIs turn GPU buffers on (name, the value that does), read
#: only where the library cannot be asked.
VENDOR_GPU_ENV = (
    ("MPICH_GPU_SUPPORT_ENABLED", "1"),  # Cray MPICH (Perlmutter, Frontier)
    ("MPIR_CVAR_ENABLE_GPU", "1"),  # MPICH
    ("OMPI_MCA_opal_cuda_support", "true"),  # Open MPI
    ("MV2_USE_CUDA", "1"),  # MVAPICH2
)


@functools.cache
def library_cuda_support() -> tuple[bool, str]:
    """Whether the MPI library takes CUDA device buffers, and how that was found (once).

    In order: mpi4py's ``MPI.Query_cuda_support()`` (``MPIX_Query_cuda_support`` of Open
    MPI and MPICH, which knows the build and the run-time setting), else the MPI 4.1 info
    key ``mpi_memory_alloc_kinds`` of ``COMM_WORLD`` naming ``cuda``, else a vendor's
    variable that turns GPU buffers on (:data:`VENDOR_GPU_ENV`), else no.
    """
    query = getattr(MPI, "Query_cuda_support", None)
    if query is not None:
        try:
            return bool(query()), "MPIX_Query_cuda_support"
        except (MPI.Exception, NotImplementedError):
            pass
    try:
        kinds = MPI.COMM_WORLD.Get_info().Get("mpi_memory_alloc_kinds") or ""
    except (MPI.Exception, NotImplementedError):
        kinds = ""
    if any(kind.split(":")[0] == "cuda" for kind in kinds.split(",")):
        return True, f"mpi_memory_alloc_kinds={kinds}"
    for name, value in VENDOR_GPU_ENV:
        if os.environ.get(name, "").strip().lower() == value:
            return True, f"{name}={value}"
    return False, "the library has no CUDA query, names no cuda memory kind, no vendor variable"


def library_version() -> str:
    """The MPI library's name and version, one line (Open MPI's ends in a NUL)."""
    return MPI.Get_library_version().replace("\0", "").splitlines()[0].strip()


def library_cuda_aware() -> bool:
    """Whether the MPI library says it takes CUDA device buffers (:func:`library_cuda_support`)."""
    return library_cuda_support()[0]


@functools.cache
def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


def as_array(buf: Any) -> np.ndarray:
    """A NumPy view of a host buffer (NumPy array or contiguous CPU tensor), never a copy."""
    if isinstance(buf, torch.Tensor):
        if buf.device.type != "cpu":
            raise TypeError("device tensors must be staged by the backend before MPI calls")
        if not buf.is_contiguous():
            raise ValueError("MPI buffers must be contiguous")
        return buf.detach().numpy()
    arr = np.asarray(buf)
    if not arr.flags.c_contiguous:
        raise ValueError("MPI buffers must be C-contiguous")
    return arr


class StagingPool:
    """Host buffers for staging, reused from call to call (pinned on the cuda device).

    :meth:`take` hands out the smallest free buffer that is large enough (or a new one of
    the next power of two, at least 4 KiB); :meth:`give` takes it back.
    """

    def __init__(self, device: Device) -> None:
        self.device = device
        self.allocated = 0  # buffers made so far
        self._free: list[torch.Tensor] = []

    def take(self, nbytes: int) -> torch.Tensor:
        """A host byte buffer of at least ``nbytes`` bytes."""
        fits = [i for i, b in enumerate(self._free) if b.numel() >= nbytes]
        if fits:
            return self._free.pop(min(fits, key=lambda i: self._free[i].numel()))
        self.allocated += 1
        size = max(4096, 1 << max(nbytes - 1, 0).bit_length())
        return self.device.pinned_empty(size, torch.uint8)

    def give(self, buf: torch.Tensor) -> None:
        """Return a buffer of :meth:`take` for reuse."""
        self._free.append(buf)


class Wire:
    """Where the memory MPI sees lives for each buffer of a communicator's device.

    Parameters
    ----------
    device
        The communicator's device; GPU tensors passed to MPI must live on it.
    cuda_aware
        Whether MPI takes device buffers.
    stage_host
        Stage host buffers too (``HPCGNN_CUDA_AWARE_MPI=0``).
    reason
        How ``cuda_aware`` was decided (the setting, the library's answer), for the log.
    """

    def __init__(
        self, device: Device, cuda_aware: bool = False, stage_host: bool = False,
        reason: str = "",
    ) -> None:
        self.device = device
        self.cuda_aware = cuda_aware
        self.stage_host = stage_host
        self.reason = reason
        self.pool = StagingPool(device)

    @classmethod
    def detect(cls, device: Device) -> Wire:
        """The wire of ``device`` under ``$HPCGNN_CUDA_AWARE_MPI`` and the MPI library.

        Raises
        ------
        ConfigError
            For a value of ``$HPCGNN_CUDA_AWARE_MPI`` other than ``0`` or ``1``.
        """
        setting = cuda_aware_setting()
        if setting is not None:
            return cls(device, cuda_aware=setting, stage_host=not setting,
                       reason=f"{CUDA_AWARE_ENV}={int(setting)}")
        if not device.is_cuda:
            return cls(device, reason="host buffers")
        aware, reason = library_cuda_support()
        return cls(device, cuda_aware=aware, reason=reason)

    def _path(self, on_device: bool, method: str | None = None) -> str:
        """The path of a device buffer (``on_device``) or of a host one, for ``method``."""
        if on_device:
            return "cuda-aware" if self.cuda_aware and method != "host-staged" else "staged"
        return "staged" if self.stage_host else "direct"

    @property
    def path(self) -> str:
        """The path of buffers on this wire's device (``comm.path`` of the metrics)."""
        return self._path(self.device.is_cuda)

    def method_path(self, method: str | None) -> str:
        """The path of this device's buffers sent by a pair's ``method``."""
        return self._path(self.device.is_cuda, method)

    def path_of(self, buf: Any, method: str | None = None) -> str:
        """The path of one buffer: ``"direct"``, ``"cuda-aware"`` or ``"staged"``.

        ``method``: the pair's method of a point-to-point message (``None``: a collective).
        """
        on_device = isinstance(buf, torch.Tensor) and buf.device.type != "cpu"
        if on_device and buf.device != self.device.torch_device:
            raise TypeError(f"a tensor on {buf.device} passed to a communicator on {self.device}")
        return self._path(on_device, method)

    def transfer(self, method: str | None = None) -> Transfer:
        """A new :class:`Transfer` for one MPI call (or one message of a pair's ``method``)."""
        return Transfer(self, method)


class Transfer:
    """The buffers of one MPI call on a :class:`Wire`.

    Attributes
    ----------
    method : str or None
        The pair's method of a point-to-point message (:mod:`hpcgnn.planning.methods`).
    path : str or None
        The path of the call's buffers (``None`` before any buffer).
    staged_bytes : int
        Bytes copied to and from staging buffers (0 off the staged path).
    """

    def __init__(self, wire: Wire, method: str | None = None) -> None:
        self.wire = wire
        self.method = method
        self.path: str | None = None
        self.staged_bytes = 0
        self._back: list[tuple[Any, np.ndarray]] = []
        self._held: list[torch.Tensor] = []

    def read(self, buf: Any) -> Any:
        """The memory MPI reads for ``buf`` (staged: a copy of it)."""
        return self._mpi(buf, copy_in=True, copy_out=False)

    def write(self, buf: Any) -> Any:
        """The memory MPI writes for ``buf`` (staged: copied into ``buf`` by :meth:`finish`)."""
        return self._mpi(buf, copy_in=False, copy_out=True)

    def update(self, buf: Any) -> Any:
        """The memory MPI reads and writes for ``buf`` (in-place collectives)."""
        return self._mpi(buf, copy_in=True, copy_out=True)

    def finish(self) -> None:
        """After the MPI call (or its wait): land the received bytes, free the staging."""
        for buf, host in self._back:
            if isinstance(buf, torch.Tensor):
                buf.data.copy_(torch.from_numpy(host))  # .data: no autograd version bump
            else:
                np.copyto(buf, host)
            self.staged_bytes += host.nbytes
        self._back.clear()
        for raw in self._held:
            self.wire.pool.give(raw)
        self._held.clear()

    def _mpi(self, buf: Any, copy_in: bool, copy_out: bool) -> Any:
        path = self.wire.path_of(buf, self.method)
        self.path = path
        if path == "direct":
            return as_array(buf)
        if not isinstance(buf, torch.Tensor):
            buf = as_array(buf)
        elif not buf.is_contiguous():
            raise ValueError("MPI buffers must be contiguous")
        if path == "cuda-aware":
            self.wire.device.synchronize()  # the kernels that wrote buf are done
            return buf.detach()
        dtype = _numpy_dtype(buf.dtype) if isinstance(buf, torch.Tensor) else buf.dtype
        nbytes = buf.numel() * buf.element_size() if isinstance(buf, torch.Tensor) else buf.nbytes
        raw = self.wire.pool.take(nbytes)
        self._held.append(raw)
        host = raw.numpy()[:nbytes].view(dtype).reshape(tuple(buf.shape))
        if copy_in:
            if isinstance(buf, torch.Tensor):
                torch.from_numpy(host).copy_(buf.data)
            else:
                np.copyto(host, buf)
            self.staged_bytes += nbytes
        if copy_out:
            self._back.append((buf, host))
        return host
