"""Small sampling fixtures shared by the sampling tests (serial, no files)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hpcgnn.sampling.rows import RowStore


def random_adjacency(n: int, avg_degree: float, seed: int, directed: bool = False) -> sp.csr_matrix:
    """0/1 CSR ``A`` (row i = out-neighbours of i), no self loops."""
    rng = np.random.default_rng(seed)
    m = int(n * avg_degree)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    a = sp.csr_matrix((np.ones(keep.sum()), (src[keep], dst[keep])), shape=(n, n))
    if not directed:
        a = a + a.T
    a = a.tocsr()
    a.data[:] = 1.0
    a.sort_indices()
    return a


def store_of(a: sp.csr_matrix, sampler: str) -> RowStore:
    """The pattern of ``S`` (``A^T``, plus ``I`` for ladies) as a full :class:`RowStore`."""
    s = a.T.tocsr()
    if sampler == "ladies":
        s = (s + sp.eye(a.shape[0], format="csr")).tocsr()
    s.data[:] = 1.0
    s.sum_duplicates()
    s.sort_indices()
    n = a.shape[0]
    return RowStore(np.arange(n), s.indptr.astype(np.int64), s.indices.astype(np.int64), n)


def same_batches(x, y) -> bool:
    """Whether two lists of sampled batches are identical (ids, structure and values)."""
    if len(x) != len(y):
        return False
    for p, q in zip(x, y, strict=True):
        if p.batch != q.batch or not np.array_equal(p.seeds, q.seeds) or len(p.hops) != len(q.hops):
            return False
        for h1, h2 in zip(p.hops, q.hops, strict=True):
            for f in ("rows", "cols", "indptr", "indices", "values"):
                if not np.array_equal(getattr(h1, f), getattr(h2, f)):
                    return False
    return True
