"""LADIES' partial products of ``P``: what the paper's all-reduce would move, and their sums."""

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.cost.minibatch import partial_product_bytes
from hpcgnn.sampling.matrices import compressed_rows, selection, spgemm, sum_duplicates
from hpcgnn.sampling.samplers import CLUSTER, LAYER_WISE, NODE_WISE
from hpcgnn.sampling.spgemm_1p5d import partial_nonzeros, partial_product
from tests.sampling import random_adjacency, store_of


def scipy_partials(a, frontiers, offsets, replica_of, c):
    """Nonzeros of each batch's row of every replica's ``Q_q (S .* S)``, with SciPy's SpGEMM."""
    n = a.shape[0]
    s = (a.T + sp.eye(n)).tocsr()
    s.data[:] = 1.0
    s = sp.csr_matrix(s.multiply(1.0 / s.sum(axis=1)))  # S = D^-1 (A^T + I)
    block = np.searchsorted(offsets, np.arange(n), side="right") - 1
    out = np.zeros((c, len(frontiers)), np.int64)
    for q in range(c):
        mine = replica_of[block] == q  # the vertices whose rows replica q sums
        rows, cols = [], []
        for b, f in enumerate(frontiers):
            f = f[mine[f]]
            rows += [b] * len(f)
            cols += list(f)
        qq = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(frontiers), n))
        out[q] = (qq @ s.multiply(s)).getnnz(axis=1)
    return out


def test_the_bytes_by_hand():
    # c = 2, two batches: each partial goes to the one other replica, 8 per row, 16 per entry
    assert partial_product_bytes(np.array([[2, 3], [0, 1]]), np.array([True, True])) == (
        8 * 2 + 16 * 5 + 8 * 2 + 16 * 1)
    # a replica whose chunk is only the process row's own block sends nothing
    assert partial_product_bytes(np.array([[0, 0], [4, 1]]), np.array([False, True])) == (
        8 * 2 + 16 * 5)
    # c = 3: every partial goes to the two others
    assert partial_product_bytes(np.array([[1], [2], [0]]), np.array([True, True, False])) == (
        2 * (8 * 2 + 16 * 3))
    assert partial_product_bytes(np.zeros((1, 3), np.int64), np.array([False])) == 0


@pytest.mark.parametrize("replica_of", [[-1, 0, 1], [0, -1, 1, 1], [1, 1, 0, -1]])
def test_partial_nonzeros_are_scipys_partial_products(replica_of):
    replica_of = np.array(replica_of)
    blocks, c = len(replica_of), int(replica_of.max()) + 1
    a = random_adjacency(36, 2.5, seed=blocks, directed=True)
    offsets = np.linspace(0, 36, blocks + 1).astype(np.int64)
    rng = np.random.default_rng(7)
    frontiers = [np.sort(rng.choice(36, k, replace=False)) for k in (5, 1, 12, 0, 30)]
    ptr = np.concatenate([[0], np.cumsum([len(f) for f in frontiers])])
    got = partial_nonzeros(ptr, np.concatenate(frontiers), store_of(a, "ladies"), offsets,
                           replica_of, c)
    np.testing.assert_array_equal(got, scipy_partials(a, frontiers, offsets, replica_of, c))


def test_partial_nonzeros_of_no_batch():
    a = random_adjacency(10, 2.0, seed=1)
    got = partial_nonzeros(np.zeros(1, np.int64), np.zeros(0, np.int64), store_of(a, "ladies"),
                           np.array([0, 5, 10]), np.array([-1, 0]), 1)
    assert got.shape == (1, 0)


def test_only_ladies_draws_from_a_product_of_batch_rows():
    assert LAYER_WISE.layer_wise
    assert not NODE_WISE.layer_wise and not CLUSTER.layer_wise


@pytest.mark.parametrize("cuts", [[0, 40], [0, 13, 40], [0, 7, 7, 22, 40]])
def test_partial_products_chained_in_block_order_are_scipys_p_bit_for_bit(cuts):
    # the paper's reduction as --ladies-reduction partial-products runs it: each replica's
    # terms (its vertex range), added in order to the running sum of the ranges before
    a = random_adjacency(40, 3.0, seed=len(cuts), directed=True)
    store = store_of(a, "ladies")
    rng = np.random.default_rng(len(cuts))
    # unsorted frontiers (hop 0's seeds are in shuffled order), one empty
    frontiers = [rng.choice(40, k, replace=False) for k in (9, 1, 25, 0, 40)]
    ptr = np.concatenate([[0], np.cumsum([len(f) for f in frontiers])])
    ids = np.concatenate(frontiers).astype(np.int64)
    s_u, inv = compressed_rows(ids, store, LAYER_WISE)
    want = spgemm(selection(ptr, inv, s_u.shape[0]), s_u.squared())
    batch = np.repeat(np.arange(len(frontiers)), np.diff(ptr))
    keys, values = np.zeros(0, np.int64), np.zeros(0)
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        inside = (ids >= lo) & (ids < hi)
        k, v = partial_product(batch[inside], ids[inside], store)
        keys, values = sum_duplicates(np.concatenate([keys, k]), np.concatenate([values, v]))
    np.testing.assert_array_equal(keys // 40, np.repeat(np.arange(5), np.diff(want.indptr)))
    np.testing.assert_array_equal(keys % 40, want.indices)
    assert values.tobytes() == want.data.tobytes()  # the same float64 bits
