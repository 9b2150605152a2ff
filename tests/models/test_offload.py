import numpy as np
import pytest
from mpi4py import MPI

from hpcgnn.config import TrainConfig
from hpcgnn.cost.offload import predict_offload
from hpcgnn.grid import ProcessGrid
from hpcgnn.models.offload import OffloadGCN, OffloadOptions
from hpcgnn.planning.dedup import dedup_volumes, remote_rows
from hpcgnn.train.fullbatch import train_fullbatch
from hpcgnn.train.report import summed_over_ranks
from tests.models.reference import compare_with_serial, metis_graph, problem_of
from tests.mpi import assert_all

LEVELS = ("none", "inter", "full")


@pytest.mark.mpi
@pytest.mark.parametrize(
    "dedup,reorganize,dtype,directed,cache",
    [
        ("none", False, "float32", False, "all"),
        ("inter", False, "float64", True, "one"),
        ("full", False, "float32", True, "none"),
        ("full", True, "float64", False, "one"),
    ],
)
def test_offload_matches_serial(
    graph_file, shared_tmp, world, dedup, reorganize, dtype, directed, cache
):
    # cache: every layer caches its aggregate, only one (the budget of one hidden layer's),
    # or none (all recompute in the backward)
    path = metis_graph(graph_file, shared_tmp, world, n=90, directed=directed, seed=4,
                       features=7, classes=3)
    cfg = TrainConfig(layers=3, hidden=6, dropout=0.3, dtype=dtype, seed=3)

    def make(grid):
        model = OffloadGCN(path, grid, cfg, OffloadOptions(3, dedup, reorganize))
        if cache == "all":
            return model
        rows = int(np.diff(model.offsets).max())
        budget = rows * 6 * model.x.element_size() if cache == "one" else 0
        model = OffloadGCN(path, grid, cfg, OffloadOptions(3, dedup, reorganize, budget))
        assert sum(model.cached) == (1 if cache == "one" else 0), model.cached
        return model

    with ProcessGrid.create(MPI.COMM_WORLD, "1d") as grid:
        compare_with_serial(lambda: make(grid), path, cfg, world)


def formulas(model, world):
    """V counts and remote rows from every rank's chunk sets (gathered), on every rank."""
    sets = world.mpi.allgather(model.chunk_sets)
    return (
        dedup_volumes(sets, model.schedule),
        remote_rows(sets, model.schedule, model.offsets, model.opts.dedup),
    )


@pytest.mark.mpi
@pytest.mark.parametrize(("reorganize", "budget"), [(False, None), (True, 0)])
def test_counted_transfers_equal_set_formulas(graph_file, shared_tmp, world, reorganize, budget):
    path = metis_graph(graph_file, shared_tmp, world, n=120, directed=True, seed=8,
                       features=6, classes=4)
    cfg = TrainConfig(layers=3, hidden=5, dropout=0.2, dtype="float32", seed=1, epochs=2)
    host = {}
    with ProcessGrid.create(MPI.COMM_WORLD, "1d") as grid:
        for dedup in LEVELS:
            model = OffloadGCN(path, grid, cfg, OffloadOptions(4, dedup, reorganize, budget))
            volumes, remote = formulas(model, world)
            assert_all(world, model.volumes == volumes, f"{model.volumes} != {volumes}")
            assert_all(world, model.remote == remote, f"{model.remote} != {remote}")
            res = train_fullbatch(model, cfg)
            measured = summed_over_ranks(world, res.per_epoch(res.step_bytes))
            measured = {c: v for c, v in measured.items() if c not in ("control",)}
            pred = predict_offload(
                problem_of(path, cfg), world.size, volumes, remote, dedup, model.cached
            ).bytes_total
            pred = {c: v for c, v in pred.items() if v}
            cats = set(measured) | set(pred)
            ok = all(abs(measured.get(c, 0) - pred.get(c, 0)) < 1e-6 for c in cats)
            assert_all(world, ok, f"{dedup}: measured {measured} vs predicted {pred}")
            host[dedup] = (measured.get("offload_h2d", 0), measured.get("offload_d2h", 0))
            v = volumes
            assert_all(world, v.v_ru <= v.v_p2p <= v.v_ori)
    assert host["full"][0] <= host["inter"][0] <= host["none"][0], host
    assert host["full"][1] <= host["inter"][1] <= host["none"][1], host
    if world.rank == 0:
        print(f"\nP={world.size} host<->device bytes per epoch (h2d, d2h): {host}")


@pytest.mark.mpi
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reorganization_never_increases_v_ru(graph_file, world, seed):
    path = graph_file(f"r{seed}.h5", n=100, directed=False, seed=seed, features=3, classes=2)
    cfg = TrainConfig(layers=2, hidden=4, dtype="float32", seed=seed, epochs=1)
    with ProcessGrid.create(MPI.COMM_WORLD, "1d") as grid:
        plain = OffloadGCN(path, grid, cfg, OffloadOptions(5, "full", False))
        reorg = OffloadGCN(path, grid, cfg, OffloadOptions(5, "full", True))
    r = reorg.reorganization
    assert r is not None and r.before == plain.volumes
    assert reorg.volumes.v_ru <= plain.volumes.v_ru
    assert reorg.volumes == (r.after if r.accepted else r.before)
    for i in range(world.size):
        assert sorted(reorg.schedule[i].tolist()) == list(range(5))


@pytest.mark.mpi
def test_more_chunks_than_rows(graph_file, world):
    path = graph_file("tiny.h5", n=9, directed=True, seed=2, features=3, classes=2)
    cfg = TrainConfig(layers=2, hidden=3, dropout=0.0, dtype="float64", seed=2)
    with ProcessGrid.create(MPI.COMM_WORLD, "1d") as grid:
        compare_with_serial(
            lambda: OffloadGCN(path, grid, cfg, OffloadOptions(6, "full", True)),
            path, cfg, world, epochs=2,
        )
