"""How each pair of ranks moves its rows: DGCL's automatic communication method selection.

DGCL (section 6.2) picks a method per pair of GPUs from how they are connected:

``"ipc"``
    GPUs under one CPU socket (one topology *node*): the peer's device memory directly
    (CUDA virtual memory / IPC). hpcgnn runs it as device buffers handed to a CUDA-aware
    MPI, which moves them peer to peer within a host (or staged where MPI is not
    CUDA-aware: :mod:`hpcgnn.comm.wire`).
``"host-staged"``
    GPUs under different sockets of one machine (nodes of one *host*): through pinned
    host memory, which DGCL found faster there than peer access across the QPI. The wire
    stages such a pair's device buffers through pinned host buffers even where MPI is
    CUDA-aware.
``"nic"``
    GPUs of different machines (hosts): through the network card, GPU RDMA where it can;
    device buffers to a CUDA-aware MPI, else staged.

A link of the topology file may name its pair's method (``"method"``); otherwise it comes
from the ranks' nodes and hosts (:func:`pair_method`). On the CPU path (host buffers) the
bytes go as they always do, by shared memory between ranks of one shared-memory node and
by the network otherwise (:data:`HOST_METHODS`, :func:`host_method`); the plan's method
is recorded all the same, and the communicator counts each category's bytes per method
(:attr:`hpcgnn.comm.stats.CommStats.methods`), which :func:`method_vertices` models.
Pure: no torch, no MPI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpcgnn.planning.plan import TableKey
    from hpcgnn.planning.topology import Topology

#: The per-pair methods of a plan (DGCL section 6.2), fastest connection first.
PAIR_METHODS = ("ipc", "host-staged", "nic")
#: How host buffers travel between two ranks: one shared-memory node, or not.
HOST_METHODS = ("shared-memory", "network")


def pair_method(topo: Topology, a: int, b: int) -> str:
    """The method by which rank ``a`` sends to rank ``b`` (see the module doc).

    The direct link's ``method`` when the file names one; else ``ipc`` inside a node,
    ``host-staged`` between nodes of one host, ``nic`` between hosts.
    """
    li = topo.link_id(a, b)
    if li is not None and topo.links[li].method is not None:
        return str(topo.links[li].method)
    na, nb = topo.node_of[a], topo.node_of[b]
    if na == nb:
        return "ipc"
    hosts = topo.node_hosts or topo.node_names
    return "host-staged" if hosts[na] == hosts[nb] else "nic"


def peer_methods(topo: Topology, rank: int) -> list[str]:
    """:func:`pair_method` from ``rank`` to every rank (its own entry ``ipc``), by peer."""
    return [pair_method(topo, rank, b) if b != rank else "ipc" for b in range(topo.num_ranks)]


def host_method(same_node: bool) -> str:
    """How host buffers travel to a peer: ``shared-memory`` on one node, else ``network``."""
    return HOST_METHODS[0] if same_node else HOST_METHODS[1]


def method_vertices(topo: Topology, counts: dict[TableKey, int]) -> dict[str, int]:
    """Vertices each method carries in a plan's ``(stage, src, dst) -> count`` tables.

    Times the row size, summed over the receivers, this is what the communicators count
    per method for one exchange (:attr:`hpcgnn.comm.stats.CommStats.methods`).
    """
    out = dict.fromkeys(PAIR_METHODS, 0)
    for (_, s, d), c in counts.items():
        out[pair_method(topo, s, d)] += int(c)
    return {m: c for m, c in out.items() if c}
