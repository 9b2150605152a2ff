"""The feature fetch returns the rows asked for, dense or sparse, at any column size."""

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from hpcgnn.comm.communicator import Comm
from hpcgnn.layout.blocks import vertex_offsets
from hpcgnn.sampling.fetch import FETCH, FeatureFetcher
from tests.mpi import assert_all


@pytest.mark.mpi
def test_sparse_rows_arrive_as_the_dense_ones_with_fewer_bytes(world):
    n, f = 23, 11
    rng = np.random.default_rng(0)
    x = sp.random(n, f, density=0.2, random_state=1, format="csr", dtype=np.float32)
    labels = rng.integers(0, 4, n)
    offsets = vertex_offsets(n, world.size, None)
    lo, hi = offsets[world.rank], offsets[world.rank + 1]
    ids = np.random.default_rng(world.rank).choice(n, 9, replace=False)  # any order
    got = {}
    for layout in ("dense", "sparse"):
        comm = Comm(MPI.COMM_WORLD.Dup(), owned=True)
        block = x[lo:hi] if layout == "sparse" else x[lo:hi].toarray()
        fetcher = FeatureFetcher(comm, offsets, block, labels[lo:hi])
        rows, y = fetcher.fetch(ids)
        dense = rows.toarray() if layout == "sparse" else rows
        assert_all(world, np.array_equal(dense, x[ids].toarray()), layout)
        assert_all(world, np.array_equal(y, labels[ids]), layout)
        got[layout] = comm.stats.categories[FETCH].bytes if FETCH in comm.stats.categories else 0
        comm.free()
    owner = np.searchsorted(offsets, ids, side="right") - 1
    remote = ids[owner != world.rank]
    want = int(x[remote].nnz) * (4 + 4) + 8 * len(remote)
    assert_all(world, got["sparse"] == want, f"{got} vs {want}")
