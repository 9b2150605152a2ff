"""Vertex partitioning (block, random, METIS, hierarchical METIS) and relabelling."""

from hpcgnn.partition.hierarchy import Hierarchy, LevelCuts, hierarchical_partition, level_cuts
from hpcgnn.partition.methods import (
    METHODS,
    block_partition,
    compute_partition,
    edge_cut,
    metis_partition,
    random_partition,
    summarise,
    symmetrised,
)
from hpcgnn.partition.relabel import (
    inverse_permutation,
    permute_csr,
    permute_features,
    relabelling,
    write_relabelled,
)

__all__ = [
    "METHODS",
    "Hierarchy",
    "LevelCuts",
    "block_partition",
    "compute_partition",
    "edge_cut",
    "hierarchical_partition",
    "inverse_permutation",
    "level_cuts",
    "metis_partition",
    "permute_csr",
    "permute_features",
    "random_partition",
    "relabelling",
    "summarise",
    "symmetrised",
    "write_relabelled",
]
