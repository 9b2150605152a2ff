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
