import pytest
from mpi4py import MPI

from hpcgnn.grid import ProcessGrid
from hpcgnn.layout.shapes import admissible_shapes
from tests.mpi import assert_all


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["1d", "1.5d", "2d", "3d"])
def test_every_admissible_shape_builds_consistent_subcommunicators(kind):
    p = MPI.COMM_WORLD.Get_size()
    for shape in admissible_shapes(kind, p):
        with ProcessGrid(MPI.COMM_WORLD, shape) as g:
            ok = g.size == p and len(g.coords) == len(shape.dims)
            if kind == "1d":
                ok &= g.col.size == p and g.row.size == 1
            elif kind in ("1.5d", "2d"):
                r, c = shape.dims
                ok &= g.row.size == c and g.col.size == r
                ok &= g.row.rank == g.coords[1] and g.col.rank == g.coords[0]
            else:
                pr, pc, pl = shape.dims
                ok &= g.row.size == pc and g.col.size == pr and g.fiber.size == pl
                ok &= g.layer.size == pr * pc and g.fiber.rank == g.coords[2]
            if kind != "1d":  # members of my row share my row coordinate
                coords = g.row.mpi.allgather(g.coords)
                ok &= all(c[0] == g.coords[0] for c in coords)
            assert_all(g.world, ok, f"{kind} {shape}")


@pytest.mark.mpi
def test_grid_counts_traffic_on_shared_stats():
    MPI.COMM_WORLD.Get_size()
    with ProcessGrid.create(MPI.COMM_WORLD, "2d") as g:
        import numpy as np

        buf = np.ones(10, dtype=np.float64)
        g.row.allreduce(buf, "allreduce")
        g.col.bcast(buf, 0, "dense_bcast")
        snap = g.stats.snapshot()
        assert_all(g.world, snap["allreduce"]["calls"] == 1)
        expected = 2 * 80 * (g.row.size - 1) / g.row.size
        assert_all(g.world, snap["allreduce"]["bytes"] == round(expected))
        assert_all(g.world, snap["dense_bcast"]["bytes"] == (0 if g.col.rank == 0 else 80))
