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


def spans_nodes(dims: tuple[int, ...], axis: str, ranks_per_node: int) -> bool:
    """Whether some group of ``axis`` on a row-major grid ``dims`` spans two nodes.

    ``ranks_per_node`` <= 0 means one node holds every rank.
    """
    p = math.prod(dims)
    if ranks_per_node <= 0 or p <= ranks_per_node:
        return False
    varying = axis_dims(axis, len(dims))
    if not varying:
        return False
    coords = np.unravel_index(np.arange(p), dims)
    fixed = [d for d in range(len(dims)) if d not in varying]
    if fixed:
        key = np.ravel_multi_index(tuple(coords[d] for d in fixed), tuple(dims[d] for d in fixed))
    else:
        key = np.zeros(p, dtype=np.int64)
    node = np.arange(p) // ranks_per_node
    groups = int(key.max()) + 1
    low = np.full(groups, np.iinfo(np.int64).max)
    high = np.full(groups, -1)
    np.minimum.at(low, key, node)
    np.maximum.at(high, key, node)
    return bool((low != high).any())
