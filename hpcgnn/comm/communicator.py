"""The instrumented communication layer: every message the library sends goes through here.

:class:`Comm` wraps an ``mpi4py`` communicator. Each method takes a ``category`` (e.g.
``"dense_bcast"``, ``"allreduce"``, ``"halo"``) under which the call's bytes and time are
recorded in a :class:`~hpcgnn.comm.stats.CommStats` shared by all communicators of a grid.
Buffers are NumPy arrays or CPU ``torch.Tensor`` objects (converted without copying).
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
from mpi4py import MPI

from hpcgnn.comm.stats import CommStats

try:  # torch is a dependency, but keep the layer importable without it
    import torch
except ImportError:  # pragma: no cover
    torch = None  # type: ignore[assignment]


def as_array(buf: Any) -> np.ndarray:
    """Return a NumPy view of ``buf`` (NumPy array or contiguous CPU tensor), never a copy."""
    if torch is not None and isinstance(buf, torch.Tensor):
        if buf.device.type != "cpu":
            raise TypeError("device tensors must be staged by the backend before MPI calls")
        if not buf.is_contiguous():
            raise ValueError("MPI buffers must be contiguous")
        return buf.detach().numpy()
    arr = np.asarray(buf)
    if not arr.flags.c_contiguous:
        raise ValueError("MPI buffers must be C-contiguous")
    return arr


class Comm:
    """An MPI communicator whose every call is counted.

    Parameters
    ----------
    mpi_comm
        The ``mpi4py`` communicator to wrap. The wrapper does not own it unless
        ``owned=True`` (then :meth:`free` frees it).
    stats
        Counters to record into; a new :class:`CommStats` if omitted.
    name
        Label used in error messages and traces (``"world"``, ``"row"``, ``"col"``...).
    """

    def __init__(
        self,
        mpi_comm: MPI.Comm,
        stats: CommStats | None = None,
        name: str = "comm",
        owned: bool = False,
    ) -> None:
        self.mpi = mpi_comm
        self.stats = stats if stats is not None else CommStats()
        self.name = name
        self.rank = mpi_comm.Get_rank()
        self.size = mpi_comm.Get_size()
        self._owned = owned

    def __repr__(self) -> str:
        return f"Comm({self.name}, rank={self.rank}, size={self.size})"

    @classmethod
    def world(cls, stats: CommStats | None = None) -> Comm:
        """A private duplicate of ``MPI.COMM_WORLD`` (library traffic never meets user traffic)."""
        return cls(MPI.COMM_WORLD.Dup(), stats, "world", owned=True)

    def free(self) -> None:
        """Free the wrapped communicator if this object owns it."""
        if self._owned and self.mpi != MPI.COMM_NULL:
            self.mpi.Free()
            self._owned = False

    # -- helpers -------------------------------------------------------------------------
    def _timed(self, category: str, nbytes: float, fn: Any, *args: Any) -> Any:
        t0 = MPI.Wtime()
        out = fn(*args)
        self.stats.record(category, nbytes, MPI.Wtime() - t0)
        return out

    # -- dense collectives ---------------------------------------------------------------
    def bcast(self, buf: Any, root: int, category: str) -> Any:
        """Broadcast ``buf`` in place from ``root``; returns ``buf``."""
        arr = as_array(buf)
        nbytes = 0 if self.rank == root else arr.nbytes
        self._timed(category, nbytes, self.mpi.Bcast, arr, root)
        return buf

    def allreduce(self, buf: Any, category: str, op: MPI.Op = MPI.SUM) -> Any:
        """All-reduce ``buf`` in place; returns ``buf``."""
        arr = as_array(buf)
        p = self.size
        nbytes = 2 * arr.nbytes * (p - 1) / p
        self._timed(category, nbytes, self.mpi.Allreduce, MPI.IN_PLACE, arr, op)
        return buf

    def reduce_scatter(self, sendbuf: Any, counts: list[int], category: str) -> np.ndarray:
        """Sum ``sendbuf`` over ranks; rank ``r`` gets rows ``sum(counts[:r]) ...`` of it.

        ``counts`` are in rows of ``sendbuf`` (its first axis).
        """
        send = as_array(sendbuf)
        row = int(np.prod(send.shape[1:], dtype=np.int64))
        recv = np.empty((counts[self.rank], *send.shape[1:]), dtype=send.dtype)
        nbytes = (send.shape[0] - counts[self.rank]) * row * send.itemsize
        if self.size == 1:
            recv[...] = send
            return recv
        elems = [c * row for c in counts]
        self._timed(category, nbytes, self.mpi.Reduce_scatter, send, recv, elems, MPI.SUM)
        return recv

    def allgatherv(
        self, sendbuf: Any, category: str, counts: list[int] | None = None
    ) -> np.ndarray:
        """Concatenate every rank's ``sendbuf`` along the first axis, in rank order.

        ``counts`` (rows per rank) is exchanged first when not given.
        """
        send = as_array(sendbuf)
        if counts is None:
            counts = self.allgather_obj(int(send.shape[0]), "control")
        row = int(np.prod(send.shape[1:], dtype=np.int64))
        total = int(sum(counts))
        recv = np.empty((total, *send.shape[1:]), dtype=send.dtype)
        nbytes = (total - send.shape[0]) * row * send.itemsize
        elems = [c * row for c in counts]
        self._timed(category, nbytes, self.mpi.Allgatherv, send, (recv, elems))
        return recv

    def alltoallv(
        self,
        sendbuf: Any,
        sendcounts: list[int] | np.ndarray,
        category: str,
        recvcounts: list[int] | np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Personalised exchange: rows ``sendbuf[offset_r : offset_r + sendcounts[r]]`` go to r.

        Returns ``(recvbuf, recvcounts)``; the counts are exchanged first when not given.
        """
        send = as_array(sendbuf)
        sendcounts = np.asarray(sendcounts, dtype=np.int64)
        if recvcounts is None:
            recvcounts = np.empty(self.size, dtype=np.int64)
            self._timed("control", 8 * (self.size - 1), self.mpi.Alltoall, sendcounts, recvcounts)
        recvcounts = np.asarray(recvcounts, dtype=np.int64)
        row = int(np.prod(send.shape[1:], dtype=np.int64))
        recv = np.empty((int(recvcounts.sum()), *send.shape[1:]), dtype=send.dtype)
        nbytes = (recvcounts.sum() - recvcounts[self.rank]) * row * send.itemsize
        s_el, r_el = sendcounts * row, recvcounts * row
        s_off = np.concatenate([[0], np.cumsum(s_el)[:-1]])
        r_off = np.concatenate([[0], np.cumsum(r_el)[:-1]])
        self._timed(
            category,
            nbytes,
            self.mpi.Alltoallv,
            (send, (s_el, s_off)),
            (recv, (r_el, r_off)),
        )
        return recv, recvcounts

    # -- point to point ------------------------------------------------------------------
    def sendrecv(
        self,
        sendbuf: Any,
        dest: int,
        recv_shape: tuple[int, ...],
        source: int,
        category: str,
        tag: int = 0,
    ) -> np.ndarray:
        """Send ``sendbuf`` to ``dest``; receive an array of ``recv_shape`` from ``source``."""
        send = as_array(sendbuf)
        recv = np.empty(recv_shape, dtype=send.dtype)
        self._timed(category, recv.nbytes, self.mpi.Sendrecv, send, dest, tag, recv, source, tag)
        return recv

    # -- small Python objects (control traffic) ------------------------------------------
    def _obj_bytes(self, obj: Any) -> int:
        return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def bcast_obj(self, obj: Any, root: int = 0, category: str = "control") -> Any:
        """Broadcast a picklable object from ``root``."""
        t0 = MPI.Wtime()
        out = self.mpi.bcast(obj, root)
        nbytes = 0 if self.rank == root else self._obj_bytes(out)
        self.stats.record(category, nbytes, MPI.Wtime() - t0)
        return out

    def allgather_obj(self, obj: Any, category: str = "control") -> list[Any]:
        """Gather a picklable object from every rank, on every rank."""
        t0 = MPI.Wtime()
        out = self.mpi.allgather(obj)
        nbytes = sum(self._obj_bytes(o) for i, o in enumerate(out) if i != self.rank)
        self.stats.record(category, nbytes, MPI.Wtime() - t0)
        return out

    def gather_obj(self, obj: Any, root: int = 0, category: str = "control") -> list[Any] | None:
        """Gather a picklable object from every rank on ``root`` (``None`` elsewhere)."""
        t0 = MPI.Wtime()
        out = self.mpi.gather(obj, root)
        nbytes = 0
        if out is not None:
            nbytes = sum(self._obj_bytes(o) for i, o in enumerate(out) if i != self.rank)
        self.stats.record(category, nbytes, MPI.Wtime() - t0)
        return out

    def allreduce_scalar(
        self, value: float | int, op: MPI.Op = MPI.SUM, category: str = "control"
    ) -> Any:
        """All-reduce one number (int or float)."""
        is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        arr = np.array([value], dtype=np.int64 if is_int else np.float64)
        self.allreduce(arr, category, op)
        return int(arr[0]) if is_int else float(arr[0])

    def barrier(self, category: str = "barrier") -> None:
        """Synchronise the ranks of this communicator."""
        self._timed(category, 0, self.mpi.Barrier)
