"""Staged halo exchange: a DGCL SPST plan executed over MPI point-to-point messages.

A drop-in replacement for :class:`~hpcgnn.exchange.halo.HaloExchange` (same ``gather`` /
``scatter_add`` contract). Each owner groups the rows it sends by their destination set,
cuts every group into chunks and reports ``(destinations, group size)`` to rank 0, which
plans one tree per chunk with :func:`~hpcgnn.planning.spst.plan_items` (SPST, or the
direct plan when its modelled time is lower) and broadcasts the trees. Stage ``k`` of a
tree is the ``k``-th hop from the owner; intermediate ranks forward rows they received in
an earlier stage.

Every rank holds a *row buffer* laid out as ``[owned rows | rows received in stage 1 |
stage 2 | ...]``; within a stage, received rows are ordered by sender rank, then by chunk
(the global work-item order), which is also the order in which each sender packs them.
The owned part is not copied: buffer positions ``p < W`` (``W`` = one more than the
largest owned row ever sent) are rows of ``x`` itself, positions ``p >= W`` are row
``p - W`` of the received region.

Messages (one per ``(stage, src, dst)`` table of the plan, tag = stage) go only along the
plan's links: no collective. The forward ``gather`` posts every receive first, then every
message as soon as the rows it carries are there: rows of ``x`` at once (whatever the
stage), forwarded rows when the stages that brought them are complete; stage ``k`` then
waits only for its own messages (one :meth:`~hpcgnn.comm.communicator.Comm.complete` per
stage, traced as ``halo.stage<k>``). The backward ``scatter_add`` runs the stages in
reverse with senders and receivers swapped: the receivers of stage ``k`` send back the
gradients at their stage-``k`` receive positions (a contiguous block of the buffer) and the
senders add them where they sent from. A row sent to two peers in one stage gets two
gradients, so the additions are split into *sub-stages* in which no position occurs twice
(the ``j``-th occurrence of a position goes to sub-stage ``j``, as in
:func:`~hpcgnn.planning.plan.split_substages`), and each sub-stage is one plain indexed
``+=``. The adds run stage by stage (so the sums are the same, bit for bit, whatever the
arrival order); a gradient message leaves as soon as the adds that reach its rows are done
(at once for rows nobody forwarded).

Setup (category ``setup_category``): one gather of the groups to rank 0, one broadcast of
the plan, and one run of the forward stages with the owners' row keys as payload (the local
row ids, or the ``row_keys`` the caller gives), from which every rank maps its halo to
buffer positions and checks that each halo vertex arrives exactly once.

The rows sent need not be owned vertices: ``x`` is any source buffer, ``sets.send_rows``
its rows each peer asks for, and ``row_keys`` what the receivers know each row by (e.g.
HongTu's transition buffers, :mod:`hpcgnn.exchange.offload`: positions in the buffer,
global vertex ids as keys).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from hpcgnn.backend import Device, Mark
from hpcgnn.comm.collective import agree
from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.node import node_peers
from hpcgnn.comm.stats import SlotTimer
from hpcgnn.errors import ConfigError, HpcgnnError
from hpcgnn.exchange.halo import HALO, HALO_SETUP, HaloExchange, HaloSets
from hpcgnn.exchange.workspace import Workspace
from hpcgnn.kernels.rows import gather_rows, scatter_add_rows
from hpcgnn.planning.methods import host_method, peer_methods
from hpcgnn.planning.plan import Edge, TableKey, occurrences
from hpcgnn.planning.spst import (
    DEFAULT_BYTES_PER_VERTEX,
    WorkItem,
    chunk_sizes,
    counts_cost,
    plan_items,
    tree_counts,
)
from hpcgnn.planning.topology import Topology

Group = tuple[tuple[int, ...], int]

#: ``--exchange``: one all-to-allv (``p2p``), or this module's staged SPST plan (``planned``).
EXCHANGES = ("p2p", "planned")


# -- sub-stage accumulation (pure) ---------------------------------------------------------
def substage_selections(idx: np.ndarray) -> list[np.ndarray]:
    """Split the entries of ``idx`` into sub-stages without repeated values.

    Returns
    -------
    list of numpy.ndarray
        Sub-stage ``j`` holds the (ascending) entry numbers of the ``j``-th occurrences;
        within one sub-stage the values ``idx[sel]`` are distinct.
    """
    occ = occurrences(idx)
    return [np.flatnonzero(occ == j) for j in range(int(occ.max(initial=-1)) + 1)]


# -- plan construction -----------------------------------------------------------------------
def owned_groups(sets: HaloSets, size: int) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """Owned rows that other ranks need, grouped by destination set.

    Returns
    -------
    list of (tuple of int, numpy.ndarray)
        ``(destinations, local rows)`` per distinct destination set (sets in lexicographic
        order of their membership vectors, rows ascending).
    """
    rows = np.asarray(sets.send_rows, dtype=np.int64)
    if not len(rows):
        return []
    dest = np.repeat(np.arange(size), np.asarray(sets.send_counts, dtype=np.int64))
    uniq, inv = np.unique(rows, return_inverse=True)
    need = np.zeros((len(uniq), size), dtype=bool)
    need[inv.reshape(-1), dest] = True
    sigs, group = np.unique(need, axis=0, return_inverse=True)
    group = group.reshape(-1)
    order = np.argsort(group, kind="stable")
    cuts = np.r_[0, np.cumsum(np.bincount(group, minlength=len(sigs)))]
    return [
        (tuple(int(d) for d in np.flatnonzero(sig)), uniq[order[cuts[g] : cuts[g + 1]]])
        for g, sig in enumerate(sigs)
    ]


def work_items(
    groups: list[list[Group]], chunks: int | None
) -> tuple[list[WorkItem], list[tuple[int, int]]]:
    """Work items of every rank's groups, and each group's item range.

    Items are ordered by source rank, then group, then chunk (:func:`chunk_sizes`).
    """
    items: list[WorkItem] = []
    spans: list[tuple[int, int]] = []
    for src, rank_groups in enumerate(groups):
        for dests, n in rank_groups:
            a = len(items)
            items += [(src, dests, c) for c in chunk_sizes(n, chunks)]
            spans.append((a, len(items)))
    return items, spans


def _plan_on_root(
    comm: Comm,
    topo: Topology,
    groups: list[Group],
    *,
    chunks: int | None,
    seed: int,
    max_stages: int | None,
    fallback: bool,
    bytes_per_vertex: float,
    category: str,
) -> tuple[list[list[Group]], list[tuple[Edge, ...]], bool]:
    """Gather the groups on rank 0, plan there, broadcast groups and trees (collective)."""
    everyone = comm.gather_obj(groups, 0, category)
    payload: tuple = ()
    if comm.rank == 0:
        assert everyone is not None
        try:
            items, _ = work_items(everyone, chunks)
            trees: list[tuple[Edge, ...]] = []
            direct = False
            if comm.size > 1:
                trees, direct = plan_items(
                    topo, items, seed=seed, max_stages=max_stages, fallback=fallback,
                    bytes_per_vertex=bytes_per_vertex,
                )
            payload = ("ok", everyone, trees, direct)
        except HpcgnnError as err:
            payload = ("error", str(err))
    payload = comm.bcast_obj(payload, 0, category)
    if payload[0] == "error":
        raise ConfigError(payload[1], collective=True)
    return payload[1], payload[2], payload[3]


@dataclass
class _Send:
    """One message of a stage on this rank: rows to one peer.

    ``lo:hi`` are its entries in the stage's send array (where the backward receives the
    peer's gradients); ``own_*`` and ``fwd_*`` split its rows into rows of ``x`` and rows
    of the received region (``sel``: entry numbers in the message, ``idx``: row numbers in
    ``x`` / the region); ``deps``: the received messages (this rank's numbers) holding its
    forwarded rows; ``ready``: the stage (0-based) after whose completion it can leave,
    the latest stage among ``deps`` (-1: at once).
    """

    peer: int
    lo: int
    hi: int
    own_sel: torch.Tensor
    own_idx: torch.Tensor
    fwd_sel: torch.Tensor
    fwd_idx: torch.Tensor
    deps: np.ndarray
    ready: int = -1


@dataclass
class _Stage:
    """One stage on this rank: its messages out and in, and the backward's sub-stages.

    ``recvs``: ``(peer, lo, hi)`` rows of the received region per sending peer, in peer
    order; ``subs``: the sub-stage adds of the backward (entries of the send array go to
    rows of ``out`` or of the region's gradients; ``None`` entries: all of the array, in
    order, which is added as it is).
    """

    send_counts: np.ndarray
    recv_counts: np.ndarray
    sends: list[_Send]
    recvs: list[tuple[int, int, int]]
    subs: list[tuple[torch.Tensor | None, torch.Tensor, torch.Tensor, torch.Tensor]]


def _split(
    pos: np.ndarray, width: int, device: Device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(own_sel, own_idx, fwd_sel, fwd_idx)`` of buffer positions ``pos``."""
    own = pos < width
    own_sel, fwd_sel = np.flatnonzero(own), np.flatnonzero(~own)
    return (
        device.from_numpy(own_sel),
        device.from_numpy(pos[own_sel]),
        device.from_numpy(fwd_sel),
        device.from_numpy(pos[fwd_sel] - width),
    )


def _make_stage(
    pos: np.ndarray, send_counts: np.ndarray, recv_counts: np.ndarray, lo: int, width: int,
    device: Device,
) -> _Stage:
    """A stage from its send positions (packed peer by peer) and per-peer row counts."""
    sends, a = [], 0
    for b in np.flatnonzero(send_counts):
        seg = pos[a : a + send_counts[b]]
        deps = seg[seg >= width] - width  # region rows for now; message numbers later
        sends.append(_Send(int(b), a, a + len(seg), *_split(seg, width, device), deps))
        a += len(seg)
    recvs, r = [], lo
    for b in np.flatnonzero(recv_counts):
        recvs.append((int(b), r, r + int(recv_counts[b])))
        r += int(recv_counts[b])
    subs: list[tuple[torch.Tensor | None, torch.Tensor, torch.Tensor, torch.Tensor]] = []
    for sel in substage_selections(pos):
        o_sel, o_idx, f_sel, f_idx = _split(pos[sel], width, device)
        t = device.from_numpy(sel)
        whole = len(o_sel) == len(pos)  # every entry, ascending: the array itself
        subs.append((None if whole else t[o_sel], o_idx, t[f_sel], f_idx))
    return _Stage(send_counts, recv_counts, sends, recvs, subs)


def _pack(x: torch.Tensor, recv: torch.Tensor, m: _Send, work: Workspace) -> torch.Tensor:
    """The rows of message ``m``: rows of ``x`` and forwarded rows of the region ``recv``.

    A message of one kind of rows is one gather; a mixed one is gathered into a buffer of
    ``work`` kept for it.
    """
    if not len(m.fwd_idx):
        return gather_rows(x, m.own_idx)
    if not len(m.own_idx):
        return gather_rows(recv, m.fwd_idx)
    out = work.take(("pack", id(m)), x, m.hi - m.lo)
    out[m.own_sel] = gather_rows(x, m.own_idx)
    out[m.fwd_sel] = gather_rows(recv, m.fwd_idx)
    return out


class StagedExchange:
    """Halo gather and reverse scatter-add along an SPST plan (collective constructor).

    Parameters
    ----------
    comm
        The partition's communicator; ``comm.size`` must equal ``topo.num_ranks``.
    sets
        This rank's halo and send lists (:func:`~hpcgnn.exchange.halo.halo_sets`).
    topo
        Communication topology the plan is made for.
    seed
        Seed of the planner's random processing order.
    chunks
        Chunks per ``(owner, destinations)`` group (``None``: one vertex per chunk).
    max_stages
        Deepest stage allowed (default ``comm.size - 1``).
    category
        Communication category of ``gather`` and ``scatter_add``.
    setup_category
        Category of the planning and setup traffic.
    fallback
        Use the direct plan when its modelled time is lower than SPST's.
    bytes_per_vertex
        Bytes of one row as the plan assumes them (the widest rows exchanged): with latency
        in ``topo`` it decides how many stages pay.
    row_keys
        Key of every row of ``x`` (at least ``max(sets.send_rows) + 1``), such that a halo
        entry minus the key of its row is the same for all rows of one owner (default: the
        row number, which suits halos of global ids over owned rows; global ids as keys
        suit any source buffer).

    Raises
    ------
    ConfigError
        On every rank: ``topo`` has another number of ranks than ``comm``, ``chunks`` is
        below 1, or no tree fits in ``max_stages``.
    HpcgnnError
        On every rank: the plan does not deliver this rank's halo exactly once.
    """

    def __init__(
        self,
        comm: Comm,
        sets: HaloSets,
        topo: Topology,
        *,
        seed: int = 0,
        chunks: int | None = 64,
        max_stages: int | None = None,
        category: str = HALO,
        setup_category: str = HALO_SETUP,
        fallback: bool = True,
        bytes_per_vertex: float = DEFAULT_BYTES_PER_VERTEX,
        row_keys: np.ndarray | None = None,
    ) -> None:
        if topo.num_ranks != comm.size:
            raise ConfigError(
                f"topology '{topo.name}' has {topo.num_ranks} ranks but the communicator "
                f"has {comm.size}"
            )
        if chunks is not None and chunks < 1:
            raise ConfigError(f"chunks must be >= 1 (or None for one vertex each), got {chunks}")
        self.comm, self.sets, self.topo = comm, sets, topo
        self.category, self.setup_category = category, setup_category
        #: The plan's method of every pair from this rank, by peer (DGCL section 6.2:
        #: ``ipc``, ``host-staged``, ``nic``; :func:`~hpcgnn.planning.methods.pair_method`).
        self.methods = peer_methods(topo, comm.rank)
        same_node = node_peers(comm.mpi)
        #: How each peer's messages travel here: the wire's path of a device buffer sent
        #: by the pair's method, on the CPU ``shared-memory`` or ``network``.
        self.transports = [
            comm.wire.method_path(m) if comm.device.is_cuda else host_method(bool(same))
            for m, same in zip(self.methods, same_node, strict=True)
        ]
        local = owned_groups(sets, comm.size)
        groups, trees, self.is_direct = _plan_on_root(
            comm, topo, [(d, len(rows)) for d, rows in local], chunks=chunks, seed=seed,
            max_stages=max_stages, fallback=fallback, bytes_per_vertex=bytes_per_vertex,
            category=setup_category,
        )
        items, spans = work_items(groups, chunks)
        self.counts: dict[TableKey, int] = tree_counts(items, trees)
        self.num_stages = max((k for k, _, _ in self.counts), default=0)
        #: One stage (no row forwarded): the plan is the direct exchange, so it runs as the
        #: p2p exchange does (one all-to-allv each way; Isend/Irecv pay where stages
        #: overlap), unless its pairs' methods take different paths on the wire (a
        #: collective has one: ``host-staged`` beside ``ipc`` with a CUDA-aware MPI)
        self.is_p2p = self.num_stages == 1 and len(set(map(comm.wire.method_path,
                                                           self.methods))) == 1
        self._p2p = HaloExchange(comm, sets, category, self.methods) if self.is_p2p else None
        self.stage_counts = np.zeros(self.num_stages, dtype=np.int64)
        #: Run the stages one after another, each after a barrier, with its own messages
        #: alone (as DGCL's cost model charges a plan); the probes of the exchange report
        #: measure so. Training overlaps them (``False``).
        self.sequential = False
        for (k, _, _), c in self.counts.items():
            self.stage_counts[k - 1] += c
        self._width = int(sets.send_rows.max()) + 1 if len(sets.send_rows) else 0
        held = self._owned_positions(local, groups, items, spans)
        owner, needed = self._build_stages(items, trees, held)
        self.recv_rows_per_stage = np.array(
            [int(st.recv_counts.sum()) for st in self._stages], dtype=np.int64
        )
        self._recv_total = int(self.recv_rows_per_stage.sum())
        self._work = Workspace()
        self._fwd_timer = SlotTimer(self.num_stages)
        self._bwd_timer = SlotTimer(self.num_stages)
        self._halo_pos = self._map_halo(owner, needed, row_keys)

    # -- setup ---------------------------------------------------------------------------
    def _owned_positions(
        self,
        local: list[tuple[tuple[int, ...], np.ndarray]],
        groups: list[list[Group]],
        items: list[WorkItem],
        spans: list[tuple[int, int]],
    ) -> dict[int, np.ndarray]:
        """Buffer positions (local rows) of the rows of this rank's own items."""
        first = sum(len(g) for g in groups[: self.comm.rank])
        held: dict[int, np.ndarray] = {}
        for g, (_, rows) in enumerate(local):
            a, b = spans[first + g]
            cut = np.cumsum([0] + [items[i][2] for i in range(a, b)])
            for j, i in enumerate(range(a, b)):
                held[i] = rows[cut[j] : cut[j + 1]]
        return held

    def _build_stages(
        self,
        items: list[WorkItem],
        trees: list[tuple[Edge, ...]],
        held: dict[int, np.ndarray],
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per-stage send positions and counts of this rank; owner/needed per received row."""
        me, p, w = self.comm.rank, self.comm.size, self._width
        by_stage: list[list[tuple[int, int, int]]] = [[] for _ in range(self.num_stages)]
        for i, tree in enumerate(trees):
            for k, a, b in tree:
                if me in (a, b):
                    by_stage[k - 1].append((a, b, i))
        owner: list[np.ndarray] = []
        needed: list[np.ndarray] = []
        self._stages: list[_Stage] = []
        base = 0
        for edges in by_stage:
            sends = sorted((b, i) for a, b, i in edges if a == me)
            recvs = sorted((a, i) for a, b, i in edges if b == me)
            if any(i not in held for _, i in sends):
                raise RuntimeError("invalid plan: a rank sends rows it does not hold")
            pos = np.concatenate([held[i] for _, i in sends] + [np.zeros(0, np.int64)])
            send_counts = np.zeros(p, dtype=np.int64)
            recv_counts = np.zeros(p, dtype=np.int64)
            for b, i in sends:
                send_counts[b] += items[i][2]
            lo = base
            for a, i in recvs:
                c = items[i][2]
                if i in held:
                    raise RuntimeError("invalid plan: a rank receives rows twice")
                held[i] = np.arange(w + base, w + base + c, dtype=np.int64)
                recv_counts[a] += c
                owner.append(np.full(c, items[i][0], dtype=np.int64))
                needed.append(np.full(c, me in items[i][1], dtype=bool))
                base += c
            self._stages.append(_make_stage(pos, send_counts, recv_counts, lo, w, self.comm.device))
        self._link_messages()
        return (
            np.concatenate([*owner, np.zeros(0, np.int64)]),
            np.concatenate([*needed, np.zeros(0, bool)]),
        )

    def _link_messages(self) -> None:
        """Number this rank's received messages; when each message can be sent.

        Forward: a message waits for the received messages holding its forwarded rows
        (``_Send.deps``, message numbers), i.e. for the latest stage among them
        (``_Send.ready``; the stages complete in order). Backward: the gradients of a
        received message are final once every later stage whose adds reach its rows has
        been added (the earliest such stage, as the backward runs the stages in reverse), or
        at once. Both are made here once, as lists per stage that the exchanges walk.
        """
        msgs = [(k, *m) for k, st in enumerate(self._stages) for m in st.recvs]
        starts = np.array([lo for _, _, lo, _ in msgs], dtype=np.int64)
        stage_of = np.array([k for k, _, _, _ in msgs], dtype=np.int64)
        ready = np.full(len(msgs), -1, dtype=np.int64)
        fwd_ready: list[list[tuple[int, _Send]]] = [[] for _ in range(self.num_stages + 1)]
        for k in range(self.num_stages - 1, -1, -1):
            for m in self._stages[k].sends:
                m.deps = np.unique(np.searchsorted(starts, m.deps, side="right") - 1)
                m.ready = int(stage_of[m.deps].max(initial=-1))
                ready[m.deps] = k
        for k, st in enumerate(self._stages):
            for m in st.sends:
                fwd_ready[m.ready + 1].append((k, m))
        #: per stage ``k + 1`` (0: at once) the forward messages ``(stage, send)`` it frees
        self._fwd_ready = fwd_ready
        #: per stage ``k + 1`` (0: at once) the received messages whose gradients it frees
        self._bwd_ready = [
            [msgs[i] for i in np.flatnonzero(ready == k)] for k in range(-1, self.num_stages)
        ]
        #: per stage this rank's received messages ``(peer, lo, hi)``
        self._recv_msgs = [[(peer, lo, hi) for k2, peer, lo, hi in msgs if k2 == k]
                           for k in range(self.num_stages)]
        self._live = [k for k in range(self.num_stages) if self.stage_counts[k]]

    def _map_halo(
        self, owner: np.ndarray, needed: np.ndarray, row_keys: np.ndarray | None
    ) -> torch.Tensor:
        """Received-region rows of the halo, in halo order (collective check)."""
        dev = self.comm.device
        if row_keys is None:
            ids = torch.arange(self._width, dtype=torch.int64, device=dev.torch_device)
        else:
            ids = dev.from_numpy(np.ascontiguousarray(row_keys[: self._width], dtype=np.int64))
        ids = ids.reshape(-1, 1)
        recv = ids.new_empty((self._recv_total, 1))
        rows = dev.to_host(self._forward(ids, self.setup_category, None, recv)[:, 0])
        error = None
        try:
            pos = self._halo_positions(owner, needed, rows)
        except HpcgnnError as err:
            error, pos = err, np.zeros(0, np.int64)
        agree(self.comm, error)
        return dev.from_numpy(pos)

    def _halo_positions(
        self, owner: np.ndarray, needed: np.ndarray, rows: np.ndarray
    ) -> np.ndarray:
        """Match the received rows this rank needs to ``sets.halo``; raise if they differ."""
        sets = self.sets
        at = np.flatnonzero(needed)
        order = np.lexsort((rows[at], owner[at]))
        at = at[order]
        own, loc = owner[at], rows[at]
        halo = np.asarray(sets.halo, dtype=np.int64)
        want = np.asarray(sets.recv_counts, dtype=np.int64)
        got = np.bincount(own, minlength=self.comm.size)
        where = f"rank {self.comm.rank}"
        if len(at) != len(halo) or not np.array_equal(got, want):
            raise HpcgnnError(
                f"staged exchange on {where}: the plan delivers {len(at)} halo rows "
                f"(per owner {got.tolist()}), the halo has {len(halo)} ({want.tolist()})"
            )
        same = (own[1:] == own[:-1]) & (loc[1:] == loc[:-1])
        shift = halo - loc
        off = (own[1:] == own[:-1]) & (shift[1:] != shift[:-1])
        if same.any() or off.any():
            raise HpcgnnError(
                f"staged exchange on {where}: halo rows arrive twice or do not match the "
                "halo's vertex ids"
            )
        return at

    # -- exchange ------------------------------------------------------------------------
    @property
    def fwd_stage_seconds(self) -> np.ndarray:
        """Measured seconds of each stage of the forward exchanges so far."""
        return self._fwd_timer.seconds

    @property
    def bwd_stage_seconds(self) -> np.ndarray:
        """Measured seconds of each stage of the backward exchanges so far."""
        return self._bwd_timer.seconds

    def _forward(
        self, x: torch.Tensor, category: str, timers: SlotTimer | None, recv: torch.Tensor
    ) -> torch.Tensor:
        """Run the stages into ``recv`` (the received region of the buffer); return it.

        Every receive is posted first, every message of owned rows at once (whatever its
        stage), a message of forwarded rows as soon as the stages that bring them are
        complete; stage ``k`` waits for its own messages only. :attr:`sequential`: stage
        ``k`` starts after a barrier, with its own messages alone (DGCL's model of a plan).
        """
        comm, mark = self.comm, self.comm.stats.mark
        reqs: dict[int, list] = {}
        views: dict[int, list[torch.Tensor]] = {}
        for k in self._live:
            views[k] = [recv[lo:hi] for _, lo, hi in self._recv_msgs[k]]
            reqs[k] = [comm.irecv(v, peer, k, self.methods[peer])
                       for v, (peer, _, _) in zip(views[k], self._recv_msgs[k], strict=True)]
        packed: list[torch.Tensor] = []  # alive until sent

        def send(k: int, m: _Send) -> None:
            packed.append(_pack(x, recv, m, self._work))
            reqs[k].append(comm.isend(packed[-1], m.peer, k, self.methods[m.peer]))

        t0 = mark()
        if not self.sequential:  # owned rows now, forwarded ones once they have arrived
            for k, m in self._fwd_ready[0]:
                send(k, m)
        for k in self._live:
            if self.sequential:  # the earlier stages are complete: their rows are here
                t0 = self._start_stage()
                for m in self._stages[k].sends:
                    send(k, m)
            comm.complete(reqs[k], views[k], category, f"{category}.stage{k + 1}")
            if not self.sequential:
                for k2, m in self._fwd_ready[k + 1]:
                    send(k2, m)
            t1 = mark()
            if timers is not None:
                timers.add(k, t0, t1)
            t0 = t1
        return recv

    def gather(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Rows of ``X`` for this rank's halo (in halo order), given its owned rows ``x``.

        ``out``: where the rows go (one per halo vertex; a new tensor when ``None``).
        """
        if self._p2p is not None:
            t0 = self.comm.stats.mark()
            rows = self._p2p.gather(x, out)
            self._fwd_timer.add(0, t0, self.comm.stats.mark())
            return rows
        recv = self._work.take("recv", x, self._recv_total)
        rows = gather_rows(self._forward(x, self.category, self._fwd_timer, recv), self._halo_pos)
        return rows if out is None else out.copy_(rows)

    def scatter_add(self, halo_rows: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Send ``halo_rows`` (one per halo vertex) back along the trees; add into ``out``.

        ``out`` holds this rank's owned rows; it is updated in place and returned. Every
        receive is posted first; a gradient message leaves as soon as its rows are final;
        the adds run stage by stage in reverse, in sub-stages, in a fixed order.
        """
        if self._p2p is not None:
            t0 = self.comm.stats.mark()
            self._p2p.scatter_add(halo_rows, out)
            self._bwd_timer.add(0, t0, self.comm.stats.mark())
            return out
        comm, mark = self.comm, self.comm.stats.mark
        grad = self._work.take("grad", halo_rows, self._recv_total).zero_()
        grad[self._halo_pos] = halo_rows
        reqs: dict[int, list] = {}
        views: dict[int, list[torch.Tensor]] = {}
        rows: dict[int, torch.Tensor] = {}
        for k in self._live:
            st = self._stages[k]
            rows[k] = self._work.take(("grad", k), halo_rows, int(st.send_counts.sum()))
            views[k] = [rows[k][m.lo : m.hi] for m in st.sends]
            reqs[k] = [comm.irecv(v, m.peer, k, self.methods[m.peer])
                       for v, m in zip(views[k], st.sends, strict=True)]

        def send(msgs: list[tuple[int, int, int, int]]) -> None:
            for k, peer, lo, hi in msgs:
                reqs[k].append(comm.isend(grad[lo:hi], peer, k, self.methods[peer]))

        t0 = mark()
        if not self.sequential:
            send(self._bwd_ready[0])
        for k in reversed(self._live):
            if self.sequential:  # the later stages' adds are done
                t0 = self._start_stage()
                send([(k, *m) for m in self._recv_msgs[k]])
            comm.complete(reqs[k], views[k], self.category, f"{self.category}.stage{k + 1}")
            for own_sel, own_idx, fwd_sel, fwd_idx in self._stages[k].subs:
                if len(own_idx):
                    got = rows[k] if own_sel is None else gather_rows(rows[k], own_sel)
                    scatter_add_rows(out, own_idx, got, unique=True)
                if len(fwd_idx):
                    scatter_add_rows(grad, fwd_idx, gather_rows(rows[k], fwd_sel), unique=True)
            if not self.sequential:
                send(self._bwd_ready[k + 1])
            t1 = mark()
            self._bwd_timer.add(k, t0, t1)
            t0 = t1
        return out

    # -- reporting -----------------------------------------------------------------------
    def modelled_stage_times(self, bytes_per_vertex: float) -> np.ndarray:
        """Modelled seconds of each stage of the global plan (topology cost model)."""
        if not self.num_stages:
            return np.zeros(0)
        return counts_cost(self.topo, self.counts, bytes_per_vertex).stage_times

    def _start_stage(self) -> Mark:
        """Sequential stages: wait for every rank (timed as ``control``), then start the clock."""
        self.comm.barrier("control")
        return self.comm.stats.mark()

    def reset_timers(self) -> None:
        """Zero the measured per-stage seconds of both directions."""
        self._fwd_timer.reset()
        self._bwd_timer.reset()
