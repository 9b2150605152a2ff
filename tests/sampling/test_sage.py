import numpy as np
import pytest
from scipy.stats import chisquare

from hpcgnn.sampling.bulk import sample_stack
from hpcgnn.sampling.spec import SamplerSpec
from tests.sampling import random_adjacency, same_batches, store_of


def sage(sizes, bulk=4, seed=0):
    return SamplerSpec("sage", tuple(sizes), batch_size=8, bulk=bulk, seed=seed)


def seeds_of(n, count, size, seed):
    rng = np.random.default_rng(seed)
    return [rng.choice(n, size, replace=False) for _ in range(count)]


@pytest.mark.parametrize("directed", [False, True])
def test_rows_have_min_fanout_degree_distinct_real_in_neighbours(directed):
    a = random_adjacency(300, 4.0, seed=1, directed=directed)
    store = store_of(a, "sage")
    a_t = a.T.tocsr()
    in_deg = np.diff(a_t.indptr)
    seeds = seeds_of(300, 5, 20, 2)
    batches = sample_stack(sage((6, 3)), 0, list(range(5)), seeds, lambda _: store)
    for b in batches:
        assert np.array_equal(b.hops[0].rows, b.seeds)
        for h, fanout in zip(b.hops, (6, 3), strict=True):
            assert np.array_equal(np.diff(h.indptr), np.minimum(fanout, in_deg[h.rows]))
            for r in range(len(h.rows)):
                nbrs = h.indices[h.indptr[r] : h.indptr[r + 1]]
                assert len(set(nbrs.tolist())) == len(nbrs)  # distinct
            dst, src = h.global_edges()
            assert np.all(a[src, dst].A1 == 1)  # src -> dst is an edge: src is an in-neighbour
            assert np.allclose(h.matrix().sum(axis=1).A1[np.diff(h.indptr) > 0], 1.0)
            # the next hop's vertices: this hop's rows first, then the new ones (sorted)
            assert np.array_equal(h.cols[: len(h.rows)], h.rows)
            assert np.all(np.diff(h.cols[len(h.rows):]) > 0)
        for h0, h1 in zip(b.hops[:-1], b.hops[1:], strict=True):
            assert np.array_equal(h1.rows, h0.cols)


def test_inclusion_frequency_is_fanout_over_degree():
    a = random_adjacency(60, 3.0, seed=3)
    store = store_of(a, "sage")
    deg = np.diff(a.indptr)
    v = int(np.flatnonzero(deg >= 8)[0])
    nbrs = a.indices[a.indptr[v] : a.indptr[v + 1]]
    fanout, trials = 3, 3000
    batches = sample_stack(sage((fanout,)), 7, list(range(trials)), [np.array([v])] * trials,
                           lambda _: store)
    picked = np.concatenate([b.hops[0].global_edges()[1] for b in batches])
    counts = np.array([(picked == u).sum() for u in nbrs])
    assert counts.sum() == trials * fanout
    expected = np.full(len(nbrs), trials * fanout / len(nbrs))
    assert chisquare(counts, expected).pvalue > 0.01


def test_bulk_of_one_and_of_four_give_identical_samples():
    a = random_adjacency(200, 5.0, seed=4)
    store = store_of(a, "sage")
    seeds = seeds_of(200, 8, 10, 5)
    spec = sage((4, 4), bulk=4, seed=11)
    together = sample_stack(spec, 2, list(range(8)), seeds, lambda _: store)
    def rows(_ids):
        return store

    one_by_one = [b for i in range(8) for b in sample_stack(spec, 2, [i], [seeds[i]], rows)]
    fours = [
        b for i in (0, 4)
        for b in sample_stack(spec, 2, list(range(i, i + 4)), seeds[i : i + 4], rows)
    ]
    assert same_batches(together, one_by_one) and same_batches(together, fours)
    other_epoch = sample_stack(spec, 3, list(range(8)), seeds, lambda _: store)
    assert not same_batches(together, other_epoch)


def test_isolated_vertices_get_empty_rows():
    a = random_adjacency(50, 0.3, seed=6)
    store = store_of(a, "sage")
    seeds = [np.arange(50)]
    (b,) = sample_stack(sage((2, 2)), 0, [0], seeds, lambda _: store)
    in_deg = np.diff(a.T.tocsr().indptr)
    assert np.array_equal(np.diff(b.hops[0].indptr), np.minimum(2, in_deg))
