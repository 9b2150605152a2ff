"""Partitioning methods: ranges, balance, reproducibility, METIS quality, edge cut rules."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.errors import ConfigError
from hpcgnn.partition import (
    METHODS,
    block_partition,
    compute_partition,
    edge_cut,
    random_partition,
    summarise,
    symmetrised,
)
from tests.graphs import random_graph_arrays
from tests.io.test_validate import expected_adjacency


def sbm_adjacency(n: int = 240, classes: int = 4, directed: bool = False) -> sp.csr_matrix:
    """A graph with strong class structure (70% of edges stay inside a class)."""
    return expected_adjacency(
        random_graph_arrays(n=n, avg_degree=8, classes=classes, directed=directed, seed=7)
    )


@pytest.mark.parametrize("n,k", [(10, 3), (60, 4), (7, 7), (5, 1)])
def test_block_is_contiguous_and_balanced(n: int, k: int) -> None:
    parts = block_partition(n, k)
    assert (np.diff(parts) >= 0).all()
    sizes = np.bincount(parts, minlength=k)
    assert len(sizes) == k
    assert sizes.max() - sizes.min() <= 1


def test_random_is_balanced_and_seeded() -> None:
    parts = random_partition(100, 6, seed=1)
    sizes = np.bincount(parts, minlength=6)
    assert sizes.max() - sizes.min() <= 1
    np.testing.assert_array_equal(parts, random_partition(100, 6, seed=1))
    assert (parts != random_partition(100, 6, seed=2)).any()
    assert (np.diff(parts) < 0).any()  # not just the block order


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("directed", [False, True])
def test_every_method_gives_valid_parts(method: str, directed: bool) -> None:
    a = sbm_adjacency(n=90, directed=directed)
    parts = compute_partition(method, a, 5, seed=0)
    assert parts.shape == (90,)
    assert parts.dtype == np.int64
    assert parts.min() >= 0 and parts.max() < 5


@pytest.mark.parametrize("method", METHODS)
def test_one_part_puts_everything_in_part_0(method: str) -> None:
    parts = compute_partition(method, sbm_adjacency(n=30), 1, seed=0)
    assert (parts == 0).all()


@pytest.mark.parametrize("k", [0, -1, 31])
def test_bad_number_of_parts(k: int) -> None:
    with pytest.raises(ConfigError, match="--parts"):
        compute_partition("block", sbm_adjacency(n=30), k)


def test_unknown_method() -> None:
    with pytest.raises(ConfigError, match="unknown partition method"):
        compute_partition("spectral", sbm_adjacency(n=30), 2)


def test_metis_cuts_less_than_random_on_a_clustered_graph() -> None:
    a = sbm_adjacency()
    metis = edge_cut(a, compute_partition("metis", a, 4, seed=0), directed=False)
    random = edge_cut(a, compute_partition("random", a, 4, seed=0), directed=False)
    assert metis < 0.7 * random


def test_metis_is_reproducible_with_a_seed() -> None:
    a = sbm_adjacency(n=120)
    np.testing.assert_array_equal(compute_partition("metis", a, 3, seed=4),
                                  compute_partition("metis", a, 3, seed=4))


def test_symmetrised_drops_loops_and_duplicates() -> None:
    a = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=np.float32))
    s = symmetrised(a)
    np.testing.assert_array_equal(s.toarray(), [[0, 1, 1], [1, 0, 1], [1, 1, 0]])
    assert s.has_canonical_format


def test_edge_cut_conventions() -> None:
    # path 0 - 1 - 2 - 3 stored in both directions; parts {0, 1} and {2, 3}
    und = sp.csr_matrix(np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]]))
    parts = np.array([0, 0, 1, 1])
    assert edge_cut(und, parts, directed=False) == 1
    # directed 0 -> 2, 3 -> 1, 0 -> 1: two arcs cross
    dirg = sp.csr_matrix(np.array([[0, 1, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0]]))
    assert edge_cut(dirg, parts, directed=True) == 2


def test_summary_sizes_edges_and_balance() -> None:
    und = sp.csr_matrix(np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]]))
    s = summarise(und, np.array([0, 0, 0, 1]), 2, "block", directed=False)
    assert s.sizes == (3, 1)
    assert s.edges == (5, 1)
    assert s.edge_cut == 1
    assert s.vertex_balance == pytest.approx(1.5)
    assert s.edge_balance == pytest.approx(5 / 3)


def skewed_adjacency(n: int = 600, seed: int = 0) -> sp.csr_matrix:
    """A power-law-like graph: hubs joined to many vertices, a third of the vertices alone."""
    rng = np.random.default_rng(seed)
    src = (rng.pareto(1.0, 3 * n) * 4).astype(np.int64) % (2 * n // 3)
    dst = rng.integers(0, 2 * n // 3, 3 * n)
    a = sp.csr_matrix((np.ones(len(src), np.float32), (src, dst)), shape=(n, n))
    return symmetrised(a).astype(np.float32)


def part_edges(a: sp.csr_matrix, parts: np.ndarray, k: int) -> np.ndarray:
    """Each part's weight under the edge balance: its vertices plus their degrees."""
    return np.bincount(parts, weights=np.diff(a.indptr) + 1.0, minlength=k)


@pytest.mark.parametrize("k", [2, 4])
def test_metis_balances_edges_where_asked(k: int) -> None:
    a = skewed_adjacency()
    by_vertices = compute_partition("metis", a, k, seed=0)
    by_edges = compute_partition("metis", a, k, seed=0, balance="edges")
    share = part_edges(a, by_edges, k)
    assert share.max() / share.mean() <= 1.1, share
    old = part_edges(a, by_vertices, k)
    assert share.max() / share.mean() < old.max() / old.mean(), (share, old)
    np.testing.assert_array_equal(by_vertices, compute_partition("metis", a, k, seed=0,
                                                                 balance="vertices"))


def test_the_hierarchy_balances_edges_at_both_levels() -> None:
    from hpcgnn.partition.hierarchy import Hierarchy, hierarchical_partition

    a = skewed_adjacency(n=900)
    parts = hierarchical_partition(a, Hierarchy.of_shape("2x2"), 0, balance="edges")
    share = part_edges(a, parts, 4)
    assert share.max() / share.mean() <= 1.15, share


@pytest.mark.parametrize(("method", "balance", "words"), [
    ("random", "edges", "needs --method metis"), ("block", "edges", "needs --method metis"),
    ("metis", "bytes", "unknown balance")])
def test_a_balance_the_method_lacks_is_refused(method: str, balance: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        compute_partition(method, sbm_adjacency(n=30), 2, balance=balance)
