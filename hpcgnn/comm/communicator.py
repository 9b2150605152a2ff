"""The instrumented communication layer: every message the library sends goes through here.

:class:`Comm` wraps an ``mpi4py`` communicator. Each method takes a ``category`` (e.g.
``"dense_bcast"``, ``"allreduce"``, ``"halo"``) under which the call's bytes and time are
recorded in a :class:`~hpcgnn.comm.stats.CommStats` shared by all communicators of a grid.

Buffers are NumPy arrays or ``torch.Tensor`` objects. A collective that returns a new
buffer allocates it like its input: a tensor in gives a tensor out (same dtype and
device), a NumPy array in gives a NumPy array out. Each ``Comm`` carries the
:class:`~hpcgnn.backend.Device` of its grid (``comm.device``), which callers use to
allocate the buffers they pass in (``comm.device.empty(...)``).

Every call hands its buffers to MPI through one step, its :class:`~hpcgnn.comm.wire.Wire`
(shared by the communicators of a grid): host buffers as NumPy views (no copy), device
tensors as they are to a CUDA-aware MPI after a stream synchronise, or staged through
pinned host buffers otherwise; ``HPCGNN_CUDA_AWARE_MPI=0`` stages every buffer, so the
CPU exercises the staged path too. The path each category took and the staging bytes are
recorded next to its bytes (:attr:`CommStats.paths`, :attr:`CommStats.staged`).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import torch
from mpi4py import MPI

from hpcgnn.backend import Device, get_device
from hpcgnn.comm.stats import WAIT, CommStats
from hpcgnn.comm.wire import Transfer, Wire, as_array

#: A communication buffer: the result has the kind (and dtype, device) of the input.
Buffer = TypeVar("Buffer", np.ndarray, torch.Tensor)

__all__ = ["Buffer", "Comm", "as_array"]


def _nbytes(buf: Any) -> int:
    if isinstance(buf, torch.Tensor):
        return buf.numel() * buf.element_size()
    return as_array(buf).nbytes


def _starts(elems: np.ndarray) -> np.ndarray:
    """Displacements of consecutive blocks of ``elems`` entries (exclusive prefix sums)."""
    return np.concatenate([[0], np.cumsum(elems)[:-1]])


def _itemsize(buf: Any) -> int:
    return buf.element_size() if isinstance(buf, torch.Tensor) else as_array(buf).itemsize


class Comm:
    """An MPI communicator whose every call is counted.

    Parameters
    ----------
    mpi_comm
        The ``mpi4py`` communicator to wrap. The wrapper does not own it unless
        ``owned=True`` (then :meth:`free` frees it).
    stats
        Counters to record into; if omitted, a new :class:`CommStats` timed with the
        device's clock.
    name
        Label used in error messages and traces (``"world"``, ``"row"``, ``"col"``...).
    owned
        Whether :meth:`free` frees ``mpi_comm``.
    device
        The device of this rank's tensors (default: CPU, see
        :func:`hpcgnn.backend.get_device`).
    wire
        How buffers reach MPI (shared by a grid's communicators); default:
        :meth:`Wire.detect` for ``device``.

    Attributes
    ----------
    device : Device
        Where the tensors of the callers live; allocate receive buffers with it.
    wire : Wire
        The placement of the memory MPI sees: :attr:`Wire.path` is this device's path.
    """

    def __init__(
        self,
        mpi_comm: MPI.Comm,
        stats: CommStats | None = None,
        name: str = "comm",
        owned: bool = False,
        device: Device | None = None,
        wire: Wire | None = None,
    ) -> None:
        self.device = get_device(device)
        self.wire = wire if wire is not None else Wire.detect(self.device)
        self.mpi = mpi_comm
        self.stats = stats if stats is not None else CommStats(
            clock=self.device.clock, mark=self.device.mark
        )
        self.name = name
        self._trace_args = {"comm": name}  # every call's trace event names its communicator
        self.rank = mpi_comm.Get_rank()
        self.size = mpi_comm.Get_size()
        self._owned = owned
        self._pending: dict[int, tuple[MPI.Request, Transfer]] = {}  # nonblocking messages
        self._recv_bytes: dict[int, int] = {}  # bytes of the pending receives with a method

    def __repr__(self) -> str:
        return f"Comm({self.name}, rank={self.rank}, size={self.size}, {self.device})"

    @classmethod
    def world(cls, stats: CommStats | None = None, device: Device | None = None) -> Comm:
        """A private duplicate of ``MPI.COMM_WORLD`` (library traffic never meets user traffic)."""
        return cls(MPI.COMM_WORLD.Dup(), stats, "world", owned=True, device=device)

    def free(self) -> None:
        """Free the wrapped communicator if this object owns it."""
        if self._owned and self.mpi != MPI.COMM_NULL:
            self.mpi.Free()
            self._owned = False

    # -- helpers -------------------------------------------------------------------------
    @contextmanager
    def _call(
        self, category: str, nbytes: float, methods: dict[str, int] | None = None
    ) -> Iterator[Transfer]:
        """One MPI call: its buffers go through the wire; records ``nbytes`` and its time.

        The staging copies, if any, are inside the timed interval (they are part of what
        the call costs here) and count apart (:attr:`CommStats.staged`).
        """
        if self.stats.sync_waits and category not in ("barrier", WAIT) and self.size > 1:
            self.device.synchronize()  # the work before the call is done: a wait, not a call
            self.barrier(WAIT)
        t0 = self.stats.mark()
        transfer = self.wire.transfer()
        yield transfer
        transfer.finish()
        self.stats.record(
            category, nbytes, since=t0, args=self._trace_args, path=transfer.path,
            staged=transfer.staged_bytes, methods=methods,
        )

    def _recv_like(self, sendbuf: Buffer, shape: tuple[int, ...]) -> Buffer:
        """A new receive buffer of ``shape`` like ``sendbuf``.

        Tensor in, tensor out (same dtype and device); anything else gives a NumPy array of
        ``sendbuf``'s dtype.
        """
        if isinstance(sendbuf, torch.Tensor):
            return torch.empty(shape, dtype=sendbuf.dtype, device=sendbuf.device)
        return np.empty(shape, dtype=as_array(sendbuf).dtype)

    # -- dense collectives ---------------------------------------------------------------
    def bcast(self, buf: Buffer, root: int, category: str) -> Buffer:
        """Broadcast ``buf`` in place from ``root``; returns ``buf``.

        Records ``buf``'s bytes on every rank but the root.
        """
        nbytes = 0 if self.rank == root else _nbytes(buf)
        with self._call(category, nbytes) as t:
            self.mpi.Bcast(t.read(buf) if self.rank == root else t.write(buf), root)
        return buf

    def allreduce(self, buf: Buffer, category: str, op: MPI.Op = MPI.SUM) -> Buffer:
        """All-reduce ``buf`` in place; returns ``buf``.

        Records ``2 m (p-1)/p`` bytes for ``m`` bytes over ``p`` ranks.
        """
        p = self.size
        with self._call(category, 2 * _nbytes(buf) * (p - 1) / p) as t:
            self.mpi.Allreduce(MPI.IN_PLACE, t.update(buf), op)
        return buf

    def reduce(self, buf: Buffer, root: int, category: str, op: MPI.Op = MPI.SUM) -> Buffer:
        """Reduce ``buf`` onto ``root`` in place (the other ranks' ``buf`` is unchanged).

        The adjoint of :meth:`bcast`: records ``buf``'s bytes on every rank but the root
        (what it sends), so a broadcast and its reduction count alike.
        """
        nbytes = 0 if self.rank == root else _nbytes(buf)
        with self._call(category, nbytes) as t:
            if self.rank == root:
                self.mpi.Reduce(MPI.IN_PLACE, t.update(buf), op, root)
            else:
                self.mpi.Reduce(t.read(buf), None, op, root)
        return buf

    def reduce_scatter(
        self, sendbuf: Buffer, counts: Sequence[int] | np.ndarray, category: str
    ) -> Buffer:
        """Sum ``sendbuf`` over ranks; rank ``r`` gets rows ``sum(counts[:r]) ...`` of it.

        ``counts`` are in rows of ``sendbuf`` (its first axis). Returns a new buffer like
        ``sendbuf`` (tensor or NumPy). Records the bytes of ``sendbuf`` minus this rank's
        block; nothing on one rank.
        """
        shape: tuple[int, ...] = tuple(sendbuf.shape)
        row = int(np.prod(shape[1:], dtype=np.int64))
        out = self._recv_like(sendbuf, (counts[self.rank], *shape[1:]))
        if self.size == 1:
            out[...] = sendbuf.detach() if isinstance(sendbuf, torch.Tensor) else sendbuf
            return out
        nbytes = (shape[0] - counts[self.rank]) * row * _itemsize(sendbuf)
        elems = [c * row for c in counts]
        with self._call(category, nbytes) as t:
            self.mpi.Reduce_scatter(t.read(sendbuf), t.write(out), elems, MPI.SUM)
        return out

    def allgatherv(
        self, sendbuf: Buffer, category: str, counts: Sequence[int] | None = None
    ) -> Buffer:
        """Concatenate every rank's ``sendbuf`` along the first axis, in rank order.

        ``counts`` (rows per rank) is exchanged first when not given (category
        ``"control"``). Returns a new buffer like ``sendbuf``. Records the bytes gathered
        minus this rank's own rows.
        """
        shape: tuple[int, ...] = tuple(sendbuf.shape)
        if counts is None:
            counts = self.allgather_obj(int(shape[0]), "control")
        row = int(np.prod(shape[1:], dtype=np.int64))
        total = int(sum(counts))
        out = self._recv_like(sendbuf, (total, *shape[1:]))
        nbytes = (total - shape[0]) * row * _itemsize(sendbuf)
        elems = [c * row for c in counts]
        with self._call(category, nbytes) as t:
            self.mpi.Allgatherv(t.read(sendbuf), (t.write(out), elems))
        return out

    def gatherv(
        self, sendbuf: Buffer, root: int, category: str
    ) -> tuple[Buffer | None, np.ndarray | None]:
        """Concatenate every rank's ``sendbuf`` (rows, in rank order) on ``root``.

        Returns ``(recvbuf, counts)`` on ``root``: a new buffer like ``sendbuf`` and the
        rows from each rank (int64, NumPy); ``(None, None)`` elsewhere. The counts are
        gathered first: the root records ``8 (p-1)`` bytes of ``"control"``, then the
        bytes of the other ranks' rows; the other ranks record nothing.
        """
        shape: tuple[int, ...] = tuple(sendbuf.shape)
        me_root = self.rank == root
        counts = np.empty(self.size, dtype=np.int64) if me_root else None
        mine = np.array([shape[0]], dtype=np.int64)
        with self._call("control", 8 * (self.size - 1) if me_root else 0) as t:
            self.mpi.Gather(t.read(mine), None if counts is None else t.write(counts), root)
        if counts is None:
            with self._call(category, 0) as t:
                self.mpi.Gatherv(t.read(sendbuf), None, root)
            return None, None
        row = int(np.prod(shape[1:], dtype=np.int64))
        out = self._recv_like(sendbuf, (int(counts.sum()), *shape[1:]))
        nbytes = (counts.sum() - counts[self.rank]) * row * _itemsize(sendbuf)
        elems = counts * row
        with self._call(category, nbytes) as t:
            self.mpi.Gatherv(t.read(sendbuf), (t.write(out), (elems, _starts(elems))), root)
        return out, counts

    def scatterv(
        self, sendbuf: Buffer, counts: Sequence[int] | np.ndarray | None, recvcount: int,
        root: int, category: str,
    ) -> Buffer:
        """Rows ``sendbuf[offset_r : offset_r + counts[r]]`` of ``root`` go to rank ``r``.

        ``sendbuf`` and ``counts`` are read on ``root`` only, but every rank passes a
        ``sendbuf`` of the dtype and row shape to receive (e.g. an empty one);
        ``recvcount`` is this rank's number of rows. Returns a new buffer like
        ``sendbuf``. Every rank but the root records the bytes it receives.
        """
        shape: tuple[int, ...] = tuple(sendbuf.shape)
        row = int(np.prod(shape[1:], dtype=np.int64))
        out = self._recv_like(sendbuf, (int(recvcount), *shape[1:]))
        if self.rank == root:
            assert counts is not None
            elems = np.asarray(counts, dtype=np.int64) * row
            with self._call(category, 0) as t:
                self.mpi.Scatterv((t.read(sendbuf), (elems, _starts(elems))), t.write(out), root)
        else:
            nbytes = int(recvcount) * row * _itemsize(sendbuf)
            with self._call(category, nbytes) as t:
                self.mpi.Scatterv(None, t.write(out), root)
        return out

    def alltoallv(
        self,
        sendbuf: Buffer,
        sendcounts: Sequence[int] | np.ndarray,
        category: str,
        recvcounts: Sequence[int] | np.ndarray | None = None,
        methods: Sequence[str] | None = None,
        out: Buffer | None = None,
    ) -> tuple[Buffer, np.ndarray]:
        """Personalised exchange: rows ``sendbuf[offset_r : offset_r + sendcounts[r]]`` go to r.

        Returns ``(recvbuf, recvcounts)``: ``recvbuf`` is ``out`` (contiguous, like
        ``sendbuf``, ``sum(recvcounts)`` rows), or a new buffer like ``sendbuf`` where it is
        ``None``, holding the rows from rank 0, 1, ... in order, ``recvcounts`` (int64,
        NumPy) the rows from each rank; the counts are exchanged first when not given (``8 (p-1)``
        bytes of category ``"control"``). Records the bytes received from other ranks,
        split by ``methods`` (the pair method of each peer, :attr:`CommStats.methods`)
        when given.
        """
        shape: tuple[int, ...] = tuple(sendbuf.shape)
        sendcounts = np.asarray(sendcounts, dtype=np.int64)
        if recvcounts is None:
            recvcounts = np.empty(self.size, dtype=np.int64)
            with self._call("control", 8 * (self.size - 1)) as t:
                self.mpi.Alltoall(t.read(sendcounts), t.write(recvcounts))
        recvcounts = np.asarray(recvcounts, dtype=np.int64)
        row = int(np.prod(shape[1:], dtype=np.int64))
        want = (int(recvcounts.sum()), *shape[1:])
        if out is None:
            out = self._recv_like(sendbuf, want)
        elif tuple(out.shape) != want:
            raise ValueError(f"alltoallv: out has shape {tuple(out.shape)}, not {want}")
        nbytes = (recvcounts.sum() - recvcounts[self.rank]) * row * _itemsize(sendbuf)
        s_el, r_el = sendcounts * row, recvcounts * row
        s_off, r_off = _starts(s_el), _starts(r_el)
        split: dict[str, int] | None = None
        if methods is not None:
            split = {}
            for peer, m in enumerate(methods):
                if peer != self.rank and recvcounts[peer]:
                    split[m] = split.get(m, 0) + int(r_el[peer]) * _itemsize(sendbuf)
        with self._call(category, nbytes, split) as t:
            self.mpi.Alltoallv((t.read(sendbuf), (s_el, s_off)), (t.write(out), (r_el, r_off)))
        return out, recvcounts

    # -- nonblocking point-to-point --------------------------------------------------------
    def isend(
        self, buf: Buffer, dest: int, tag: int = 0, method: str | None = None
    ) -> MPI.Request:
        """Start sending ``buf`` to rank ``dest``; finish it with :meth:`complete`.

        ``buf`` must stay alive and unchanged until then. Nothing is recorded here: the
        receiver counts the bytes, as for an all-to-allv. ``method``: the pair's method
        (:mod:`hpcgnn.planning.methods`), which picks the wire's path of a device buffer.
        """
        t = self.wire.transfer(method)
        req = self.mpi.Isend(t.read(buf), dest, tag)
        self._pending[id(req)] = (req, t)
        return req

    def irecv(
        self, buf: Buffer, source: int, tag: int = 0, method: str | None = None
    ) -> MPI.Request:
        """Start receiving into ``buf`` (contiguous) from rank ``source``.

        Finish it with :meth:`complete`, which records its bytes (and, staged, lands them
        in ``buf``), under ``method`` too when given (:attr:`CommStats.methods`).
        """
        t = self.wire.transfer(method)
        req = self.mpi.Irecv(t.write(buf), source, tag)
        self._pending[id(req)] = (req, t)
        if method is not None:
            self._recv_bytes[id(req)] = _nbytes(buf)
        return req

    def complete(
        self,
        requests: list[MPI.Request],
        received: Sequence[Buffer],
        category: str,
        span: str | None = None,
    ) -> None:
        """Wait for all ``requests`` (of :meth:`isend` and :meth:`irecv`).

        Records one call of ``category``: the bytes of the ``received`` buffers (those of
        the receives among ``requests``) and the seconds waited; ``span`` names it in the
        trace. (One ``Waitall``: on this 2-core machine a ``Waitany`` loop that reacts to
        each arrival ran 3-8x slower, every return handing the core back to MPICH's
        polling.)
        """
        t0 = self.stats.mark()
        nbytes = sum(_nbytes(b) for b in received)
        MPI.Request.Waitall(requests)
        path, staged = None, 0
        methods: dict[str, int] = {}
        for req in requests:
            _, t = self._pending.pop(id(req), (None, None))
            if t is not None:
                t.finish()
                path, staged = path or t.path, staged + t.staged_bytes
                if t.path is not None and t.path != path:  # pairs of other methods' paths
                    self.stats.paths.setdefault(category, set()).add(t.path)
                if id(req) in self._recv_bytes and t.method is not None:
                    methods[t.method] = methods.get(t.method, 0) + self._recv_bytes.pop(id(req))
        self.stats.record(
            category, nbytes, span=span, args=self._trace_args, path=path, staged=staged,
            since=t0, methods=methods,
        )

    # -- small Python objects (control traffic) ------------------------------------------
    def _obj_bytes(self, obj: Any) -> int:
        return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def bcast_obj(self, obj: Any, root: int = 0, category: str = "control") -> Any:
        """Broadcast a picklable object from ``root`` (records its pickled size off root)."""
        t0 = self.stats.mark()
        out = self.mpi.bcast(obj, root)
        nbytes = 0 if self.rank == root else self._obj_bytes(out)
        self.stats.record(category, nbytes, since=t0, args=self._trace_args)
        return out

    def allgather_obj(self, obj: Any, category: str = "control") -> list[Any]:
        """Gather a picklable object from every rank, on every rank."""
        t0 = self.stats.mark()
        out = self.mpi.allgather(obj)
        nbytes = sum(self._obj_bytes(o) for i, o in enumerate(out) if i != self.rank)
        self.stats.record(category, nbytes, since=t0, args=self._trace_args)
        return out

    def gather_obj(self, obj: Any, root: int = 0, category: str = "control") -> list[Any] | None:
        """Gather a picklable object from every rank on ``root`` (``None`` elsewhere)."""
        t0 = self.stats.mark()
        out = self.mpi.gather(obj, root)
        nbytes = 0
        if out is not None:
            nbytes = sum(self._obj_bytes(o) for i, o in enumerate(out) if i != self.rank)
        self.stats.record(category, nbytes, since=t0, args=self._trace_args)
        return out

    def allreduce_scalar(
        self, value: float | int, op: MPI.Op = MPI.SUM, category: str = "control"
    ) -> Any:
        """All-reduce one number (int or float); an :meth:`allreduce` of 8 bytes."""
        is_int = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        arr = np.array([value], dtype=np.int64 if is_int else np.float64)
        self.allreduce(arr, category, op)
        return int(arr[0]) if is_int else float(arr[0])

    def barrier(self, category: str = "barrier", idle_s: float = 0.0) -> None:
        """Synchronise the ranks of this communicator (records 0 bytes).

        ``idle_s > 0``: wait without holding a core, testing a nonblocking barrier every
        ``idle_s`` seconds and sleeping in between (MPI libraries spin in a blocking one),
        so that where ranks share cores the ones still working get them.
        """
        with self._call(category, 0):
            if idle_s <= 0:
                self.mpi.Barrier()
                return
            request = self.mpi.Ibarrier()
            while not request.Test():
                time.sleep(idle_s)
