"""Staged halo exchange: a DGCL SPST plan executed over MPI, one all-to-allv per stage.

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

The forward ``gather`` runs the stages in order. The backward ``scatter_add`` runs them in
reverse with senders and receivers swapped: the receivers of stage ``k`` send back the
gradients at their stage-``k`` receive positions (a contiguous block of the buffer) and the
senders add them where they sent from. A row sent to two peers in one stage gets two
gradients, so the additions are split into *sub-stages* in which no position occurs twice
(the ``j``-th occurrence of a position goes to sub-stage ``j``, as in
:func:`~hpcgnn.planning.plan.split_substages`), and each sub-stage is one plain indexed
``+=``.

Setup (category ``setup_category``): one gather of the groups to rank 0, one broadcast of
the plan, and one run of the forward stages with the owners' local row ids as payload, from
which every rank maps its halo to buffer positions and checks that each halo vertex arrives
exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from hpcgnn.backend import Device
from hpcgnn.comm.collective import agree
from hpcgnn.comm.communicator import Comm
from hpcgnn.errors import ConfigError, HpcgnnError
from hpcgnn.exchange.halo import HALO, HALO_SETUP, HaloSets
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
class _Stage:
    """One stage on this rank.

    Send arrays are packed peer by peer from buffer positions ``send_pos``; ``own_*``
    and ``fwd_*`` split them into rows of ``x`` and rows of the received region (``sel``:
    entry numbers in the send array, ``idx``: row numbers in ``x`` / the region).
    """

    send_counts: np.ndarray
    recv_counts: np.ndarray
    recv_lo: int
    recv_hi: int
    own_sel: torch.Tensor
    own_idx: torch.Tensor
    fwd_sel: torch.Tensor
    fwd_idx: torch.Tensor
    subs: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]


def _split(pos: np.ndarray, width: int, device: Device) -> tuple[torch.Tensor, ...]:
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
    own_sel, own_idx, fwd_sel, fwd_idx = _split(pos, width, device)
    subs = []
    for sel in substage_selections(pos):
        o_sel, o_idx, f_sel, f_idx = _split(pos[sel], width, device)
        s = device.from_numpy(sel)
        subs.append((s[o_sel], o_idx, s[f_sel], f_idx))
    hi = lo + int(recv_counts.sum())
    return _Stage(send_counts, recv_counts, lo, hi, own_sel, own_idx, fwd_sel, fwd_idx, subs)


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
        local = owned_groups(sets, comm.size)
        groups, trees, self.is_direct = _plan_on_root(
            comm, topo, [(d, len(rows)) for d, rows in local], chunks=chunks, seed=seed,
            max_stages=max_stages, fallback=fallback, bytes_per_vertex=bytes_per_vertex,
            category=setup_category,
        )
        items, spans = work_items(groups, chunks)
        self.counts: dict[TableKey, int] = tree_counts(items, trees)
        self.num_stages = max((k for k, _, _ in self.counts), default=0)
        self.stage_counts = np.zeros(self.num_stages, dtype=np.int64)
        for (k, _, _), c in self.counts.items():
            self.stage_counts[k - 1] += c
        self._width = int(sets.send_rows.max()) + 1 if len(sets.send_rows) else 0
        held = self._owned_positions(local, groups, items, spans)
        owner, needed = self._build_stages(items, trees, held)
        self.recv_rows_per_stage = np.array(
            [int(st.recv_counts.sum()) for st in self._stages], dtype=np.int64
        )
        self._recv_total = int(self.recv_rows_per_stage.sum())
        self.fwd_stage_seconds = np.zeros(self.num_stages)
        self.bwd_stage_seconds = np.zeros(self.num_stages)
        self._halo_pos = self._map_halo(owner, needed)

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
        return (
            np.concatenate([*owner, np.zeros(0, np.int64)]),
            np.concatenate([*needed, np.zeros(0, bool)]),
        )

    def _map_halo(self, owner: np.ndarray, needed: np.ndarray) -> torch.Tensor:
        """Received-region rows of the halo, in halo order (collective check)."""
        dev = self.comm.device
        ids = torch.arange(self._width, dtype=torch.int64, device=dev.torch_device).reshape(-1, 1)
        rows = dev.to_host(self._forward(ids, self.setup_category, None)[:, 0])
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
    def _forward(
        self, x: torch.Tensor, category: str, timers: np.ndarray | None
    ) -> torch.Tensor:
        """Run the stages in order; the received region of the buffer."""
        recv = x.new_empty((self._recv_total, *x.shape[1:]))
        clock = self.comm.stats.clock
        for k, st in enumerate(self._stages):
            if self.stage_counts[k] == 0:
                continue
            t0 = clock()
            if not len(st.fwd_idx):
                send = x[st.own_idx]
            elif not len(st.own_idx):
                send = recv[st.fwd_idx]
            else:
                send = x.new_empty((len(st.own_idx) + len(st.fwd_idx), *x.shape[1:]))
                send[st.own_sel] = x[st.own_idx]
                send[st.fwd_sel] = recv[st.fwd_idx]
            got, _ = self.comm.alltoallv(
                send.contiguous(), st.send_counts, category, recvcounts=st.recv_counts
            )
            recv[st.recv_lo : st.recv_hi] = got
            if timers is not None:
                timers[k] += clock() - t0
        return recv

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """Rows of ``X`` for this rank's halo (in halo order), given its owned rows ``x``."""
        recv = self._forward(x, self.category, self.fwd_stage_seconds)
        return recv[self._halo_pos]

    def scatter_add(self, halo_rows: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Send ``halo_rows`` (one per halo vertex) back along the trees; add into ``out``.

        ``out`` holds this rank's owned rows; it is updated in place and returned.
        """
        grad = halo_rows.new_zeros((self._recv_total, *halo_rows.shape[1:]))
        grad[self._halo_pos] = halo_rows
        clock = self.comm.stats.clock
        for k in range(self.num_stages - 1, -1, -1):
            st = self._stages[k]
            if self.stage_counts[k] == 0:
                continue
            t0 = clock()
            rows, _ = self.comm.alltoallv(
                grad[st.recv_lo : st.recv_hi].contiguous(), st.recv_counts, self.category,
                recvcounts=st.send_counts,
            )
            for own_sel, own_idx, fwd_sel, fwd_idx in st.subs:
                if len(own_idx):
                    out[own_idx] += rows[own_sel]
                if len(fwd_idx):
                    grad[fwd_idx] += rows[fwd_sel]
            self.bwd_stage_seconds[k] += clock() - t0
        return out

    # -- reporting -----------------------------------------------------------------------
    def modelled_stage_times(self, bytes_per_vertex: float) -> np.ndarray:
        """Modelled seconds of each stage of the global plan (topology cost model)."""
        if not self.num_stages:
            return np.zeros(0)
        return counts_cost(self.topo, self.counts, bytes_per_vertex).stage_times

    def reset_timers(self) -> None:
        """Zero the measured per-stage seconds of both directions."""
        self.fwd_stage_seconds[:] = 0.0
        self.bwd_stage_seconds[:] = 0.0
