"""Measure this machine's alpha and beta: ping-pong between every pair of ranks.

``hpcgnn plan --calibrate`` runs :func:`calibrate` under ``mpiexec -n P`` and writes the
result as a topology file (:func:`hpcgnn.planning.topology.measured_topology`), so the
planner and the cost models can use the latencies and bandwidths the job really sees
instead of nominal ones. Pairs are measured one at a time (the others wait), each with a
small and a large message; ``alpha`` is the one-way time of the small message and
``beta`` the extra time per byte of the large one. The stage latency is the time of an
empty all-to-all over every rank (the synchronisation a stage costs at least).

The endpoint terms come from every rank busy at once, as in a stage: an all-to-all in
which every rank sends one message to every other rank, small and then large. A rank sends
and receives ``2 (P - 1)`` messages, so the small one's time over the empty one's, divided
by that, is the time a rank spends per message (LogP's overhead ``o``), and the large one's
extra time per byte a rank moves is its endpoint rate. Cores shared by several ranks slow
every rank's messages; measured this way that is in the numbers.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from hpcgnn.comm.communicator import Comm

CATEGORY = "calibrate"


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
        ``(alpha_s, beta_s_per_byte)`` of a rank as an endpoint (time per message sent or
        received, time per byte moved), or ``None`` on one rank.
    """

    hosts: list[str]
    pairs: dict[tuple[int, int], tuple[float, float]]
    stage_alpha_s: float
    small_bytes: int
    large_bytes: int
    endpoint: tuple[float, float] | None = None


def _round_trip(comm: Comm, a: int, b: int, buf: np.ndarray, repeats: int) -> float:
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
        Round trips per pair and size (the median counts).
    """
    if not 0 < small_bytes < large_bytes:
        raise ValueError(f"need 0 < small_bytes < large_bytes, got {small_bytes}, {large_bytes}")
    small = np.zeros(small_bytes, dtype=np.uint8)
    large = np.zeros(large_bytes, dtype=np.uint8)
    mine: dict[tuple[int, int], tuple[float, float]] = {}
    for a in range(comm.size):
        for b in range(a + 1, comm.size):
            comm.barrier(CATEGORY)
            if comm.rank not in (a, b):
                continue
            t_small = _round_trip(comm, a, b, small, repeats) / 2
            t_large = _round_trip(comm, a, b, large, repeats) / 2
            if comm.rank == a:
                beta = max(t_large - t_small, 1e-12) / (large_bytes - small_bytes)
                mine[(a, b)] = (t_small, beta)
    stage = _all_to_all(comm, 0, repeats)
    endpoint = None
    if comm.size > 1:  # every rank sends and receives 2 (P - 1) messages
        per_peer = max(large_bytes // (comm.size - 1), small_bytes + 1)
        t_small = _all_to_all(comm, small_bytes, repeats)
        t_large = _all_to_all(comm, per_peer, repeats)
        messages = 2 * (comm.size - 1)
        endpoint = (
            max(t_small - stage, 0.0) / messages,
            max(t_large - t_small, 1e-12) / (messages * (per_peer - small_bytes)),
        )
    pairs: dict[tuple[int, int], tuple[float, float]] = {}
    for part in comm.allgather_obj(mine, CATEGORY):
        pairs.update(part)
    hosts = comm.allgather_obj(MPI.Get_processor_name(), CATEGORY)
    return Calibration(hosts, pairs, stage, small_bytes, large_bytes, endpoint)


def _all_to_all(comm: Comm, per_peer: int, repeats: int) -> float:
    """Median seconds (slowest rank) of an all-to-all of ``per_peer`` bytes to every peer."""
    counts = np.full(comm.size, per_peer, dtype=np.int64)
    counts[comm.rank] = 0
    buf = np.zeros(int(counts.sum()), dtype=np.uint8)
    times = []
    for _ in range(repeats + 1):  # the first one warms the path up
        comm.barrier(CATEGORY)
        t0 = MPI.Wtime()
        comm.alltoallv(buf, counts, CATEGORY, recvcounts=counts)
        times.append(comm.allreduce_scalar(MPI.Wtime() - t0, MPI.MAX, CATEGORY))
    return statistics.median(times[1:])
