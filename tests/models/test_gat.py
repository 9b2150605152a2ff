"""GAT on every mode that trains it equals the serial GAT: 1D (all-gathered rows), 1.5D
(stage chunks, the rows' softmax reduced along the process row), 2D and 3D (SUMMA's stages,
heads split over the process row, the softmax reduced along the fiber) and halo (p2p and
planned), directed and undirected graphs, several heads, attention dropout; measured bytes
equal the cost models'."""

import pytest
from mpi4py import MPI

from hpcgnn.config import TrainConfig
from hpcgnn.grid import ProcessGrid
from hpcgnn.models.block_row import BlockRowGCN
from tests.models.reference import (
    assert_measured_equals_predicted,
    block_row_every_grid,
    check_cost_model,
    compare_with_serial,
    metis_graph,
    problem_of,
)
from tests.models.test_halo import halo_against_serial

#: Heads of the hidden and the last layers, attention dropout.
SETTINGS = {
    "one-head": {"heads": 1, "output_heads": 1, "attention_dropout": 0.0},
    "heads": {"heads": 3, "output_heads": 2, "attention_dropout": 0.4},
}


def gat_config(setting: str, dtype: str = "float64", **kw) -> TrainConfig:
    return TrainConfig(layers=3, hidden=6, dropout=0.3, dtype=dtype, seed=4, model="gat",
                       **SETTINGS[setting], **kw)


@pytest.mark.mpi
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gat_1d_matches_serial_and_cost_model(graph_file, world, device, directed, setting,
                                              dtype):
    path = graph_file(n=47, avg_degree=2.0, directed=directed, seed=9, features=6, classes=3)
    cfg = gat_config(setting, dtype)
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        res, _ = compare_with_serial(lambda: BlockRowGCN.read(path, grid, cfg), path, cfg, world)
        check_cost_model("1d", res, problem_of(path, cfg), grid.shape, world)


@pytest.mark.mpi
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_gat_every_grid_matches_serial_and_cost_model(graph_file, world, device, directed,
                                                      setting):
    """Every 1.5D, 2D and 3D grid at this rank count: uneven ones, heads straddling SUMMA's
    column blocks (2D / 3D in float32 on the directed graph)."""
    from hpcgnn.layout.shapes import admissible_shapes
    from tests.models.test_summa import run_shape

    path = graph_file(n=47, avg_degree=2.0, directed=directed, seed=9, features=6, classes=3)
    block_row_every_grid(path, gat_config(setting), world, device)
    cfg = gat_config(setting, "float32" if directed else "float64", eval_every=0)
    for kind in ("2d", "3d"):
        for shape in admissible_shapes(kind, world.size):
            run_shape(path, cfg, shape, world, device, epochs=3)


@pytest.mark.mpi
def test_gat_summa_dense_steps(graph_file, world, device):
    """Wide features and narrow heads: z = X W by reduce-scatter, then all-gather."""
    from hpcgnn.layout.shapes import admissible_shapes
    from tests.models.test_summa import run_shape

    path = graph_file(n=31, directed=True, seed=3, features=12, classes=3)
    cfg = TrainConfig(layers=3, hidden=4, heads=2, output_heads=3, dropout=0.4,
                      attention_dropout=0.2, dtype="float64", seed=5, model="gat", eval_every=0)
    shapes = [s for k in ("2d", "3d") for s in admissible_shapes(k, world.size)]
    for shape in [s for s in shapes if s.dims[1] > 1] or shapes[:1]:
        run_shape(path, cfg, shape, world, device, epochs=2)


@pytest.mark.mpi
@pytest.mark.parametrize("exchange", ["p2p", "planned"])
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_gat_halo_matches_serial_and_cost_model(graph_file, shared_tmp, world, device,
                                                exchange, directed, setting):
    path = metis_graph(graph_file, shared_tmp, world, n=53, directed=directed, seed=2,
                       features=9, classes=3)
    halo_against_serial(path, gat_config(setting), world, device, exchange, backward="push")


@pytest.mark.mpi
@pytest.mark.parametrize(
    "dedup,reorganize,exchange,directed,setting",
    [
        ("none", False, "p2p", False, "heads"),
        ("inter", False, "p2p", True, "one-head"),
        ("full", True, "p2p", True, "heads"),
        ("full", False, "planned", False, "heads"),
    ],
)
def test_gat_offload_matches_serial_and_cost_model(graph_file, shared_tmp, world, device,
                                                   dedup, reorganize, exchange, directed,
                                                   setting):
    """HongTu's chunked GAT: the attention inside the chunk sweep, measured = predicted."""
    from hpcgnn.models.offload import OffloadModel, OffloadOptions

    path = metis_graph(graph_file, shared_tmp, world, n=61, directed=directed, seed=5,
                       features=7, classes=3)
    cfg = gat_config(setting, epochs=2)
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        models = []

        def make():
            opts = OffloadOptions(3, dedup, reorganize, None, exchange)
            models.append(OffloadModel.read(path, grid, cfg, opts))
            return models[-1]

        res, _ = compare_with_serial(make, path, cfg, world, epochs=2)
        assert_measured_equals_predicted(models[-1], res, world)
