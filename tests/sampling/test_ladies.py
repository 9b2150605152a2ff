import numpy as np
import pytest
from scipy.stats import chisquare

from hpcgnn.sampling.bulk import sample_stack
from hpcgnn.sampling.spec import SamplerSpec
from tests.sampling import random_adjacency, same_batches, store_of


def ladies(sizes, bulk=4, seed=0):
    return SamplerSpec("ladies", tuple(sizes), batch_size=8, bulk=bulk, seed=seed)


def column_norm_distribution(a, rows):
    """LADIES' p over all vertices: squared column norms of S[rows], S = rownorm(A^T + I)."""
    s = np.minimum(a.T.toarray() + np.eye(a.shape[0]), 1.0)
    s = s / s.sum(axis=1, keepdims=True)
    q = (s[rows] ** 2).sum(axis=0)
    return q / q.sum()


def test_single_draw_frequency_matches_column_norms():
    a = random_adjacency(40, 3.0, seed=1, directed=True)
    store = store_of(a, "ladies")
    seeds = np.array([3, 7, 11])
    p = column_norm_distribution(a, seeds)
    trials = 4000
    batches = sample_stack(ladies((1,)), 0, list(range(trials)), [seeds] * trials, lambda _: store)
    counts = np.zeros(40)
    for b in batches:
        new = np.setdiff1d(b.hops[0].cols, seeds)  # the drawn vertex, unless it was a seed
        counts[new] += 1
    support = np.setdiff1d(np.flatnonzero(p > 0), seeds)
    assert counts[np.setdiff1d(np.arange(40), support)].sum() == 0
    expected = counts.sum() * p[support] / p[support].sum()  # conditional on a non-seed draw
    assert chisquare(counts[support], expected).pvalue > 0.01


def test_several_draws_follow_successive_sampling():
    a = random_adjacency(40, 3.0, seed=2)
    store = store_of(a, "ladies")
    seeds = np.array([0, 5])
    p = column_norm_distribution(a, seeds)
    trials, s = 3000, 3
    batches = sample_stack(ladies((s,)), 1, list(range(trials)), [seeds] * trials, lambda _: store)
    counts = np.zeros(40)
    for b in batches:
        counts[np.setdiff1d(b.hops[0].cols, seeds)] += 1
    rng = np.random.default_rng(0)
    ref = np.zeros(40)
    for _ in range(trials):
        ref[np.setdiff1d(rng.choice(40, s, replace=False, p=p), seeds)] += 1
    sigma = np.sqrt(trials * 0.25 * 2)
    assert np.all(np.abs(counts - ref) < 4.5 * sigma)


@pytest.mark.parametrize("directed", [False, True])
def test_every_edge_exists_and_rows_are_normalised(directed):
    a = random_adjacency(200, 4.0, seed=3, directed=directed)
    store = store_of(a, "ladies")
    rng = np.random.default_rng(4)
    seeds = [rng.choice(200, 12, replace=False) for _ in range(5)]
    batches = sample_stack(ladies((30, 20)), 0, list(range(5)), seeds, lambda _: store)
    for b, sd in zip(batches, seeds, strict=True):
        assert np.array_equal(b.hops[0].rows, sd)
        for h0, h1 in zip(b.hops[:-1], b.hops[1:], strict=True):
            assert np.array_equal(h1.rows, h0.cols)
        for h, size in zip(b.hops, (30, 20), strict=True):
            assert np.all(np.isin(sd, h.cols))  # LADIES keeps the output vertices
            assert len(np.setdiff1d(h.cols, sd)) <= size
            dst, src = h.global_edges()
            loop = dst == src
            assert np.all(a[src[~loop], dst[~loop]].A1 == 1)  # real edges of A (or self loops of I)
            full = a.T.tocsr()[h.rows][:, h.cols].toarray() + (h.rows[:, None] == h.cols[None, :])
            assert np.array_equal(h.matrix().toarray() > 0, full > 0)  # every edge between the sets
            nonempty = np.diff(h.indptr) > 0
            assert np.allclose(h.matrix().sum(axis=1).A1[nonempty], 1.0)


def test_bulk_of_one_and_of_four_give_identical_samples():
    a = random_adjacency(150, 5.0, seed=5)
    store = store_of(a, "ladies")
    rng = np.random.default_rng(6)
    seeds = [rng.choice(150, 6, replace=False) for _ in range(8)]
    spec = ladies((10, 10), seed=3)
    together = sample_stack(spec, 0, list(range(8)), seeds, lambda _: store)
    one_by_one = [
        b for i in range(8) for b in sample_stack(spec, 0, [i], [seeds[i]], lambda _: store)
    ]
    assert same_batches(together, one_by_one)
