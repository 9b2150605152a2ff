"""Vertex partitioning methods and partition quality.

Every method returns ``part``, an ``int64`` array with ``part[v]`` in ``[0, num_parts)`` for
each vertex ``v`` of the current numbering:

* ``block``: contiguous, equal ranges of the current order (sizes differ by at most 1);
* ``random``: a seeded random assignment with the same balanced sizes as ``block``;
* ``metis``: METIS k-way (or recursive bisection for up to 8 parts) through ``pymetis`` on
  the symmetrised graph ``A + A^T`` without self loops or duplicate edges, balancing the
  parts' vertices or (``balance="edges"``) their edges (:data:`BALANCES`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import ConfigError
from hpcgnn.io.validate import PartitionSummary

METHODS = ("block", "random", "metis")
#: What METIS balances over the parts: ``vertices`` (each vertex weighs 1), or ``edges``
#: (each vertex weighs ``1 +`` its degree in ``A + A^T``: a part's rows and nonzeros of
#: ``Â``, what its SpMM, halo and memory grow with). On a power-law graph (RMAT) a vertex
#: balance may leave almost every edge in one part (4M vertices, 2 parts: 2.0x the mean).
BALANCES = ("vertices", "edges")

#: Rows of ``A`` handled at once when counting cut edges.
_CUT_ROWS = 1 << 20


def check_num_parts(num_parts: int, num_nodes: int) -> None:
    """Raise :class:`~hpcgnn.errors.ConfigError` unless ``1 <= num_parts <= num_nodes``."""
    if num_parts < 1:
        raise ConfigError(f"--parts must be at least 1, got {num_parts}")
    if num_parts > num_nodes:
        raise ConfigError(
            f"--parts {num_parts} is more than the number of vertices ({num_nodes})"
        )


def block_partition(num_nodes: int, num_parts: int) -> np.ndarray:
    """Split ``0 .. num_nodes - 1`` into ``num_parts`` contiguous ranges of near-equal size."""
    check_num_parts(num_parts, num_nodes)
    return np.arange(num_nodes, dtype=np.int64) * num_parts // num_nodes


def random_partition(num_nodes: int, num_parts: int, seed: int) -> np.ndarray:
    """Assign vertices to parts at random, with part sizes differing by at most 1."""
    parts = block_partition(num_nodes, num_parts)
    return np.random.default_rng(seed).permutation(parts)


def symmetrised(adjacency: sp.csr_matrix) -> sp.csr_matrix:
    """Return the pattern of ``A + A^T`` without self loops and duplicate entries.

    The result is a canonical CSR matrix (sorted, unique column indices) with ``int8``
    ones as values.
    """
    n = adjacency.shape[0]
    a = adjacency.tocoo()
    keep = a.row != a.col
    rows = np.concatenate([a.row[keep], a.col[keep]])
    cols = np.concatenate([a.col[keep], a.row[keep]])
    del a, keep
    s = sp.csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n, n))
    s.sum_duplicates()
    s.data[:] = 1
    return s


def metis_partition(
    adjacency: sp.csr_matrix, num_parts: int, seed: int,
    target_weights: list[float] | None = None, balance: str = "vertices",
) -> np.ndarray:
    """Partition with METIS (through ``pymetis``) minimising the cut of ``A + A^T``.

    Parameters
    ----------
    adjacency
        Square CSR matrix of ``A`` (directed or symmetric).
    num_parts
        Number of parts ``K``.
    seed
        METIS random seed, for reproducible partitions.
    target_weights
        Share of the vertices (or edges) each part should get (METIS's ``tpwgts``,
        summing to 1); ``None``: equal parts.
    balance
        What the parts share equally: ``"vertices"`` or ``"edges"`` (:data:`BALANCES`).

    """
    import pymetis

    n = adjacency.shape[0]
    check_num_parts(num_parts, n)
    check_balance(balance, "metis")
    if num_parts == 1:
        return np.zeros(n, dtype=np.int64)
    s = symmetrised(adjacency)
    idx = pymetis.zero_copy_dtype()
    xadj = s.indptr.astype(idx, copy=False)
    adjncy = s.indices.astype(idx, copy=False)
    weights = None if balance == "vertices" else (np.diff(s.indptr) + 1).astype(idx)
    options = pymetis.Options(seed=int(seed))
    if hasattr(pymetis, "CSRAdjacency"):
        graph = pymetis.CSRAdjacency(adj_starts=xadj, adjacent=adjncy)
        result = pymetis.part_graph(num_parts, graph, vweights=weights, tpwgts=target_weights,
                                    options=options)
    else:  # pymetis < 2025.2
        result = pymetis.part_graph(num_parts, xadj=xadj, adjncy=adjncy, vweights=weights,
                                    tpwgts=target_weights, options=options)
    return np.asarray(result[1], dtype=np.int64)


def check_balance(balance: str, method: str) -> None:
    """Refuse a ``balance`` that is not one of :data:`BALANCES`, or that ``method`` lacks.

    ``block`` and ``random`` split the vertices evenly and nothing else.
    """
    if balance not in BALANCES:
        raise ConfigError(f"unknown balance {balance!r}; choose one of {', '.join(BALANCES)}")
    if balance != "vertices" and method != "metis":
        raise ConfigError(f"--balance {balance} needs --method metis ({method} balances "
                          "vertices)")


def compute_partition(
    method: str, adjacency: sp.csr_matrix, num_parts: int, seed: int = 0,
    balance: str = "vertices",
) -> np.ndarray:
    """Return ``part[v]`` for every vertex by ``method`` (one of :data:`METHODS`).

    ``balance``: what the parts share equally (:data:`BALANCES`; ``metis`` only).
    """
    n = adjacency.shape[0]
    check_num_parts(num_parts, n)
    if method in METHODS:
        check_balance(balance, method)
    if method == "block":
        return block_partition(n, num_parts)
    if method == "random":
        return random_partition(n, num_parts, seed)
    if method == "metis":
        return metis_partition(adjacency, num_parts, seed, balance=balance)
    raise ConfigError(f"unknown partition method {method!r}; choose one of {', '.join(METHODS)}")


def edge_cut(adjacency: sp.csr_matrix, parts: np.ndarray, directed: bool) -> int:
    """Count edges whose endpoints lie in different parts.

    For a directed graph every entry ``i -> j`` of ``A`` counts; for an undirected graph
    (``A`` symmetric, both directions stored) each undirected edge counts once.
    """
    n = adjacency.shape[0]
    cut = 0
    for lo in range(0, n, _CUT_ROWS):
        hi = min(n, lo + _CUT_ROWS)
        ptr = adjacency.indptr[lo : hi + 1]
        cols = adjacency.indices[ptr[0] : ptr[-1]]
        row_parts = np.repeat(parts[lo:hi], np.diff(ptr))
        cut += int(np.count_nonzero(row_parts != parts[cols]))
    return cut if directed else cut // 2


def summarise(
    adjacency: sp.csr_matrix, parts: np.ndarray, num_parts: int, method: str, directed: bool
) -> PartitionSummary:
    """Sizes, edges per part (entries of ``A`` in its rows) and edge cut of a partition."""
    sizes = np.bincount(parts, minlength=num_parts)
    edges = np.bincount(parts, weights=np.diff(adjacency.indptr), minlength=num_parts)
    return PartitionSummary(
        method=method,
        sizes=tuple(int(x) for x in sizes),
        edges=tuple(int(x) for x in edges),
        edge_cut=edge_cut(adjacency, parts, directed),
    )
