"""Collective memory checks before large allocations."""

from __future__ import annotations

from hpcgnn.comm.collective import check
from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.node import node_rank
from hpcgnn.errors import ConfigError
from hpcgnn.utils.memory import GIB, address_space_left, available_bytes


def check_memory(comm: Comm, need_bytes: float, what: str) -> None:
    """Fail on every rank if any node lacks ``need_bytes`` per rank for ``what``.

    The node's available memory is shared by the ranks placed on it.
    """
    _, ranks_here = node_rank(comm.mpi)
    avail = available_bytes()
    ok = avail is None or need_bytes * ranks_here <= avail
    per_rank = (avail or 0) / ranks_here
    check(
        comm, ok,
        f"not enough memory for {what}: about {need_bytes / GIB:.2f} GiB per rank needed, "
        f"{per_rank / GIB:.2f} GiB available per rank ({ranks_here} ranks on a node); "
        f"use more nodes or ranks, or a smaller model",
        ConfigError,
    )
    left = address_space_left()
    check(
        comm, left is None or need_bytes <= left,
        f"not enough memory for {what}: about {need_bytes / GIB:.2f} GiB per rank needed, "
        f"{(left or 0) / GIB:.2f} GiB more may be mapped under this process's address-space "
        "limit (ulimit -v); raise the limit, or use more ranks or a smaller model",
        ConfigError,
    )
