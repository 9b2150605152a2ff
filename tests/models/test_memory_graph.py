"""Models built from SciPy matrices in memory: no graph file, the same results."""

import h5py
import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from hpcgnn.config import TrainConfig
from hpcgnn.grid import ProcessGrid
from hpcgnn.io.memory import MemoryGraph
from hpcgnn.models.block_row import BlockRowGCN
from hpcgnn.models.halo import HaloGCN
from hpcgnn.models.share import load_rows
from hpcgnn.models.summa import GridGCN
from tests.graphs import random_graph_arrays
from tests.models.reference import compare_with_serial

MODELS = {"1d": ("1d", BlockRowGCN), "2d": ("2d", GridGCN), "halo": ("1d", HaloGCN)}


def memory_graph(directed: bool, n: int = 40) -> MemoryGraph:
    """A random graph as SciPy / NumPy arrays (no self loops; undirected: symmetric)."""
    g = random_graph_arrays(n=n, features=5, classes=3, directed=directed, seed=7)
    a = sp.csr_matrix((np.ones(len(g["src"])), (g["src"], g["dst"])), shape=(n, n))
    if not directed:
        a = a + a.T
    a.setdiag(0)
    a.eliminate_zeros()
    masks = {"train": g["train"], "val": g["val"], "test": g["test"]}
    return MemoryGraph(a.tocsr(), g["x"], g["y"], masks, num_classes=3, directed=directed)


@pytest.fixture
def no_files(monkeypatch):
    """Any HDF5 file opened fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a graph file was opened: {args}")

    monkeypatch.setattr(h5py, "File", refuse)


@pytest.mark.mpi
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("algo", list(MODELS))
def test_models_from_scipy_matrices_equal_the_serial_run(world, device, no_files, algo, directed):
    graph = memory_graph(directed)
    cfg = TrainConfig(layers=2, hidden=5, dtype="float64", seed=3, model="gcn")
    kind, model = MODELS[algo]
    with ProcessGrid.create(MPI.COMM_WORLD, kind, device=device) as grid:
        compare_with_serial(lambda: model.read(graph, grid, cfg), graph, cfg, world, epochs=3)


@pytest.mark.mpi
def test_a_share_is_this_ranks_rows_and_builds_a_model(world, device, no_files):
    graph = memory_graph(False)
    cfg = TrainConfig(layers=2, hidden=4, dtype="float64", model="sage")
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        share = load_rows(graph, grid, cfg)
        lo, hi = share.rows
        assert (lo, hi) == tuple(int(v) for v in share.offsets[world.rank : world.rank + 2])
        assert share.a_t.shape == (hi - lo, 40) and share.a is not None
        with pytest.raises(AttributeError):
            share.rows = (0, 0)  # frozen
        model = BlockRowGCN(share, grid, cfg)
        assert model.rows == (lo, hi) and len(model.weights) == 2 * cfg.layers
