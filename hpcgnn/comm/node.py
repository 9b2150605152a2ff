"""The ranks that share this rank's node (``MPI.COMM_TYPE_SHARED``)."""

from __future__ import annotations

from mpi4py import MPI


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
