import numpy as np
import scipy.sparse as sp

from hpcgnn.graph.normalize import mean_block, normalize_block, operator_block
from hpcgnn.kinds import GCN, SAGE


def _random_adjacency(n: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = (rng.random((n, n)) < 0.15).astype(np.float32)
    np.fill_diagonal(dense, 0.0)
    dense[:, 3] = 0.0  # vertex 3 has no in-neighbours
    return sp.csr_matrix(dense)


def test_mean_operator_is_the_in_neighbour_mean_and_zero_without_in_neighbours():
    a = _random_adjacency(12, 0)
    a_t = a.T.tocsr()
    m_t = operator_block(a_t, 0, True, a_t.indptr, a.indptr, SAGE, np.float64).toarray()
    in_deg = a_t.toarray().sum(axis=1)
    expect = np.divide(a_t.toarray(), in_deg[:, None], out=np.zeros((12, 12)),
                       where=in_deg[:, None] > 0)
    assert np.allclose(m_t, expect)
    assert not m_t[3].any()
    m = operator_block(a, 0, False, a.indptr, a_t.indptr, SAGE, np.float64).toarray()
    assert np.allclose(m, expect.T)  # the adjoint A D_in^-1


def test_mean_rows_of_a_block_equal_the_whole_matrix_rows():
    a = _random_adjacency(10, 1)
    a_t = a.T.tocsr()
    whole = mean_block(a_t, np.diff(a_t.indptr), None, np.float32).toarray()
    block = operator_block(a_t[4:8], 4, True, a_t.indptr[4:9] - a_t.indptr[4], a.indptr, SAGE)
    assert np.array_equal(block.toarray(), whole[4:8])


def test_gcn_operator_is_normalize_block():
    a = _random_adjacency(9, 2)
    a_t = a.T.tocsr()
    got = operator_block(a_t, 0, True, a_t.indptr, a.indptr, GCN)
    want = normalize_block(a_t, 0, np.diff(a_t.indptr) + 1.0, np.diff(a.indptr) + 1.0)
    assert np.array_equal(got.toarray(), want.toarray())
