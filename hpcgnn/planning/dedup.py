r"""HongTu's deduplicated neighbour loading: 2-level chunks, vertex sets, volumes.

Vertices are split into ``m`` parts (one per rank) and every part into ``n`` chunks of
contiguous rows (*range-based*, balanced by nonzeros). A *schedule* ``S`` (``m x n``)
says which chunk each part runs in each *batch*: batch ``j`` is the chunks ``S[i, j]`` of
all parts, processed together. With ``N_ij`` the neighbour set (the columns of ``Â^T``'s
rows) of the chunk part ``i`` runs in batch ``j``, and ``N_j = U_i N_ij`` the batch's
*transition set*:

``V_ori = sum_ij |N_ij|``
    every chunk loads its neighbours from the host (no deduplication);
``V_p2p = sum_j |N_j|``
    each transition vertex is loaded once per batch (inter-rank deduplication);
``V_ru = |N_0| + sum_{j >= 1} |N_j \ N_{j-1}|``
    vertices shared with the previous batch stay on the device (intra-rank reuse).

Cost (HongTu eq. 4): ``C = V_ru/T_hd + (V_ori - V_p2p)/T_dd + (V_p2p - V_ru)/T_ru``
with throughputs in vertices per second. HongTu's greedy 2-phase reorganisation
(Algorithm 4) is :mod:`hpcgnn.planning.reorganization`. :func:`cached_layers` is the
per-layer choice of the recomputation-caching hybrid (Section 4.2). All sets are sorted
int64 arrays of global vertex ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from hpcgnn.errors import ConfigError

#: Default tier bandwidths in GB/s (``hd``: host-device PCIe 4.0 x16, ``dd``: NVLink 3
#: between two GPUs, ``ru``: device memory, as on HongTu's A100 server).
DEFAULT_TIER_GBPS = {"hd": 25.0, "dd": 200.0, "ru": 1500.0}


def parse_tier_gbps(text: str | Mapping[str, float] | None) -> dict[str, float] | None:
    """``"hd=25,dd=200"`` (or ``{"hd": 25, "dd": 200}``) -> ``{"hd": 25.0, "dd": 200.0}``.

    ``--tier-gbps``: the tiers' bandwidths in GB/s, positive, hd, dd, ru only (``None`` or
    empty: the defaults, :data:`DEFAULT_TIER_GBPS`).
    """
    if not text:
        return None
    items = ([f"{key}={value}" for key, value in text.items()] if isinstance(text, Mapping)
             else text.split(","))
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        key = key.strip()
        try:
            gbps = float(value)
        except ValueError:
            gbps = -1.0
        if key not in ("hd", "dd", "ru") or not gbps > 0:
            raise ConfigError(
                f"--tier-gbps: expected hd=, dd= or ru= with a positive value, got {item!r}"
            )
        out[key] = gbps
    return out


def cached_layers(
    rows: int, widths: list[int], itemsize: int, budget: float | None
) -> tuple[bool, ...]:
    """Which layers cache their aggregate ``A = Â^T D`` for the backward (HongTu Sect. 4.2).

    Caching layer ``l`` keeps ``rows x f_l`` values until the backward and saves reloading
    the layer's neighbour rows (``loads x f_l``) and redoing the aggregation; recomputing
    it keeps nothing. Both are proportional to ``f_l``, so every cached byte saves the
    same traffic: the choice fills the budget with as many bytes as fit, widest layers
    first (greedy), and ``budget=None`` caches every layer (the paper's hybrid).

    Parameters
    ----------
    rows
        Rows of the largest part (every rank must make the same choice: the reloads are
        collective).
    widths
        Input width ``f_l`` of every layer.
    itemsize
        Bytes per value.
    budget
        Bytes per rank the cached aggregates may take, or ``None`` (no limit).
    """
    if budget is None:
        return (True,) * len(widths)
    cached = [False] * len(widths)
    left = float(budget)
    for layer in sorted(range(len(widths)), key=lambda k: (-widths[k], k)):
        need = rows * widths[layer] * itemsize
        if need <= left:
            cached[layer], left = True, left - need
    return tuple(cached)


def chunk_bounds(row_nnz: np.ndarray, chunks: int) -> np.ndarray:
    """Split rows into ``chunks`` contiguous ranges of near-equal work.

    Work of a row is its nonzeros plus one (the update of the vertex itself). Returns
    ``chunks + 1`` offsets relative to the first row; ranges may be empty when there are
    fewer rows than chunks.
    """
    if chunks < 1:
        raise ValueError(f"chunks must be >= 1, got {chunks}")
    work = np.cumsum(np.asarray(row_nnz, dtype=np.int64) + 1)
    total = int(work[-1]) if len(work) else 0
    targets = (np.arange(1, chunks) * total) // chunks
    cuts = np.searchsorted(work, targets, side="left") + 1
    cuts = np.minimum(cuts, len(work))
    return np.concatenate([[0], np.maximum.accumulate(cuts), [len(work)]]).astype(np.int64)


def column_set(indptr: np.ndarray, indices: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Sorted distinct columns of CSR rows ``[lo, hi)`` (int64)."""
    return np.unique(np.asarray(indices[indptr[lo] : indptr[hi]], dtype=np.int64))


@dataclass(frozen=True)
class Sliding:
    r"""How a sorted set ``cur`` follows ``prev`` in a sequence of batches.

    Attributes
    ----------
    keep_cur, keep_prev
        Positions of ``cur & prev`` in ``cur`` and in ``prev`` (same order).
    new
        Positions in ``cur`` of ``cur \ prev`` (to be loaded).
    """

    keep_cur: np.ndarray
    keep_prev: np.ndarray
    new: np.ndarray


def sliding(prev: np.ndarray, cur: np.ndarray) -> Sliding:
    """Positions shared by, and new to, two consecutive sorted id sets."""
    _, kc, kp = np.intersect1d(cur, prev, assume_unique=True, return_indices=True)
    new = np.ones(len(cur), dtype=bool)
    new[kc] = False
    return Sliding(kc.astype(np.int64), kp.astype(np.int64), np.flatnonzero(new))


@dataclass(frozen=True)
class WritePositions:
    """HongTu's in-place buffer positions (Sect. 6): one slot per row of every batch's set.

    Attributes
    ----------
    slots
        ``slots[j][k]``: the buffer row of element ``k`` of set ``j``. An element shared
        with set ``j - 1`` keeps its slot (reused in place: nothing moves); an element new
        to set ``j`` takes a slot that set ``j - 1`` left free, lowest first.
    capacity
        Rows of the buffer: the largest set.
    """

    slots: list[np.ndarray]
    capacity: int


def write_positions(sets: list[np.ndarray]) -> WritePositions:
    """The in-place slots of a sequence of sorted id sets (the batches' transition sets).

    The paper's example: ``{1, 2, 4, 6, 7, 9}`` in slots 0-5 followed by ``{2, 3, 5, 6, 7,
    8}`` keeps 2, 6 and 7 where they are and writes 3, 5 and 8 into the slots of the
    discarded 1, 4 and 9.
    """
    capacity = max((len(s) for s in sets), default=0)
    out: list[np.ndarray] = []
    prev, prev_slots = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    for cur in sets:
        slide = sliding(prev, cur)
        slots = np.empty(len(cur), dtype=np.int64)
        slots[slide.keep_cur] = prev_slots[slide.keep_prev]
        free = np.ones(capacity, dtype=bool)
        free[slots[slide.keep_cur]] = False
        slots[slide.new] = np.flatnonzero(free)[: len(slide.new)]
        out.append(slots)
        prev, prev_slots = cur, slots
    return WritePositions(out, capacity)


@dataclass(frozen=True)
class MergedPositions:
    r"""HongTu's merged transition + neighbour buffer (Sect. 6, data buffer deduplication).

    One buffer of ``rows`` rows per rank holds ``T_ij \cup N_ij``: the transition rows at
    ``[0, transition)`` (their in-place slots), the remote neighbour rows ``N_ij \ V_i``
    after them; a neighbour row this rank owns is read where its transition row is.

    Attributes
    ----------
    positions
        ``positions[j][k]``: the buffer row of element ``k`` of ``N_ij``.
    transition
        Rows of the transition part (the largest transition set).
    rows
        Rows of the buffer: ``transition`` plus the largest remote neighbour set.
    """

    positions: list[np.ndarray]
    transition: int
    rows: int


def merged_positions(
    neigh: list[np.ndarray], trans: list[np.ndarray], trans_slots: list[np.ndarray] | None,
    lo: int, hi: int,
) -> MergedPositions:
    """Where each neighbour row of every batch sits in the merged buffer of one rank.

    ``neigh[j]``, ``trans[j]``: the sorted ids of ``N_ij`` and ``T_ij``; ``trans_slots``:
    the transition rows' write positions (:func:`write_positions`), ``None`` for rows in
    order at the buffer's start (no reuse); ``[lo, hi)``: the rank's own ids. The remote
    neighbour rows take in-place write positions of their own where ``trans_slots`` is
    given (a row shared with the previous batch stays put), else their order.
    """
    transition = max((len(t) for t in trans), default=0)
    remote = [(s < lo) | (s >= hi) for s in neigh]
    if trans_slots is None:
        far = [np.arange(int(r.sum()), dtype=np.int64) for r in remote]
    else:
        far = write_positions([s[r] for s, r in zip(neigh, remote, strict=True)]).slots
    out = []
    for j, (s, r) in enumerate(zip(neigh, remote, strict=True)):
        own = np.searchsorted(trans[j], s[~r])
        pos = np.empty(len(s), dtype=np.int64)
        pos[~r] = own if trans_slots is None else trans_slots[j][own]
        pos[r] = transition + far[j]
        out.append(pos)
    return MergedPositions(out, transition, transition + max((len(f) for f in far), default=0))


@dataclass(frozen=True)
class DedupVolumes:
    """The vertex counts of HongTu section 5.3 for one schedule."""

    v_ori: int
    v_p2p: int
    v_ru: int

    def cost(
        self, bytes_per_vertex: float, gbps: dict[str, float] | None = None, dedup: str = "full",
        d2d_rows: int | None = None,
    ) -> float:
        """Modelled communication time ``C`` in seconds (HongTu eq. 4 for ``full``).

        Throughputs are ``gbps[t] * 1e9 / bytes_per_vertex`` vertices per second for the
        tiers ``hd`` (host to device), ``dd`` (device to device) and ``ru`` (reuse). Lower
        levels pay the host rate for what they do not deduplicate: ``inter`` is
        ``V_p2p/T_hd + (V_ori - V_p2p)/T_dd``, ``none`` is ``V_ori/T_hd``.

        ``d2d_rows``: the rows a run actually moves between devices instead of the
        paper's ``V_ori - V_p2p`` (the remote rows of the exchange, or every transfer of a
        planned one, forwarding included).
        """
        bw = {**DEFAULT_TIER_GBPS, **(gbps or {})}
        sec = {t: bytes_per_vertex / (bw[t] * 1e9) for t in ("hd", "dd", "ru")}
        if dedup == "none":
            return self.v_ori * sec["hd"]
        d2d = (self.v_ori - self.v_p2p) if d2d_rows is None else d2d_rows
        if dedup == "inter":
            return self.v_p2p * sec["hd"] + d2d * sec["dd"]
        return self.v_ru * sec["hd"] + d2d * sec["dd"] + (self.v_p2p - self.v_ru) * sec["ru"]

    def as_dict(self) -> dict[str, int]:
        """``{"V_ori", "V_p2p", "V_ru"}``."""
        return {"V_ori": self.v_ori, "V_p2p": self.v_p2p, "V_ru": self.v_ru}


def identity_schedule(parts: int, chunks: int) -> np.ndarray:
    """Part ``i`` runs its chunk ``j`` in batch ``j``."""
    return np.tile(np.arange(chunks, dtype=np.int64), (parts, 1))


def _union(arrays: list[np.ndarray]) -> np.ndarray:
    return np.unique(np.concatenate(arrays)) if arrays else np.zeros(0, dtype=np.int64)


def transition_sets(sets: list[list[np.ndarray]], schedule: np.ndarray) -> list[np.ndarray]:
    """``N_j = U_i N_{i, S[i, j]}`` for every batch ``j``."""
    m, n = schedule.shape
    return [_union([sets[i][int(schedule[i, j])] for i in range(m)]) for j in range(n)]


def dedup_volumes(sets: list[list[np.ndarray]], schedule: np.ndarray) -> DedupVolumes:
    """``V_ori``, ``V_p2p`` and ``V_ru`` of running chunk neighbour sets ``sets[i][k]``."""
    v_ori = sum(len(s) for part in sets for s in part)
    trans = transition_sets(sets, schedule)
    v_p2p = sum(len(t) for t in trans)
    v_ru = sum(len(sliding(trans[j - 1], t).new) if j else len(t) for j, t in enumerate(trans))
    return DedupVolumes(int(v_ori), int(v_p2p), int(v_ru))


def remote_rows(
    sets: list[list[np.ndarray]], schedule: np.ndarray, offsets: np.ndarray, dedup: str
) -> tuple[int, int]:
    r"""Rows crossing between ranks' device buffers per layer: ``(forward, backward)``.

    ``inter`` fetches (and pushes back) ``N_ij \ V_i``; ``full`` fetches only rows new to
    the neighbour buffer, ``(N_ij \ N_i,j-1) \ V_i``, and pushes only rows leaving it,
    ``(N_ij \ N_i,j+1) \ V_i``; ``none`` has no device-to-device traffic (its remote
    rows come from the owners' host buffers).
    """
    if dedup == "none":
        return 0, 0
    fwd = bwd = 0
    m, n = schedule.shape
    for i in range(m):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        seq = [sets[i][int(schedule[i, j])] for j in range(n)]
        for j, s in enumerate(seq):
            remote = (s < lo) | (s >= hi)
            if dedup == "inter":
                fwd += int(remote.sum())
                bwd += int(remote.sum())
                continue
            if j:
                fwd += int((remote & ~np.isin(s, seq[j - 1])).sum())
            else:
                fwd += int(remote.sum())
            if j + 1 < n:
                bwd += int((remote & ~np.isin(s, seq[j + 1])).sum())
            else:
                bwd += int(remote.sum())
    return fwd, bwd
