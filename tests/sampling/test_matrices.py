"""The hop's SpGEMM on a device (expand, sort, compress) against SciPy's, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.sampling.matrices import Csr, esc_spgemm, selection, spgemm


def _random(rows: int, cols: int, density: float, seed: int) -> sp.csr_matrix:
    m = sp.random(rows, cols, density, format="csr", random_state=seed)
    m.data = np.random.default_rng(seed).random(m.nnz) ** 3  # spread exponents: rounding shows
    m.sort_indices()
    return m


@pytest.mark.parametrize(("rows", "inner", "cols", "density"),
                         [(40, 60, 50, 0.2), (7, 300, 9, 0.5), (0, 5, 5, 0.5), (5, 5, 5, 0.0)])
def test_esc_spgemm_sums_as_scipy(rows, inner, cols, density):
    q, s = _random(rows, inner, density, 1), _random(inner, cols, density, 2)
    want = spgemm(Csr.of_scipy(q), Csr.of_scipy(s))  # SciPy's, on the host
    got = esc_spgemm(Csr.of_scipy(q), Csr.of_scipy(s))
    for f in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f
    assert got.shape == want.shape == (rows, cols)


def test_selection_sorts_each_row():
    q = selection(np.array([0, 3, 3, 5]), np.array([4, 0, 2, 1, 0]), 6)
    assert q.indptr.tolist() == [0, 3, 3, 5] and q.indices.tolist() == [0, 2, 4, 0, 1]
    assert q.data.tolist() == [1.0] * 5
