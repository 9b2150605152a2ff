import numpy as np
import pytest
from scipy.stats import chisquare

from hpcgnn.rng import chain
from hpcgnn.sampling.its import row_totals, sample_rows, segment_cumsum


def csr_rows(lengths, rng):
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return indptr, rng.random(int(indptr[-1]))


def test_segment_cumsum_restarts_per_row_and_ignores_neighbours():
    rng = np.random.default_rng(0)
    lengths = [0, 1, 5, 3, 0, 17, 2]
    indptr, w = csr_rows(lengths, rng)
    cum = segment_cumsum(indptr, w)
    for r in range(len(lengths)):
        row = slice(indptr[r], indptr[r + 1])
        assert np.array_equal(cum[row], np.cumsum(w[row]))
    sums = [w[indptr[r] : indptr[r + 1]].sum() for r in range(7)]
    assert np.allclose(row_totals(indptr, cum), sums)


@pytest.mark.parametrize("count", [1, 3, 7, 50])
def test_without_replacement_counts_and_support(count):
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 30, 200)
    indptr, w = csr_rows(lengths, rng)
    w[rng.random(len(w)) < 0.3] = 0.0  # zero weights are never drawn
    keys = chain(np.uint64(5), np.arange(200))
    sel = sample_rows(indptr, w, count, keys)
    row = np.repeat(np.arange(200), lengths)
    got = np.bincount(row[sel], minlength=200)
    positive = np.bincount(row[w > 0], minlength=200)
    assert np.array_equal(got, np.minimum(count, positive))
    assert not sel[w == 0].any()


def test_rows_do_not_depend_on_the_other_rows():
    rng = np.random.default_rng(2)
    lengths = rng.integers(1, 40, 50)
    indptr, w = csr_rows(lengths, rng)
    keys = chain(np.uint64(9), np.arange(50))
    full = sample_rows(indptr, w, 4, keys)
    for r in (0, 17, 49):
        seg = slice(indptr[r], indptr[r + 1])
        alone = sample_rows(np.array([0, lengths[r]]), w[seg], 4, keys[r : r + 1])
        assert np.array_equal(alone, full[seg])


def test_single_draw_follows_the_weights():
    weights = np.array([1.0, 2.0, 3.0, 0.5, 0.0, 3.5])
    rows = 6000
    indptr = np.arange(rows + 1) * len(weights)
    sel = sample_rows(indptr, np.tile(weights, rows), 1, chain(np.uint64(3), np.arange(rows)))
    counts = sel.reshape(rows, -1).sum(axis=0)
    assert counts[4] == 0
    nz = weights > 0
    expected = rows * weights[nz] / weights.sum()
    assert chisquare(counts[nz], expected).pvalue > 0.01


def test_successive_sampling_inclusion_probabilities():
    p = np.array([0.5, 0.2, 0.2, 0.1])
    rows = 8000
    indptr = np.arange(rows + 1) * len(p)
    sel = sample_rows(indptr, np.tile(p, rows), 2, chain(np.uint64(4), np.arange(rows)))
    counts = sel.reshape(rows, -1).sum(axis=0)
    # P(j in sample of 2) = p_j + sum_{k != j} p_k p_j / (1 - p_k)
    incl = np.array(
        [p[j] + sum(p[k] * p[j] / (1 - p[k]) for k in range(4) if k != j) for j in range(4)]
    )
    assert np.isclose(incl.sum(), 2.0)
    assert chisquare(counts, rows * incl).pvalue > 0.01
