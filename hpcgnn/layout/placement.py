"""Which of a process grid's communicators stay inside a node (pure: no MPI).

``ProcessGrid`` builds its Cartesian communicator with ``reorder=False``, so rank ``r``
has the row-major coordinates of ``r`` in the grid's ``dims``, and a launcher that fills
nodes in rank order (``srun``/``jsrun``/``mpiexec`` block placement, ``ranks_per_node`` a
node) puts ranks ``k * ranks_per_node ..`` on node ``k``. A communicator along some
dimensions (an *axis*) is a set of groups: the ranks that differ only in those
coordinates. An axis is intra-node when every one of its groups lies in one node: then
its collectives run over the node's links (NVLink), not the network.

Axes by grid kind (``1d`` ``(P,)``, ``1.5d`` ``(P/c, c)``, ``2d`` ``(Pr, Pc)``, ``3d``
``(Pr, Pc, Pl)``): ``col`` varies the first dimension (a process column: the ranks
holding different block rows), ``row`` the second (1.5D's replicas, SUMMA's process row),
``fiber`` the third (3D's grid layers), ``world`` every dimension.

Injection contention (:func:`ring_streams`): every group of an axis runs its collective at
the same time (SPMD), each as a ring over its ranks in rank order (NCCL's pipelined ring,
CAGNET Sec. 6.1), which leaves every node it spans by one inter-node link. The node's
injection bandwidth is split into ``ports`` (a NIC each, or a socket's share of one), its
ranks attached to them in order; the streams that leave through one port share it.
"""

from __future__ import annotations

import math

import numpy as np

#: The grid dimensions each axis varies.
AXES: dict[str, tuple[int, ...]] = {"col": (0,), "row": (1,), "fiber": (2,)}


def axis_dims(axis: str, ndim: int) -> tuple[int, ...]:
    """The dimensions of a grid of ``ndim`` dimensions that ``axis`` varies."""
    if axis == "world":
        return tuple(range(ndim))
    dims = AXES.get(axis)
    if dims is None:
        raise ValueError(f"unknown axis {axis!r} (choose from world, {', '.join(AXES)})")
    return tuple(d for d in dims if d < ndim)


def axis_groups(dims: tuple[int, ...], axis: str) -> np.ndarray:
    """The groups of ``axis`` on a row-major grid ``dims``: one row each, ranks ascending."""
    varying = axis_dims(axis, len(dims))
    fixed = tuple(d for d in range(len(dims)) if d not in varying)
    ranks = np.arange(math.prod(dims)).reshape(dims).transpose(fixed + varying)
    return ranks.reshape(-1, math.prod(dims[d] for d in varying))


def spans_nodes(dims: tuple[int, ...], axis: str, ranks_per_node: int) -> bool:
    """Whether some group of ``axis`` on a row-major grid ``dims`` spans two nodes.

    ``ranks_per_node`` <= 0 means one node holds every rank.
    """
    if ranks_per_node <= 0 or math.prod(dims) <= ranks_per_node:
        return False
    node = axis_groups(dims, axis) // ranks_per_node  # ascending along each group
    return bool((node[:, 0] != node[:, -1]).any())


def ring_streams(
    dims: tuple[int, ...], axis: str, ranks_per_node: int, ports: int = 1
) -> int:
    """The most inter-node streams leaving one injection port when ``axis`` communicates.

    Every group of ``axis`` runs a ring over its ranks in rank order at the same time; a
    group that spans nodes leaves each node it touches once, from its last rank there (to
    the next node's first, the last node's wrapping round to the first). Local rank
    ``k`` of a node of ``ranks_per_node`` reaches port ``k * ports // ranks_per_node``.
    0 when every group lies in one node (``ranks_per_node`` <= 0: one node holds all).

    Examples
    --------
    Two nodes of 6 ranks, 2 ports (Summit's sockets): 1.5D ``12x1`` (one column ring)
    sends 1 stream through a port, ``6x2`` 2 (ranks 4 and 5 of each node, one socket),
    ``4x3`` 3; with a rank per node (``ranks_per_node = 1``) each of these sends 1.
    """
    if ranks_per_node <= 0 or math.prod(dims) <= ranks_per_node:
        return 0
    groups = axis_groups(dims, axis)
    node = groups // ranks_per_node
    leaves = np.ones(groups.shape, dtype=bool)  # the last rank of a group on its node
    leaves[:, :-1] = node[:, :-1] != node[:, 1:]
    leaves &= (node[:, 0] != node[:, -1])[:, None]  # groups inside a node send nothing out
    senders = groups[leaves]
    if senders.size == 0:
        return 0
    port = (senders % ranks_per_node) * ports // ranks_per_node
    return int(np.bincount(senders // ranks_per_node * ports + port).max())
