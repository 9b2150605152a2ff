import pytest
from mpi4py import MPI

from hpcgnn.config import TrainConfig
from hpcgnn.grid import ProcessGrid
from hpcgnn.models.block_row import BlockRowGCN
from tests.models.reference import (
    KINDS,
    block_row_every_grid,
    check_cost_model,
    compare_with_serial,
    problem_of,
)


@pytest.mark.mpi
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_1d_matches_serial_and_cost_model(graph_file, world, device, directed, dtype):
    path = graph_file(n=61, directed=directed, seed=7, features=5, classes=3)
    cfg = TrainConfig(layers=3, hidden=6, dropout=0.3, dtype=dtype, seed=11)
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        res, _ = compare_with_serial(lambda: BlockRowGCN.read(path, grid, cfg), path, cfg, world)
        check_cost_model("1d", res, problem_of(path, cfg), grid.shape, world)


@pytest.mark.mpi
@pytest.mark.parametrize("directed", [False, True])
def test_1p5d_every_replication_matches_serial(graph_file, world, device, directed):
    path = graph_file(n=53, directed=directed, seed=5, features=4, classes=3)
    cfg = TrainConfig(layers=3, hidden=5, dropout=0.2, dtype="float64", seed=3)
    block_row_every_grid(path, cfg, world, device)


@pytest.mark.mpi
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("model", list(KINDS))
def test_kind_every_block_row_grid_matches_serial_and_cost_model(
    graph_file, world, device, directed, model
):
    path = graph_file(n=47, avg_degree=2.0, directed=directed, seed=9, features=6, classes=3)
    cfg = TrainConfig(layers=3, hidden=5, dropout=0.3, dtype="float64", seed=4, **KINDS[model])
    block_row_every_grid(path, cfg, world, device, ("1d", "1.5d"))
