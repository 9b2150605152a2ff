"""The ranks that share this rank's node (``MPI.COMM_TYPE_SHARED``), and its cores."""

from __future__ import annotations

import os

import numpy as np
from mpi4py import MPI

from hpcgnn.comm.communicator import Comm


def node_rank(comm: MPI.Comm) -> tuple[int, int]:
    """``(rank among the ranks of this node, ranks on this node)`` within ``comm``.

    The node-local rank picks the GPU of a rank (:func:`hpcgnn.grid.device.choose_device`);
    the count shares a node's memory between its ranks (:func:`hpcgnn.comm.memory.check_memory`).
    Collective over ``comm``.
    """
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank(), node.Get_size()
    finally:
        node.Free()


def node_peers(comm: MPI.Comm) -> np.ndarray:
    """``same[r]``: whether rank ``r`` of ``comm`` shares this rank's node (shared memory).

    What decides the CPU path's per-pair method (:func:`hpcgnn.planning.methods.host_method`).
    Collective over ``comm``.
    """
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    groups = node.Get_group(), comm.Get_group()
    try:
        mine = MPI.Group.Translate_ranks(groups[0], list(range(node.Get_size())), groups[1])
    finally:
        for g in groups:
            g.Free()
        node.Free()
    same = np.zeros(comm.Get_size(), dtype=bool)
    same[mine] = True
    return same


def cpus() -> set[int]:
    """The CPUs this process may run on."""
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # no affinity API (macOS): every CPU
        return set(range(os.cpu_count() or 1))


def host_cores(comm: Comm, category: str = "control") -> tuple[list[str], dict[str, int]]:
    """Every rank's host name, and each host's cores: the union of its ranks' affinities.

    Where a host has fewer cores than ranks, they share cores (oversubscribed: what one
    rank times as communication includes waiting for a core). Collective over ``comm``.
    """
    hosts = comm.allgather_obj(MPI.Get_processor_name(), category)
    union: dict[str, set[int]] = {}
    for host, mine in zip(hosts, comm.allgather_obj(cpus(), category), strict=True):
        union.setdefault(host, set()).update(mine)
    return hosts, {h: len(c) for h, c in union.items()}
