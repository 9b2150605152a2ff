"""Measure this machine's alpha and beta: ping-pong between every pair of ranks.

``hpcgnn plan --calibrate`` runs :func:`calibrate` under ``mpiexec -n P`` and writes the
result as a topology file (:func:`hpcgnn.planning.topology.measured_topology`), so the
planner and the cost models can use the latencies and bandwidths the job really sees
instead of nominal ones. Pairs are measured one at a time (the others wait asleep), each with a
small and a large message; ``alpha`` is the one-way time of the small message and
``beta`` the extra time per byte of the large one.

The endpoint terms come from every rank busy at once, run as a halo exchange runs a
stage: rows gathered from scattered positions of a buffer on the communicator's device
into the send buffer, one all-to-all of them through :class:`Comm` to every other rank, a
fresh receive buffer. Empty, it gives the stage latency (the synchronisation and the
software a stage costs at least); with one 8-byte row per peer and then 256-byte rows
summing to ``large_bytes`` per rank, the endpoint: a rank sends and receives ``2 (P - 1)``
messages, so the small one's time over the empty one's, divided by that, is the time a
rank spends per message (LogP's overhead ``o``), and the large one's extra time per byte
a rank moves is its endpoint rate (packing included). Where a host has fewer cores than
ranks (the union of its ranks' CPU affinities), every rank got ``cores / ranks`` of a core
while all were busy; the endpoint is reported per core (times that fraction) together
with each host's cores, which the cost model turns back into the shared-core time of a
stage (the topology's ``core_pools``), so a stage in which few ranks work is not charged
as if all were.

Contention: on several hosts the pairs across hosts are timed a round at a time
(:func:`host_links`, each host's NIC); inside a host every pair is timed alone and every
two disjoint pairs at once (:func:`pair_contention`), from which
:func:`hpcgnn.planning.contention.shared_buses` infers the resources its pairs share.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import combinations

import numpy as np
import scipy.sparse as sp
import torch
from mpi4py import MPI

from hpcgnn.backend.csr import to_torch_csr
from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.node import host_cores
from hpcgnn.errors import HpcgnnError

CATEGORY = "calibrate"
#: Seconds between the tests of the ranks that wait while a pair measures: they sleep
#: instead of spinning, so where ranks share cores the pair has them (spinning neighbours
#: once made an 8-byte round trip at 4 ranks on 2 cores slower than a 1 MiB one).
IDLE_S = 1e-4
#: Row size of the exchange-like all-to-alls: 64 float32, a typical hidden width.
ROW_BYTES = 256


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` measured (the same on every rank).

    Attributes
    ----------
    hosts
        Processor name of every rank (ranks of one host form a node).
    pairs
        ``(a, b) -> (alpha_s, beta_s_per_byte)`` for every pair ``a < b``.
    stage_alpha_s
        Median seconds of an empty all-to-all.
    small_bytes, large_bytes
        The two message sizes.
    endpoint
        ``(alpha_s, beta_s_per_byte)`` of a rank as an endpoint with a core to itself (time
        per message sent or received, time per byte moved), or ``None`` on one rank.
    cores
        Cores the ranks of each host may run on (by host name).
    collectives
        The collectives as the algorithms run them, every rank busy
        (:func:`busy_collectives`), by group size (:func:`group_sizes`; the job's size
        last): ``(messages, bytes, seconds)`` in the cost model's accounting, for
        :func:`hpcgnn.cost.machine.fit_link`; empty on one rank.
    nics
        Bytes per second out of each host with its ranks talking to other hosts at once
        (:func:`host_links`), the topology's shared resources; ``None`` on one host.
    contention
        Pairs of a host timed alone and two at once (:func:`pair_contention`), from which
        the resources inside a host are inferred (:class:`hpcgnn.planning.contention.
        PairTiming` of each, :func:`~hpcgnn.planning.contention.shared_buses`).
    """

    hosts: list[str]
    pairs: dict[tuple[int, int], tuple[float, float]]
    stage_alpha_s: float
    small_bytes: int
    large_bytes: int
    endpoint: tuple[float, float] | None = None
    cores: dict[str, int] | None = None
    collectives: dict[int, list[tuple[int, float, float]]] = field(default_factory=dict)
    nics: dict[str, float] | None = None
    contention: list[PairTimes] = field(default_factory=list)


