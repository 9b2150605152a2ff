"""Measure this machine's alpha and beta: ping-pong between every pair of ranks.

``hpcgnn plan --calibrate`` runs :func:`calibrate` under ``mpiexec -n P`` and writes the
result as a topology file (:func:`hpcgnn.planning.topology.measured_topology`), so the
planner and the cost models can use the latencies and bandwidths the job really sees
instead of nominal ones. Pairs are measured one at a time (the others wait), each with a
small and a large message; ``alpha`` is the one-way time of the small message and
``beta`` the extra time per byte of the large one. The stage latency is the time of an
empty all-to-all over every rank (the synchronisation a stage costs at least).
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
    """

    hosts: list[str]
    pairs: dict[tuple[int, int], tuple[float, float]]
    stage_alpha_s: float
    small_bytes: int
    large_bytes: int


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
    stage = []
    empty = np.zeros(0, dtype=np.uint8)
    counts = np.zeros(comm.size, dtype=np.int64)
    for _ in range(repeats + 1):
        comm.barrier(CATEGORY)
        t0 = MPI.Wtime()
        comm.alltoallv(empty, counts, CATEGORY, recvcounts=counts)
        stage.append(comm.allreduce_scalar(MPI.Wtime() - t0, MPI.MAX, CATEGORY))
    pairs: dict[tuple[int, int], tuple[float, float]] = {}
    for part in comm.allgather_obj(mine, CATEGORY):
        pairs.update(part)
    hosts = comm.allgather_obj(MPI.Get_processor_name(), CATEGORY)
    return Calibration(hosts, pairs, statistics.median(stage[1:]), small_bytes, large_bytes)
