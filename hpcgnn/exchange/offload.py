r"""HongTu's deduplicated host/device exchange on MPI ranks (``--mode offload``).

Each rank is one "GPU" and owns a part of the vertices; the *host tier* of a vertex is
its owner's host buffer, the *device tier* is the batch-sized buffers a rank computes on.
Per batch ``j`` rank ``i`` needs the rows of its chunk's neighbour set ``N_ij``
(:mod:`hpcgnn.planning.dedup` has the set algebra). How they get there (``--dedup``):

``none``
    every rank loads ``N_ij`` from the owners' host buffers (remote ones over MPI):
    ``V_ori`` host-to-device rows per layer.
``inter``
    each owner loads the batch's transition vertices it owns, ``T_ij = N_j & V_i``, once
    into a device *transition buffer*; ranks fetch ``N_ij`` from the owners' transition
    buffers (device to device): ``V_p2p`` host-to-device rows.
``full``
    as ``inter``, and rows shared with the previous batch stay on the device: the
    transition buffer reloads only ``T_ij \ T_i,j-1`` (``V_ru`` rows in all) and the
    neighbour buffer fetches only ``N_ij \ N_i,j-1``.

Gradients take the reverse path: ``none`` adds every neighbour gradient into the owner's
host buffer; ``inter`` adds them into the owner's transition gradient buffer, flushed to
the host once per batch; ``full`` also keeps rows shared with the *next* batch on the
device and flushes only those leaving (again ``V_ru`` device-to-host rows in all).

Traffic categories (received bytes in :class:`hpcgnn.comm.stats.CommStats`):
``offload_h2d`` (neighbour loads from a host buffer), ``offload_d2d`` (rows between
ranks' device buffers), ``offload_d2h`` (gradient flushes to a host buffer), ``offload_ckpt``
(a chunk's own rows: cached aggregates and layer outputs out, and back in the backward).
Local host/device copies are recorded in the same categories as remote ones; the
device-to-device copies a rank makes from its own transition buffer are reuse, not traffic.

Placement: the host tier is host memory (page-locked on the cuda device, from
:meth:`~hpcgnn.backend.Device.pinned_empty`), the batch buffers live on ``comm.device``.
A load gathers the rows on the host (:func:`~hpcgnn.kernels.rows.gather_rows` on the host
tensor) and copies them to the device at once, a flush copies the rows to the host and
scatter-adds them there; over MPI (``none``) the host side of a table sends and receives
host buffers, and the requester copies the rows between host and device (after receiving
a fetch, before sending a push). So every row counted in ``offload_h2d`` / ``offload_d2h``
crosses between host and device exactly once. On the CPU device the copies are the same
memory.

``--exchange planned`` (``inter`` and ``full``): the device-to-device fetches of a table
and the gradient pushes back (the reverse plan) run along a DGCL SPST plan on a topology
(:meth:`RowTable.plan`, :class:`~hpcgnn.exchange.staged.StagedExchange`: stages, rows
forwarded through intermediate ranks, every hop counted in ``offload_d2d``); a rank's own
rows are copied locally as before. One plan per table, built at set-up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from hpcgnn.backend import Device, Mark, cpu, get_device
from hpcgnn.comm.communicator import Comm
from hpcgnn.exchange.halo import HaloSets, request_rows
from hpcgnn.exchange.staged import StagedExchange
from hpcgnn.kernels.rows import copy_rows, gather_rows, scatter_add_rows, scatter_map
from hpcgnn.planning.dedup import (
    DedupVolumes,
    Sliding,
    merged_positions,
    sliding,
    write_positions,
)
from hpcgnn.planning.spst import DEFAULT_BYTES_PER_VERTEX
from hpcgnn.planning.topology import Topology

DEDUP_LEVELS = ("none", "inter", "full")
H2D, D2D, D2H, CKPT = "offload_h2d", "offload_d2d", "offload_d2h", "offload_ckpt"
SETUP = "offload_setup"


@dataclass(frozen=True)
class DevicePaths:
    """How the exchange moves rows on the device (HongTu Sect. 6); the results are the same.

    Attributes
    ----------
    in_place
        HongTu's in-place buffers (default): one transition buffer per exchange whose rows
        have precomputed write positions (:func:`~hpcgnn.planning.dedup.write_positions`:
        with ``full`` a row kept from the previous batch stays in its slot, a new row takes
        a slot the previous batch left), and neighbour and gradient buffers reused from
        batch to batch: no device buffer is allocated per batch. Off: a new transition and
        neighbour buffer per batch, the kept rows copied into them.
    interleave
        The device-to-device fetches and pushes of a batch (``inter``, ``full`` with the
        ``p2p`` exchange) as ``m - 1`` sequential rounds (HongTu Alg. 2 line 8, Alg. 3
        line 4): in round ``r`` rank ``i`` fetches from ``k = i + r mod m`` (and pushes to
        it), so no two ranks read one rank's buffer at once; one message per rank and
        round, the bytes of the all-to-allv, recorded as ``<category>.round<r>`` spans.
        Off (default): one all-to-allv per table, which MPI schedules itself.
    zero_copy
        On the cuda device the host rows a batch loads are read by the kernel itself from
        the page-locked host tier (:func:`~hpcgnn.kernels.rows.copy_rows`) straight into
        their write positions: no host-side gather, no staging copy. Needs ``in_place``;
        the CPU device (and a host buffer that is not page-locked) keeps the host gather.
        Off by default.
    merged
        HongTu's merged transition + neighbour buffer (``inter``, ``full``; needs
        ``in_place``): one buffer holds the union of ``T_ij`` and ``N_ij``
        (:func:`~hpcgnn.planning.dedup.merged_positions`), the chunk's operators read it
        (their columns renumbered, the edges in their order: the same sums), and a
        neighbour row the rank owns is read from its transition slot instead of being
        copied into a neighbour buffer. Off by default.
    """

    in_place: bool = True
    interleave: bool = False
    zero_copy: bool = False
    merged: bool = False

    def __post_init__(self) -> None:
        if self.zero_copy and not self.in_place:
            raise ValueError("zero-copy loads write into the in-place buffers: in_place too")
        if self.merged and not self.in_place:
            raise ValueError("the merged buffer is an in-place buffer: in_place too")


def record_copy(comm: Comm, category: str, rows: int, row_bytes: int, t0: Mark | None) -> None:
    """Count a local host/device copy of ``rows`` rows started at mark ``t0``.

    ``t0``: a ``comm.stats.mark()`` (the device's clock), or ``None`` for a copy timed
    inside another call's interval.
    """
    if rows:
        comm.stats.record(category, rows * row_bytes, since=t0)


def rows_to_host(comm: Comm, host: torch.Tensor, a: int, b: int, rows: torch.Tensor,
                 add: bool = False) -> None:
    """Write (``add``: add) device ``rows`` into rows ``[a, b)`` of a host buffer.

    Counted as ``offload_ckpt``.
    """
    t0 = comm.stats.mark()
    if add:
        host[a:b] += rows.detach().to(host.device)
    else:
        host[a:b] = rows.detach()
    record_copy(comm, CKPT, b - a, rows.shape[1] * rows.element_size(), t0)


def rows_to_device(comm: Comm, host: torch.Tensor, a: int, b: int) -> torch.Tensor:
    """Rows ``[a, b)`` of a host buffer copied to the device (counted as ``offload_ckpt``)."""
    t0 = comm.stats.mark()
    rows = host[a:b].to(comm.device.torch_device, copy=True)
    record_copy(comm, CKPT, b - a, rows.shape[1] * rows.element_size(), t0)
    return rows


def interleaved_alltoallv(
    comm: Comm, sendbuf: torch.Tensor, sendcounts: np.ndarray, recvcounts: np.ndarray,
    category: str, pull: bool = True,
) -> torch.Tensor:
    """:meth:`Comm.alltoallv`'s result, moved in ``m - 1`` sequential pairwise rounds.

    HongTu's interleaved order: in round ``r`` rank ``i`` receives from ``i + r mod m``
    and sends to ``i - r mod m`` (``pull``: a fetch from the owners), or the reverse (a
    push back to them), so each rank's buffer is read by one peer per round. A rank's own
    rows are copied locally; every round is one :meth:`Comm.complete` of ``category``
    (span ``<category>.round<r>``), with the bytes received from the peer. The rows land
    where the all-to-allv puts them (from rank 0, 1, ... in order), so what follows is
    unchanged.
    """
    me, m = comm.rank, comm.size
    row = sendbuf.shape[1:]
    s_cut = np.r_[0, np.cumsum(sendcounts)]
    r_cut = np.r_[0, np.cumsum(recvcounts)]
    out = sendbuf.new_empty((int(r_cut[-1]), *row))
    out[r_cut[me] : r_cut[me + 1]] = sendbuf[s_cut[me] : s_cut[me + 1]]
    for r in range(1, m):
        src, dst = ((me + r) % m, (me - r) % m) if pull else ((me - r) % m, (me + r) % m)
        got = out[r_cut[src] : r_cut[src + 1]]
        reqs, received = [], []
        if len(got):
            reqs.append(comm.irecv(got, src, r))
            received.append(got)
        if sendcounts[dst]:
            reqs.append(comm.isend(sendbuf[s_cut[dst] : s_cut[dst + 1]], dst, r))
        comm.complete(reqs, received, category, f"{category}.round{r}")
    return out


@dataclass
class RowTable:
    """Rows one rank requests from the owners, and the rows it serves to the others.

    Attributes
    ----------
    dest
        Positions, in the requester's buffer, of the requested rows (in owner order).
    recv_counts
        Requested rows per owner rank.
    src
        Positions, in this rank's source buffer, of the rows the others requested
        (concatenated in requester order).
    send_counts
        Rows served per requester rank.
    device
        The requester's device, where its buffer and ``dest`` live (default: CPU).
    host_source
        The owners serve from (and add into) their host buffers: ``src`` stays on the
        host, and the rows cross between host and device on the requester's side.
    staged
        The SPST-planned exchange of the remote rows (:meth:`plan`), or ``None`` (one
        all-to-allv).
    interleave
        Without a plan: the all-to-allv as HongTu's interleaved rounds
        (:func:`interleaved_alltoallv`).
    """

    dest: np.ndarray
    recv_counts: np.ndarray
    src: np.ndarray
    send_counts: np.ndarray
    device: Device | None = None
    host_source: bool = False
    staged: StagedExchange | None = None
    interleave: bool = False

    def _alltoallv(self, comm: Comm, rows: torch.Tensor, sendcounts: np.ndarray,
                   recvcounts: np.ndarray, category: str, pull: bool) -> torch.Tensor:
        """One all-to-allv of ``rows``, or its interleaved rounds."""
        if self.interleave:
            return interleaved_alltoallv(comm, rows, sendcounts, recvcounts, category, pull)
        return comm.alltoallv(rows, sendcounts, category, recvcounts=recvcounts)[0]

    def __post_init__(self) -> None:
        self._device = get_device(self.device)
        self._dest = self._device.from_numpy(self.dest)
        self._src = (cpu() if self.host_source else self._device).from_numpy(self.src)
        # fixed-order inverse map of the served rows (the pushes add duplicates through it)
        self._src_map = scatter_map(self._src)

    def _own(self, counts: np.ndarray, rank: int) -> np.ndarray:
        """Mask of the entries (``dest`` or ``src`` order, by ``counts``) of ``rank``."""
        cut = np.r_[0, np.cumsum(counts)]
        mask = np.zeros(int(cut[-1]), dtype=bool)
        mask[cut[rank] : cut[rank + 1]] = True
        return mask

    def plan(
        self, comm: Comm, ids: np.ndarray, served: np.ndarray, topology: Topology,
        category: str, bytes_per_vertex: float = DEFAULT_BYTES_PER_VERTEX,
    ) -> None:
        """Route the rows between ranks along an SPST plan on ``topology`` (collective).

        ``ids``: the requested global ids (``dest`` order); ``served``: the sorted global
        ids of this rank's source buffer (the keys the requesters know its rows by).
        Afterwards :meth:`fetch` and :meth:`push_add` run the plan's stages (``category``)
        for the remote rows and copy a rank's own rows locally.
        """
        me = comm.rank
        mine_r, mine_s = self._own(self.recv_counts, me), self._own(self.send_counts, me)
        recv_counts, send_counts = self.recv_counts.copy(), self.send_counts.copy()
        recv_counts[me] = send_counts[me] = 0
        sets = HaloSets(
            np.asarray(ids, dtype=np.int64)[~mine_r], recv_counts, self.src[~mine_s], send_counts
        )
        self.staged = StagedExchange(
            comm, sets, topology, category=category, setup_category=SETUP,
            bytes_per_vertex=bytes_per_vertex, row_keys=served,
        )
        device = get_device(self.device)
        self._remote_dest = device.from_numpy(self.dest[~mine_r])
        self._local = (device.from_numpy(self.dest[mine_r]), device.from_numpy(self.src[mine_s]))

    def fetch(self, comm: Comm, source: torch.Tensor, out: torch.Tensor, category: str) -> int:
        """``out[dest] = rows of the owners' source buffers``; returns the local rows."""
        if self.staged is not None:  # the plan's category, not ``category``
            out[self._remote_dest] = self.staged.gather(source)
            dest, src = self._local
            out[dest] = gather_rows(source, src)
            return len(src)
        rows = self._alltoallv(comm, gather_rows(source, self._src), self.send_counts,
                               self.recv_counts, category, pull=True)
        out[self._dest] = self._device.to_device(rows) if self.host_source else rows
        return int(self.recv_counts[comm.rank])

    def push_add(self, comm: Comm, rows: torch.Tensor, target: torch.Tensor, category: str) -> int:
        """``target[src] += rows[dest]`` sent by every requester (the reverse of fetch)."""
        if self.staged is not None:  # the reverse plan; then this rank's own rows
            self.staged.scatter_add(gather_rows(rows, self._remote_dest), target)
            dest, src = self._local
            scatter_add_rows(target, src, gather_rows(rows, dest), unique=True)
            return len(src)
        packed = gather_rows(rows, self._dest)
        got = self._alltoallv(
            comm, self._device.host_tensor(packed) if self.host_source else packed,
            self.recv_counts, self.send_counts, category, pull=False,
        )
        scatter_add_rows(target, self._src_map, got)
        return int(self.send_counts[comm.rank])


def row_table(
    comm: Comm,
    ids: np.ndarray,
    dest: np.ndarray,
    offsets: np.ndarray,
    served: np.ndarray | None,
    request: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    slots: np.ndarray | None = None,
    interleave: bool = False,
) -> RowTable:
    """Exchange requests for the rows of ``ids`` (sorted global ids) with their owners.

    ``dest[k]`` is where ``ids[k]`` goes in the requester's buffer. An owner serves from
    its host buffer (position ``id - offsets[rank]``) when ``served`` is ``None``, else from
    a buffer holding the sorted ids ``served`` (``slots``: at those rows of the buffer, its
    in-place write positions). Collective (category ``offload_setup``), unless ``request``
    already holds :func:`~hpcgnn.exchange.halo.request_rows` of ``ids``.
    """
    recv_counts, req, send_counts = request or request_rows(comm, ids, offsets, SETUP)
    if served is None:
        src = req - int(offsets[comm.rank])
    else:
        src = np.searchsorted(served, req)
        if len(req) and not np.array_equal(served[np.minimum(src, len(served) - 1)], req):
            raise RuntimeError("a requested row is not in the owner's transition set")
        if slots is not None:
            src = slots[src]
    return RowTable(
        dest.astype(np.int64), recv_counts, src.astype(np.int64), send_counts, comm.device,
        host_source=served is None, interleave=interleave,
    )


@dataclass
class BatchTables:
    """One rank's tables for one batch.

    Attributes
    ----------
    neigh
        ``N_ij``: sorted global ids of the chunk's neighbour set.
    trans
        ``T_ij``: sorted ids of the batch's transition set that this rank owns.
    fetch, push
        Forward row fetch and backward gradient push (``none``: from/to the host
        buffers; otherwise from/to the transition buffers).
    neigh_slide, trans_slide
        ``full``: what the neighbour and transition buffers keep from the previous batch.
    trans_out
        ``full``: positions in ``trans`` of rows leaving after this batch (flushed; the
        neighbour rows leaving are ``push``'s requests).
    slots, capacity
        In-place ``full``: the transition buffer's write positions of ``trans``
        (:func:`~hpcgnn.planning.dedup.write_positions`; the tables serve from them) and
        its rows; else ``None`` and 0 (``trans`` in order at the buffer's start).
    merged, merged_rows
        With :attr:`DevicePaths.merged`: the merged buffer's row of each element of
        ``neigh`` (:func:`~hpcgnn.planning.dedup.merged_positions`; ``fetch`` writes the
        remote rows there, the own ones are read from their transition rows) and the
        buffer's rows; else ``None`` and 0.
    """

    neigh: np.ndarray
    trans: np.ndarray
    fetch: RowTable
    push: RowTable
    neigh_slide: Sliding | None = None
    trans_slide: Sliding | None = None
    trans_out: np.ndarray | None = None
    slots: np.ndarray | None = None
    capacity: int = 0
    merged: np.ndarray | None = None
    merged_rows: int = 0


def build_tables(
    comm: Comm, neigh_sets: list[np.ndarray], offsets: np.ndarray, dedup: str,
    topology: Topology | None = None, bytes_per_vertex: float = DEFAULT_BYTES_PER_VERTEX,
    paths: DevicePaths | None = None,
) -> list[BatchTables]:
    """Tables of every batch; ``neigh_sets[j]`` is ``N_ij`` in schedule order (collective).

    The requests for every ``N_ij`` give the owners their transition sets (the distinct
    ids asked of them) and, for ``none`` and ``inter``, the fetch tables themselves. With a
    ``topology`` (``inter``, ``full``: ``--exchange planned``) every fetch and push table is
    planned on it (:meth:`RowTable.plan`, rows of ``bytes_per_vertex`` bytes). ``paths``
    (default :class:`DevicePaths`): ``full`` in place serves from the transition buffer's
    write positions; ``interleave`` moves the device-to-device rows in rounds; ``merged``
    fetches only the remote rows, into the merged buffer's positions.
    """
    paths = paths or DevicePaths()
    if dedup not in DEDUP_LEVELS:
        raise ValueError(f"dedup must be one of {DEDUP_LEVELS}, not {dedup!r}")
    if topology is not None and dedup == "none":
        raise ValueError("a planned exchange needs --dedup inter or full (none has no fetches)")
    if paths.interleave and (topology is not None or dedup == "none"):
        raise ValueError("interleaved rounds carry the p2p device-to-device rows of --dedup "
                         "inter or full (a planned exchange has its own stages)")

    def planned(table: RowTable, ids: np.ndarray, keys: np.ndarray) -> RowTable:
        if topology is not None:
            table.plan(comm, ids, keys, topology, D2D, bytes_per_vertex)
        return table

    n = len(neigh_sets)
    requests = [request_rows(comm, s, offsets, SETUP) for s in neigh_sets]
    trans = [np.unique(req) for _, req, _ in requests]
    rounds = paths.interleave
    spots = write_positions(trans) if dedup == "full" and paths.in_place else None
    merged = None
    if paths.merged and dedup != "none":
        lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
        merged = merged_positions(neigh_sets, trans, None if spots is None else spots.slots,
                                  lo, hi)
    start = 0 if merged is None else merged.transition  # of the remote rows
    out = []
    for j, nb in enumerate(neigh_sets):
        at, rows = (None, 0) if merged is None else (merged.positions[j], merged.rows)
        # the merged buffer fetches the remote rows only (the own ones are in place)
        far = np.ones(len(nb), dtype=bool) if at is None else at >= start
        if dedup != "full":
            served = None if dedup == "none" else trans[j]
            if at is None:
                everything = np.arange(len(nb), dtype=np.int64)
                fetch = push = row_table(comm, nb, everything, offsets, served, requests[j],
                                         interleave=rounds)
                if served is not None:
                    planned(fetch, nb, served)
            else:  # both read / write the merged buffer's positions
                fetch = planned(row_table(comm, nb[far], at[far], offsets, served,
                                          interleave=rounds), nb[far], trans[j])
                push = planned(row_table(comm, nb, at, offsets, served, requests[j],
                                         interleave=rounds), nb, trans[j])
            out.append(BatchTables(nb, trans[j], fetch, push, merged=at, merged_rows=rows))
            continue
        slots = None
        keys = trans[j]  # the source buffer's row keys (global ids), by buffer row
        if spots is not None:
            slots = spots.slots[j]
            keys = np.full(spots.capacity, -1, dtype=np.int64)
            keys[slots] = trans[j]
        empty = np.zeros(0, dtype=np.int64)
        n_slide = sliding(neigh_sets[j - 1] if j else empty, nb)
        t_slide = sliding(trans[j - 1] if j else empty, trans[j])
        last = j + 1 == n
        n_out = sliding(empty if last else neigh_sets[j + 1], nb).new  # not in the next
        t_out = sliding(empty if last else trans[j + 1], trans[j]).new
        new = n_slide.new[far[n_slide.new]]
        fetch = row_table(comm, nb[new], new if at is None else at[new], offsets, trans[j],
                          slots=slots, interleave=rounds)
        push = row_table(comm, nb[n_out], n_out if at is None else at[n_out], offsets,
                         trans[j], slots=slots, interleave=rounds)
        planned(fetch, nb[new], keys)
        planned(push, nb[n_out], keys)
        out.append(BatchTables(nb, trans[j], fetch, push, n_slide, t_slide, t_out, slots,
                               0 if spots is None else spots.capacity, at, rows))
    return out


@dataclass(frozen=True)
class _SlideIndex:
    """The ``full`` level's positions of one batch as index tensors on the device.

    Indexing a device buffer with host positions is a hidden host-to-device copy per batch
    (and a synchronisation); these are copied once, at set-up.
    """

    trans_keep_cur: torch.Tensor
    trans_keep_prev: torch.Tensor
    trans_new: torch.Tensor
    neigh_keep_cur: torch.Tensor
    neigh_keep_prev: torch.Tensor
    trans_out: torch.Tensor

    @classmethod
    def of(cls, t: BatchTables, device: Device) -> _SlideIndex:
        ts, ns = t.trans_slide, t.neigh_slide
        assert ts is not None and ns is not None and t.trans_out is not None
        return cls(*(device.from_numpy(np.ascontiguousarray(a, dtype=np.int64)) for a in (
            ts.keep_cur, ts.keep_prev, ts.new, ns.keep_cur, ns.keep_prev, t.trans_out
        )))


@dataclass(frozen=True)
class _WriteIndex:
    """One batch's in-place positions, copied to where they are used once, at set-up.

    ``new_slots`` / ``out_slots``: the transition buffer's rows loaded in this batch and
    flushed after it (``inter``: all, in order; ``full``: the write positions of the rows
    new since, and leaving before, the neighbouring batch); ``new_host`` / ``out_host``:
    the same rows' positions in the host tier (host tensors), ``new_host_dev`` on the
    device (the zero-copy kernel's source ids), ``None`` without zero-copy.
    """

    new_slots: torch.Tensor
    new_host: torch.Tensor
    new_host_dev: torch.Tensor | None
    out_slots: torch.Tensor
    out_host: torch.Tensor

    @classmethod
    def of(cls, t: BatchTables, lo: int, device: Device, zero_copy: bool) -> _WriteIndex:
        every = np.arange(len(t.trans), dtype=np.int64)
        if t.slots is None:  # inter: every row loaded and flushed, at the buffer's start
            new = out = every
            new_slots = out_slots = every
        else:
            assert t.trans_slide is not None and t.trans_out is not None
            new, out = t.trans_slide.new, t.trans_out
            new_slots, out_slots = t.slots[new], t.slots[out]
        host = t.trans - lo

        def dev(a: np.ndarray) -> torch.Tensor:
            return device.from_numpy(np.ascontiguousarray(a, dtype=np.int64))

        return cls(dev(new_slots), cpu().from_numpy(host[new]),
                   dev(host[new]) if zero_copy else None, dev(out_slots),
                   cpu().from_numpy(host[out]))


class _Buffers:
    """Device buffers reused from batch to batch: one allocation per role and dtype.

    :meth:`view` gives a contiguous ``rows x f`` view of it, for any width (every layer's
    pass uses the same allocation); :attr:`allocated` counts the allocations, :attr:`bytes`
    their bytes.
    """

    def __init__(self, device: Device, width: int = 0) -> None:
        self.device = device
        self.width = width
        self._flat: dict[tuple[str, torch.dtype], torch.Tensor] = {}
        self.allocated = 0
        self.bytes = 0

    def view(self, role: str, rows: int, f: int, dtype: torch.dtype, capacity: int,
             zero: bool = False) -> torch.Tensor:
        """Rows ``[0, rows)`` of ``role``'s buffer as ``f`` columns.

        Made ``capacity`` rows of ``max(f, width)`` columns at first use (``zero``: of
        zeros), and again only for wider rows than that.
        """
        key = (role, dtype)
        flat = self._flat.get(key)
        if flat is None or flat.numel() < rows * f:
            cols = max(f, self.width)
            make = self.device.zeros if zero else self.device.empty
            flat = self._flat[key] = make(max(capacity, rows) * cols, dtype)
            self.allocated += 1
            self.bytes += flat.numel() * flat.element_size()
        return flat[: rows * f].view(rows, f)


class OffloadExchange:
    """Moves neighbour rows host -> device and gradients device -> host, batch by batch.

    One *pass* is a sweep over the batches in schedule order for one layer: call
    :meth:`load` for ``j = 0, 1, ...`` in the forward, :meth:`store` for ``j = 0, 1, ...``
    in the backward (each keeps what it reuses from the previous batch).

    Parameters
    ----------
    comm
        All ranks (one part each).
    tables
        :func:`build_tables` output.
    offsets
        Vertex offsets of the parts.
    dedup
        ``none``, ``inter`` or ``full``.
    paths
        In-place buffers, interleaved rounds, zero-copy loads (:class:`DevicePaths`; the
        tables' own, :func:`build_tables` ``paths=``).
    width
        The widest rows the passes move (in-place buffers are made that wide at once).

    Attributes
    ----------
    allocated
        Device buffers this exchange allocated for its batches so far (the in-place
        buffers once per role; else a transition and a neighbour buffer per load, a copy
        of the gradients and an accumulator per store).
    merged
        :attr:`DevicePaths.merged` in place: :meth:`load` returns the merged buffer (rows
        at the tables' ``merged`` positions), :meth:`store` takes gradients of its rows.
    """

    def __init__(
        self, comm: Comm, tables: list[BatchTables], offsets: np.ndarray, dedup: str,
        paths: DevicePaths | None = None, width: int = 0,
    ) -> None:
        self.comm = comm
        self.tables = tables
        self.lo = int(offsets[comm.rank])
        self.dedup = dedup
        self.paths = paths = paths or DevicePaths()
        self.in_place = paths.in_place and dedup != "none"
        if self.in_place and dedup == "full" and any(t.slots is None for t in tables):
            raise ValueError("in-place full needs the tables' write positions "
                             "(build_tables with the same paths)")
        self.merged = self.in_place and paths.merged
        if self.merged and any(t.merged is None for t in tables):
            raise ValueError("the merged buffer needs the tables' merged positions "
                             "(build_tables with the same paths)")
        # the merged positions of N_ij's rows, and (full) of those kept from batch j - 1
        self._merged_at: list[torch.Tensor] = []
        self._merged_keep: list[torch.Tensor] = []
        for t in tables if self.merged else []:
            assert t.merged is not None
            self._merged_at.append(comm.device.from_numpy(t.merged))
            keep = np.zeros(0, np.int64) if t.neigh_slide is None else t.neigh_slide.keep_cur
            self._merged_keep.append(comm.device.from_numpy(t.merged[keep]))
        self._trans: torch.Tensor | None = None
        self._neigh: torch.Tensor | None = None
        self._allocated = 0
        # host positions of the transition rows: the host tier is indexed on the host
        self._trans_ids = [cpu().from_numpy(t.trans - self.lo) for t in tables]
        self._slides = [
            _SlideIndex.of(t, comm.device) if dedup == "full" else None for t in tables
        ]
        self._writes = [_WriteIndex.of(t, self.lo, comm.device, paths.zero_copy)
                        for t in tables] if self.in_place else []
        self._bufs = _Buffers(comm.device, width)
        self._cap_t = max((t.capacity or len(t.trans) for t in tables), default=0)
        self._cap_n = max((len(t.neigh) for t in tables), default=0)

    @property
    def allocated(self) -> int:
        """Device buffers allocated for the batches so far (:class:`OffloadExchange`)."""
        return self._allocated + self._bufs.allocated

    @property
    def buffer_bytes(self) -> int:
        """Bytes of the in-place buffers allocated so far (0 without in-place buffers)."""
        return self._bufs.bytes

    def _take(self, host: torch.Tensor, j: int, positions: np.ndarray | None) -> torch.Tensor:
        """Transition rows of batch ``j`` (``positions`` of ``T_ij``, or all) from the host.

        Gathered on the host, then one host-to-device copy.
        """
        t0 = self.comm.stats.mark()
        idx = self._trans_ids[j] if positions is None else self._trans_ids[j][positions]
        rows = self.comm.device.to_device(gather_rows(host, idx))
        record_copy(self.comm, H2D, len(idx), rows.shape[1] * rows.element_size(), t0)
        return rows

    def load(self, host: torch.Tensor, j: int) -> torch.Tensor:
        """Rows of ``N_ij`` (in its order) on the device, given this rank's host rows."""
        if self.in_place:
            with torch.no_grad():
                return self._load_in_place(host, j)
        t = self.tables[j]
        f = host.shape[1]
        row_bytes = f * host.element_size()
        dev = self.comm.device
        neigh = dev.empty((len(t.neigh), f), host.dtype)
        self._allocated += 1
        if self.dedup == "none":
            local = t.fetch.fetch(self.comm, host, neigh, H2D)
            record_copy(self.comm, H2D, local, row_bytes, None)
            return neigh
        self._allocated += 1  # the transition buffer
        if self.dedup == "inter":
            trans = self._take(host, j, None)
            t.fetch.fetch(self.comm, trans, neigh, D2D)
            return neigh
        ts, sl = t.trans_slide, self._slides[j]
        assert ts is not None and sl is not None
        trans = dev.empty((len(t.trans), f), host.dtype)
        if j and self._trans is not None:
            trans[sl.trans_keep_cur] = self._trans[sl.trans_keep_prev]
        trans[sl.trans_new] = self._take(host, j, ts.new)
        if j and self._neigh is not None:
            neigh[sl.neigh_keep_cur] = self._neigh[sl.neigh_keep_prev]
        t.fetch.fetch(self.comm, trans, neigh, D2D)
        self._trans, self._neigh = trans, neigh
        return neigh

    def _load_in_place(self, host: torch.Tensor, j: int) -> torch.Tensor:
        """:meth:`load` into the in-place buffers (:class:`DevicePaths`).

        The rows new to the transition buffer go to their write positions (kept ones are
        where the previous batch left them); the neighbour buffer alternates between two
        reused buffers (``full``: the kept rows copied from the other one).
        """
        t, w, dev = self.tables[j], self._writes[j], self.comm.device
        f, dtype = host.shape[1], host.dtype
        if self.merged:  # the transition rows first, then the remote neighbour rows
            merged = self._bufs.view("merged", t.merged_rows, f, dtype, t.merged_rows, True)
            trans = merged[: self._cap_t]
        else:
            trans = self._bufs.view("trans", t.capacity or len(t.trans), f, dtype, self._cap_t)
        t0 = self.comm.stats.mark()
        if self.paths.zero_copy and trans.is_cuda and host.is_pinned():
            assert w.new_host_dev is not None
            copy_rows(host, w.new_host_dev, trans, w.new_slots)
        else:
            trans.index_copy_(0, w.new_slots, dev.to_device(gather_rows(host, w.new_host)))
        record_copy(self.comm, H2D, len(w.new_host), f * host.element_size(), t0)
        if self.merged:  # kept rows stay in their slots, the own ones are read in place
            t.fetch.fetch(self.comm, trans, merged, D2D)
            return merged
        full = self.dedup == "full"
        neigh = self._bufs.view(f"neigh{j % 2 if full else 0}", len(t.neigh), f, dtype,
                                self._cap_n)
        sl = self._slides[j]
        if full and j and self._neigh is not None:
            assert sl is not None
            copy_rows(self._neigh, sl.neigh_keep_prev, neigh, sl.neigh_keep_cur)
        t.fetch.fetch(self.comm, trans, neigh, D2D)
        self._neigh = neigh
        return neigh

    def _store_in_place(self, grads: torch.Tensor, j: int, host_grad: torch.Tensor) -> None:
        """:meth:`store` through the in-place buffers (:class:`DevicePaths`).

        The transition gradient buffer keeps the rows shared with the next batch in their
        slots; the rows new to it are zeroed, the leaving ones flushed.
        """
        t, w = self.tables[j], self._writes[j]
        f, dtype = grads.shape[1], grads.dtype
        acc = self._bufs.view("gtrans", t.capacity or len(t.trans), f, dtype, self._cap_t)
        if self.merged and self.dedup == "full":
            acc.index_fill_(0, w.new_slots, 0)
            grads = self._keep_merged(grads, j)
        elif self.dedup == "full":
            acc.index_fill_(0, w.new_slots, 0)
            mine = self._bufs.view(f"gneigh{j % 2}", len(t.neigh), f, dtype, self._cap_n)
            mine.copy_(grads)
            sl = self._slides[j]
            if j and self._neigh is not None:
                assert sl is not None
                scatter_add_rows(mine, sl.neigh_keep_cur,
                                 gather_rows(self._neigh, sl.neigh_keep_prev), unique=True)
            grads, self._neigh = mine, mine
        else:
            acc.zero_()
        t.push.push_add(self.comm, grads, acc, D2D)
        t0 = self.comm.stats.mark()
        leaving = acc if t.slots is None else gather_rows(acc, w.out_slots)
        scatter_add_rows(host_grad, w.out_host, self.comm.device.host_tensor(leaving),
                         unique=True)
        record_copy(self.comm, D2H, len(w.out_host), f * acc.element_size(), t0)

    def _keep_merged(self, grads: torch.Tensor, j: int) -> torch.Tensor:
        """``full``'s neighbour gradients in the merged layout, the kept ones summed in place.

        One gradient buffer as the merged one: a row shared with the previous batch has the
        same position in both, so its kept gradient is added where it is (the separate
        buffers' sum, ``grads + kept``), and the rest are copied in.
        """
        t, at = self.tables[j], self._merged_at[j]
        mine = self._bufs.view("gmerged", t.merged_rows, grads.shape[1], grads.dtype,
                               t.merged_rows, True)
        kept = None
        if j and self._neigh is not None:
            keep = self._merged_keep[j]
            kept = gather_rows(mine, keep)
        copy_rows(grads, at, mine, at)
        if kept is not None:
            scatter_add_rows(mine, keep, kept, unique=True)
        self._neigh = mine
        return mine

    def store(self, grads: torch.Tensor, j: int, host_grad: torch.Tensor) -> None:
        """Add the gradients of ``N_ij``'s rows into the owners' host gradient buffers."""
        if self.in_place:
            with torch.no_grad():
                self._store_in_place(grads, j, host_grad)
            return
        t = self.tables[j]
        f = grads.shape[1]
        row_bytes = f * grads.element_size()
        if self.dedup == "none":
            local = t.push.push_add(self.comm, grads, host_grad, D2H)
            record_copy(self.comm, D2H, local, row_bytes, None)
            return
        self._allocated += 1  # the transition gradient buffer
        if self.dedup == "inter":
            acc = self.comm.device.zeros((len(t.trans), f), grads.dtype)
            t.push.push_add(self.comm, grads, acc, D2D)
            self._flush(acc, j, None, host_grad)
            return
        sl = self._slides[j]
        assert sl is not None
        if j and self._neigh is not None:
            grads = grads.clone()
            self._allocated += 1
            grads[sl.neigh_keep_cur] += self._neigh[sl.neigh_keep_prev]
        acc = self.comm.device.zeros((len(t.trans), f), grads.dtype)
        if j and self._trans is not None:
            acc[sl.trans_keep_cur] = self._trans[sl.trans_keep_prev]
        t.push.push_add(self.comm, grads, acc, D2D)
        self._flush(acc, j, t.trans_out, host_grad, sl.trans_out)
        self._trans, self._neigh = acc, grads

    def _flush(
        self, acc: torch.Tensor, j: int, positions: np.ndarray | None, host_grad: torch.Tensor,
        on_device: torch.Tensor | None = None,
    ) -> None:
        """Add ``acc``'s rows (``positions`` of ``T_ij``, or all) into the host gradients.

        ``on_device``: ``positions`` as an index tensor on the device.
        """
        t0 = self.comm.stats.mark()
        idx = self._trans_ids[j] if positions is None else self._trans_ids[j][positions]
        rows = self.comm.device.host_tensor(acc if on_device is None else acc[on_device])
        scatter_add_rows(host_grad, idx, rows, unique=True)
        record_copy(self.comm, D2H, len(idx), acc.shape[1] * acc.element_size(), t0)

    def end_pass(self) -> None:
        """Drop the device buffers kept for reuse (call after each layer's sweep)."""
        self._trans = self._neigh = None


def table_volumes(comm: Comm, tables: list[BatchTables], dedup: str
                  ) -> tuple[DedupVolumes, tuple[int, int]]:
    """``V_ori``, ``V_p2p``, ``V_ru`` and the remote rows, summed over ranks (collective).

    The remote rows: rows crossing between ranks' device buffers per load, ``(forward,
    backward)`` (zero for ``--dedup none``).
    """
    me = comm.rank
    mine = np.zeros(5, dtype=np.int64)
    prev = np.zeros(0, dtype=np.int64)
    for t in tables:
        mine[0] += len(t.neigh)
        mine[1] += len(t.trans)
        mine[2] += len(sliding(prev, t.trans).new)
        prev = t.trans
        if dedup != "none":
            mine[3] += int(t.fetch.recv_counts.sum() - t.fetch.recv_counts[me])
            mine[4] += int(t.push.recv_counts.sum() - t.push.recv_counts[me])
    comm.allreduce(mine, SETUP)
    return DedupVolumes(int(mine[0]), int(mine[1]), int(mine[2])), (int(mine[3]), int(mine[4]))


def planned_transfers(tables: list[BatchTables]) -> tuple[int, int]:
    """Every transfer of the planned tables per load (forwarding included), both ways.

    The plans are the same on every rank.
    """
    plans = [(t.fetch.staged, t.push.staged) for t in tables]
    fwd = sum(sum(f.counts.values()) for f, _ in plans if f is not None)
    bwd = sum(sum(b.counts.values()) for _, b in plans if b is not None)
    return int(fwd), int(bwd)