def _round_trip(comm: Comm, a: int, b: int, buf: torch.Tensor, repeats: int) -> float:
    """Median round-trip seconds of ``buf`` between ranks ``a`` and ``b`` (on ``a``)."""
    times = []
    peer = b if comm.rank == a else a
    for _ in range(repeats + 1):  # the first exchange warms the path up
        t0 = MPI.Wtime()
        if comm.rank == a:
            comm.complete([comm.isend(buf, peer)], [], CATEGORY)
            comm.complete([comm.irecv(buf, peer)], [buf], CATEGORY)
        else:
            comm.complete([comm.irecv(buf, peer)], [buf], CATEGORY)
            comm.complete([comm.isend(buf, peer)], [], CATEGORY)
        times.append(MPI.Wtime() - t0)
    return statistics.median(times[1:])


def calibrate(
    comm: Comm, small_bytes: int = 8, large_bytes: int = 1 << 20, repeats: int = 5
) -> Calibration:
    """Ping-pong every pair of ranks of ``comm`` and time an empty all-to-all (collective).

    Parameters
    ----------
    comm
        The ranks to measure (every pair is measured, so keep P moderate: P (P-1) / 2
        pairs of ``2 (repeats + 1)`` round trips).
    small_bytes, large_bytes
        Message sizes for the latency and the bandwidth.
    repeats
        Round trips per pair and size (the median counts); the all-to-alls run five
        times as often.
    """
    if not 0 < small_bytes < large_bytes or small_bytes % 4:
        raise ValueError(
            f"need 0 < small_bytes < large_bytes, small_bytes a multiple of 4, got "
            f"{small_bytes}, {large_bytes}"
        )
    # buffers where the job's data lives: a GPU's memory with --device cuda
    small = comm.device.zeros((small_bytes,), torch.uint8)
    large = comm.device.zeros((large_bytes,), torch.uint8)
    mine: dict[tuple[int, int], tuple[float, float]] = {}
    slower: list[str] = []  # pairs whose large message timed no slower than the small one
    for a in range(comm.size):
        for b in range(a + 1, comm.size):
            comm.barrier(CATEGORY, idle_s=IDLE_S)  # the others sleep while a pair measures
            if comm.rank not in (a, b):
                continue
            t_small = _round_trip(comm, a, b, small, repeats) / 2
            t_large = _round_trip(comm, a, b, large, repeats) / 2
            if comm.rank == a:
                if t_large <= t_small:
                    slower.append(f"ranks {a}-{b}: {large_bytes} B in {t_large:.3g} s,"
                                  f" {small_bytes} B in {t_small:.3g} s")
                beta = max(t_large - t_small, 1e-12) / (large_bytes - small_bytes)
                mine[(a, b)] = (t_small, beta)
    runs = 5 * repeats  # an all-to-all is short and noisier than a ping-pong: more runs
    stage = _all_to_all(comm, ROW_BYTES, 0, runs)
    endpoint = None
    if comm.size > 1:  # every rank sends and receives 2 (P - 1) messages
        rows = max(large_bytes // ((comm.size - 1) * ROW_BYTES), 1)
        per_peer = rows * ROW_BYTES
        t_small = _all_to_all(comm, small_bytes, 1, runs)
        t_large = _all_to_all(comm, ROW_BYTES, rows, runs)
        messages = 2 * (comm.size - 1)
        if t_large <= t_small and comm.rank == 0:
            slower.append(f"all-to-all: {large_bytes} B per rank in {t_large:.3g} s,"
                          f" {small_bytes} B in {t_small:.3g} s")
        endpoint = (
            max(t_small - stage, 0.0) / messages,
            max(t_large - t_small, 1e-12) / (messages * max(per_peer - small_bytes, 1)),
        )
    inconsistent = [s for part in comm.allgather_obj(slower, CATEGORY) for s in part]
    if inconsistent:  # no bandwidth fits: refuse rather than write a clamped beta
        raise HpcgnnError(
            f"calibration: the large messages timed no slower than the small ones"
            f" ({'; '.join(inconsistent[:3])}{' ...' if len(inconsistent) > 3 else ''}):"
            " the machine is too busy or the messages too small to fit a bandwidth; rerun"
            " on idle nodes", collective=True,
        )
    pairs: dict[tuple[int, int], tuple[float, float]] = {}
    for part in comm.allgather_obj(mine, CATEGORY):
        pairs.update(part)
    hosts, cores = host_cores(comm, CATEGORY)
    if endpoint is not None:  # all ranks were busy: each had cores / ranks of a core
        share = min(min(1.0, cores[h] / hosts.count(h)) for h in cores)
        endpoint = (endpoint[0] * share, endpoint[1] * share)
    collectives = {q: busy_collectives(comm, repeats, q) for q in group_sizes(comm.size)}
    nics = host_links(comm, hosts, large, repeats)
    contention = pair_contention(comm, hosts, large, repeats)
    return Calibration(hosts, pairs, stage, small_bytes, large_bytes, endpoint, cores,
                       collectives, nics, contention)


def pairings(p: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint pairs covering every pair of ``p`` ranks once (the circle method).

    ``p - 1`` rounds for even ``p`` (``p`` for odd: each round one rank sits out).
    """
    ids = list(range(p)) + ([-1] if p % 2 else [])
    n = len(ids)
    out = []
    for _ in range(n - 1):
        out.append([(min(ids[i], ids[n - 1 - i]), max(ids[i], ids[n - 1 - i]))
                    for i in range(n // 2) if -1 not in (ids[i], ids[n - 1 - i])])
        ids = [ids[0], ids[-1], *ids[1:-1]]
    return out


def host_links(
    comm: Comm, hosts: list[str], buf: torch.Tensor, repeats: int
) -> dict[str, float] | None:
    """Each host's bytes per second out of it when its ranks talk to other hosts at once.

    The pairs of ranks on different hosts are measured concurrently, a round of disjoint
    pairs (:func:`pairings`) at a time: both ranks of a pair send ``buf`` to each other at
    once, after a barrier, ``repeats`` times (median, slowest rank). A host's rate in a
    round is the bytes its ranks sent to other hosts over the round's time, and its figure
    the best round's: what its ranks' shared way out (NIC, socket link) carries when they
    all use it, which pairs measured one at a time cannot show. ``None`` on one host.
    """
    if len(set(hosts)) < 2:
        return None
    nbytes = buf.numel() * buf.element_size()
    best: dict[str, float] = {}
    for pairs in pairings(comm.size):
        across = [(a, b) for a, b in pairs if hosts[a] != hosts[b]]
        if not across:
            continue
        seconds = _pairs_at_once(comm, across, buf, repeats)
        for h in set(hosts):
            out = nbytes * sum((hosts[a] == h) + (hosts[b] == h) for a, b in across)
            if out and seconds > 0:
                best[h] = max(best.get(h, 0.0), out / seconds)
    return best


def _pairs_at_once(
    comm: Comm, pairs: list[tuple[int, int]], buf: torch.Tensor, repeats: int
) -> float:
    """Median seconds (slowest rank) of disjoint ``pairs`` exchanging ``buf`` at once.

    Both ranks of a pair send ``buf`` to each other, after a barrier of all ranks (the
    others take no part), ``repeats`` times after one that warms the paths up. Collective.
    """
    other = comm.device.empty_like(buf)
    peer = next((b if comm.rank == a else a for a, b in pairs if comm.rank in (a, b)), None)

    def exchange() -> None:
        if peer is not None:
            comm.complete([comm.isend(buf, peer), comm.irecv(other, peer)], [other], CATEGORY)

    times = [comm.allreduce_scalar(_synced(comm, exchange), MPI.MAX, CATEGORY)
             for _ in range(repeats + 1)]  # the first warms the paths up
    return statistics.median(times[1:])


#: Most ranks of a host whose pairs :func:`pair_contention` times two at a time (every two
#: disjoint pairs of ``r`` ranks: ``r (r-1) (r-2) (r-3) / 8``, 210 at 8 ranks).
MAX_CONTENTION_RANKS = 8


#: Two disjoint pairs of a host timed alone and at once: ``(host, (pair, pair), (seconds
#: alone, seconds alone), seconds together)``, the fields of
#: :class:`hpcgnn.planning.contention.PairTiming`.
PairTimes = tuple[str, tuple[tuple[int, int], tuple[int, int]], tuple[float, float], float]


def pair_contention(
    comm: Comm, hosts: list[str], buf: torch.Tensor, repeats: int
) -> list[PairTimes]:
    """Every pair of ranks of a host alone, and every two disjoint pairs of it at once.

    Each pair's ranks send ``buf`` to each other at once (:func:`_pairs_at_once`), first
    every pair of a host alone, then every two of its pairs that share no rank together;
    :func:`hpcgnn.planning.contention.shared_buses` finds the resources inside the host
    that they share (the PCIe switch of two GPUs, the socket link, the memory bus), which
    the NIC rounds of :func:`host_links` and the ping-pongs of one pair cannot show.
    Hosts of fewer than four ranks have no two disjoint pairs; hosts of more than
    :data:`MAX_CONTENTION_RANKS` are left out (too many combinations). Collective.
    """
    out = []
    for h in dict.fromkeys(hosts):
        ranks = [r for r, x in enumerate(hosts) if x == h]
        if not 4 <= len(ranks) <= MAX_CONTENTION_RANKS:
            continue
        pairs = list(combinations(ranks, 2))
        alone = {p: _pairs_at_once(comm, [p], buf, repeats) for p in pairs}
        for p, q in combinations(pairs, 2):
            if not set(p) & set(q):
                both = _pairs_at_once(comm, [p, q], buf, repeats)
                out.append((h, (p, q), (alone[p], alone[q]), both))
    return out


#: Message sizes of :func:`busy_collectives`, 4 KiB to 384 KiB: one alpha and beta fit
#: one broadcast algorithm, and MPI libraries switch to another for long messages (MPICH
#: from 512 KiB, to a scatter and a ring all-gather whose ``P - 1`` steps each need a pair of
#: ranks on cores at once: where ranks share cores, 8-12x the time of 256 KiB for 4x the
#: bytes on the 2-core development machine). Blocks larger than these are charged at this
#: rate (``docs/planning.md``).
COLLECTIVE_BYTES = (1 << 12, 1 << 14, 1 << 16, 1 << 17, 1 << 18, 3 << 17)


def _synced(comm: Comm, call: Callable[[], object]) -> float:
    """Seconds of ``call()`` on this rank, started after a barrier of ``comm``."""
    comm.barrier(CATEGORY)
    t0 = MPI.Wtime()
    call()
    return MPI.Wtime() - t0


def group_sizes(p: int) -> list[int]:
    """The sizes of the groups whose broadcasts :func:`calibrate` times at ``p`` ranks.

    Every divisor ``q >= 2`` of ``p``: the axes of the grids of ``p`` ranks (a 3D grid's
    fibers, a 1.5D grid's rows) broadcast in groups of these sizes; ``p`` itself last.
    """
    return [q for q in range(2, p + 1) if p % q == 0]


def busy_collectives(
    comm: Comm, repeats: int, group: int | None = None
) -> list[tuple[int, float, float]]:
    """Time broadcast rounds as CAGNET's algorithms run them (collective).

    A *round* is ``q`` broadcasts in a group of ``q`` ranks, each rank the root of one (the
    stages of a 1D SpMM over all ``q = P`` ranks; the 1.5D, 2D and 3D SpMMs broadcast the
    same way along their process rows, columns and fibers, and their broadcasts carry
    nearly all of their bytes: the all-reduces of the gradients and 1.5D's row sums are
    charged at the same rate). ``group``: ``q``, a divisor of ``P`` (default ``P``); the
    ``P / q`` groups of consecutive ranks run their rounds at once, as a grid's groups of
    an axis run theirs. Per byte a rank receives, a broadcast in a small group costs more
    than in the whole job (a tree's steps, not the bytes received, set its time: at ``P
    = 8`` here groups of 2 took 1.3-1.5x the job's time per byte received), so each group
    size gets its own fit (:func:`group_sizes`). Every rank takes part
    and, as in a stage, multiplies its sparse block by what arrived before the next
    broadcast (:func:`_stage_block`), so the times include what a rank pays while all are
    busy: ranks that finished a broadcast compute on the cores the others still need,
    which ping-pongs of one pair and back-to-back collectives do not show. A receiver's
    block lands in a new buffer, as in a stage. Each broadcast starts after a barrier of
    all ``P`` ranks and is timed alone, as ``hpcgnn train --sync-comm`` times a collective
    apart from its wait for late ranks (skew, which depends on the computation between
    collectives and is no part of a communication model). Each of
    :data:`COLLECTIVE_BYTES` is timed in ``ROUNDS_PER_REPEAT * repeats`` rounds after a
    warm-up (the mean over rounds and ranks, as training sums every call of an epoch and
    reports the mean over ranks: a broadcast that lost its core counts) and returned in
    the cost model's accounting (:mod:`hpcgnn.cost.block_row`): ``(messages, bytes,
    seconds)`` with ``q`` messages and ``(q - 1) m`` bytes received by a rank.
    """
    p = comm.size
    q = p if group is None else group
    if q < 1 or p % q:
        raise ValueError(f"group size {q} does not divide the {p} ranks")
    sub = comm if q == p else Comm(comm.mpi.Split(comm.rank // q, comm.rank),
                                   name=f"group{q}", owned=True, device=comm.device)
    out = []
    try:
        for m in COLLECTIVE_BYTES:
            rows = max(m // (4 * STAGE_WIDTH), 1)
            block = _stage_block(sub, rows, q)
            src = comm.device.zeros((rows, STAGE_WIDTH), torch.float32)
            acc = comm.device.zeros((rows, STAGE_WIDTH), torch.float32)
            rounds = []
            for _ in range(ROUNDS_PER_REPEAT * repeats + 1):  # the first warms the path up
                spent = 0.0
                for root in range(q):
                    buf = src if sub.rank == root else comm.device.empty_like(src)
                    spent += _synced(comm, partial(sub.bcast, buf, root, CATEGORY))
                    acc += block @ buf  # the stage's local SpMM
                rounds.append(comm.allreduce_scalar(spent, category=CATEGORY) / p)
            comm.device.synchronize()
            out.append((q, float((q - 1) * rows * STAGE_WIDTH * 4), statistics.mean(rounds[1:])))
    finally:
        if sub is not comm:
            sub.free()
    return out


#: Broadcast rounds of :func:`busy_collectives` per ``repeats``: a mean of rounds whose
#: ranks share cores needs more of them than a ping-pong's median.
ROUNDS_PER_REPEAT = 8
#: Columns of the broadcast blocks of :func:`busy_collectives` (a hidden layer's width).
STAGE_WIDTH = 16
#: Nonzeros per row of the adjacency whose stages :func:`busy_collectives` runs: the
#: generated default graph's average degree.
STAGE_DEGREE = 16


def _stage_block(comm: Comm, rows: int, p: int) -> torch.Tensor:
    """A ``rows x rows`` sparse block with ``STAGE_DEGREE / p`` random nonzeros per row.

    The block of a 1D SpMM stage: ``P`` column blocks share a row's ``STAGE_DEGREE``
    neighbours. Fixed seed, so every run multiplies the same block.
    """
    nnz = max(rows * STAGE_DEGREE // p, 1)
    rng = np.random.default_rng(comm.rank)
    a = sp.coo_matrix((np.ones(nnz, np.float32), (rng.integers(0, rows, nnz),
                       rng.integers(0, rows, nnz))), shape=(rows, rows))
    return to_torch_csr(a, torch.float32, comm.device.torch_device)


def _all_to_all(comm: Comm, row_bytes: int, rows_per_peer: int, repeats: int) -> float:
    """Median seconds (slowest rank) of an exchange-like all-to-all (see the module doc).

    ``rows_per_peer`` rows of ``row_bytes`` (float32) go to every other rank, packed first
    from scattered rows of a source buffer twice their number.
    """
    counts = np.full(comm.size, rows_per_peer, dtype=np.int64)
    counts[comm.rank] = 0
    n = int(counts.sum())
    dev = comm.device
    src = dev.zeros((2 * n, row_bytes // 4), torch.float32)
    idx = dev.from_numpy(np.random.default_rng(comm.rank).permutation(2 * n)[:n])

    def exchange() -> None:  # packing included, as a stage packs
        comm.alltoallv(src[idx].contiguous(), counts, CATEGORY, recvcounts=counts)
        dev.synchronize()

    times = [comm.allreduce_scalar(_synced(comm, exchange), MPI.MAX, CATEGORY)
             for _ in range(repeats + 1)]  # the first one warms the path up
    return statistics.median(times[1:])
