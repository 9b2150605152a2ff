"""Hierarchical METIS partitioning for slow links (DGCL's hierarchical graph partitioning).

DGCL (section 4) partitions "hierarchically to prioritize communication reduction on slow
links": the graph is first cut into one part per machine (node), so that METIS minimises
the edges crossing the slow inter-node links, and then each node's induced subgraph is cut
into one part per rank of that node. Part ids are the ranks of the topology: the ranks of
node ``i`` (``node_of[r] == i``, as a topology file or ``NODESxRANKS`` lays them out) own
the sub-parts of node part ``i``, so rank ``r`` of a run trains on part ``r``.

:func:`level_cuts` splits a partition's edge cut into the edges crossing nodes and those
crossing ranks of one node, for any partition (hierarchical or flat).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import ConfigError
from hpcgnn.partition.methods import check_num_parts, edge_cut, metis_partition


@dataclass(frozen=True)
class Hierarchy:
    """Nodes and the part ids (ranks) of each.

    Attributes
    ----------
    node_of : tuple of int
        Node index of every part (rank) ``0 .. num_parts - 1``.
    label : str
        How the hierarchy was given, for the output (``2x4``, a topology's name).

    """

    node_of: tuple[int, ...]
    label: str

    @property
    def num_parts(self) -> int:
        """Number of parts (ranks)."""
        return len(self.node_of)

    @property
    def num_nodes(self) -> int:
        """Number of nodes."""
        return max(self.node_of) + 1

    def ranks_of(self, node: int) -> np.ndarray:
        """Part ids (ranks) of ``node``, ascending."""
        return np.flatnonzero(np.asarray(self.node_of) == node).astype(np.int64)

    @classmethod
    def of_shape(cls, spec: str) -> Hierarchy:
        """Parse ``NODESxRANKS``: ``NODES`` nodes of ``RANKS`` consecutive ranks each."""
        nodes, x, ranks = spec.partition("x")
        if not (x and nodes.isdigit() and ranks.isdigit()) or min(int(nodes), int(ranks)) < 1:
            raise ConfigError(f"--hierarchy {spec!r} is not NODESxRANKS (e.g. 2x4)")
        per = int(ranks)
        return cls(tuple(r // per for r in range(int(nodes) * per)), f"{int(nodes)}x{per}")

    @classmethod
    def of_topology(cls, node_of: Sequence[int], name: str) -> Hierarchy:
        """The nodes of a topology (``Topology.node_of``; nodes without ranks dropped)."""
        used = sorted(set(node_of))
        index = {node: i for i, node in enumerate(used)}
        return cls(tuple(index[n] for n in node_of), name)


def _metis_groups(
    adjacency: sp.csr_matrix, groups: list[np.ndarray], seed: int, balance: str
) -> np.ndarray:
    """METIS into one part per group, each part sized in proportion to its group."""
    sizes = np.array([len(g) for g in groups], dtype=np.float64)
    even = bool(np.all(sizes == sizes[0]))
    weights = None if even else [float(w) for w in sizes / sizes.sum()]
    return metis_partition(adjacency, len(groups), seed, target_weights=weights,
                           balance=balance)


def hierarchical_partition(
    adjacency: sp.csr_matrix, hierarchy: Hierarchy, seed: int = 0, balance: str = "vertices"
) -> np.ndarray:
    """Partition by METIS into nodes first, then each node's subgraph into its ranks.

    Parameters
    ----------
    adjacency
        Square CSR matrix of ``A`` (directed or symmetric).
    hierarchy
        Nodes and their ranks; ``hierarchy.num_parts`` parts in all.
    seed
        METIS random seed, used at both levels.
    balance
        What the parts of each level share equally (``methods.BALANCES``; a node's subgraph
        balances its own edges).

    Returns
    -------
    numpy.ndarray
        ``part[v]``, the rank of vertex ``v``; ``hierarchy.node_of[part[v]]`` is its node.

    Raises
    ------
    ConfigError
        More parts than vertices, or a node given fewer vertices than it has ranks.

    """
    n = adjacency.shape[0]
    check_num_parts(hierarchy.num_parts, n)
    ranks = [hierarchy.ranks_of(i) for i in range(hierarchy.num_nodes)]
    node = _metis_groups(adjacency, ranks, seed, balance)
    parts = np.empty(n, dtype=np.int64)
    for i, own in enumerate(ranks):
        members = np.flatnonzero(node == i)
        if len(members) < len(own):
            raise ConfigError(
                f"METIS gave node {i} {len(members)} vertices for its {len(own)} ranks; "
                "use fewer parts"
            )
        sub = adjacency[members][:, members].tocsr()
        parts[members] = own[metis_partition(sub, len(own), seed, balance=balance)]
    return parts


@dataclass(frozen=True)
class LevelCuts:
    """A partition's edge cut split by the links it crosses.

    Attributes
    ----------
    across_nodes : int
        Edges whose endpoints lie on different nodes.
    within_nodes : int
        Edges whose endpoints lie in different parts of one node.

    """

    across_nodes: int
    within_nodes: int

    @property
    def total(self) -> int:
        """The whole edge cut."""
        return self.across_nodes + self.within_nodes


def level_cuts(
    adjacency: sp.csr_matrix, parts: np.ndarray, hierarchy: Hierarchy, directed: bool
) -> LevelCuts:
    """Count the cut edges of ``parts`` across nodes and within nodes of ``hierarchy``.

    Edges are counted as by :func:`~hpcgnn.partition.methods.edge_cut` (directed: every
    entry of ``A``; undirected: each edge once).
    """
    nodes = np.asarray(hierarchy.node_of, dtype=np.int64)[parts]
    across = edge_cut(adjacency, nodes, directed)
    return LevelCuts(across, edge_cut(adjacency, parts, directed) - across)
