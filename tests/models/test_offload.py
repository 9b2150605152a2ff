import numpy as np
import pytest
from mpi4py import MPI

from hpcgnn.config import TrainConfig
from hpcgnn.cost.offload import predict_offload
from hpcgnn.errors import ConfigError
from hpcgnn.grid import ProcessGrid
from hpcgnn.models.offload import OffloadModel, OffloadOptions
from hpcgnn.planning.dedup import dedup_volumes, remote_rows
from hpcgnn.training.fullbatch import train_fullbatch
from hpcgnn.training.report import summed_over_ranks
from tests.models.reference import (
    assert_measured_equals_predicted,
    compare_with_serial,
    kind_settings,
    metis_graph,
    problem_of,
)
from tests.mpi import assert_all

LEVELS = ("none", "inter", "full")


@pytest.mark.mpi
@pytest.mark.parametrize(
    "dedup,reorganize,dtype,directed,cache,model",
    [
        ("none", False, "float32", False, "all", "gcn"),
        ("inter", False, "float64", True, "one", "gcn"),
        ("full", False, "float32", True, "none", "gcn"),
        ("full", True, "float64", False, "one", "gcn"),
        ("none", False, "float64", True, "all", "sage"),
        ("full", True, "float64", False, "one", "sage"),
        ("inter", False, "float64", True, "none", "sage"),
        ("none", False, "float64", False, "all", "gin"),
        ("full", True, "float64", True, "one", "gin"),
        ("inter", False, "float32", True, "none", "gin"),
    ],
)
def test_offload_matches_serial(
    graph_file, shared_tmp, world, device, dedup, reorganize, dtype, directed, cache, model
):
    # cache: every layer caches its aggregate, only one (the budget of one hidden layer's),
    # or none (all recompute in the backward); GraphSAGE keeps its own rows beside it
    path = metis_graph(graph_file, shared_tmp, world, n=90, directed=directed, seed=4,
                       features=7, classes=3)
    cfg = TrainConfig(layers=3, hidden=6, dropout=0.3, dtype=dtype, seed=3, **kind_settings(model))

    def make(grid):
        model = OffloadModel.read(path, grid, cfg, OffloadOptions(3, dedup, reorganize))
        if cache == "all":
            return model
        rows = int(np.diff(model.offsets).max())
        budget = rows * 6 * model.x.element_size() if cache == "one" else 0
        model = OffloadModel.read(path, grid, cfg, OffloadOptions(3, dedup, reorganize, budget))
        assert sum(model.cached) == (1 if cache == "one" else 0), model.cached
        return model

    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        compare_with_serial(lambda: make(grid), path, cfg, world)


def formulas(model, world):
    """V counts and remote rows from every rank's chunk sets (gathered), on every rank."""
    sets = world.mpi.allgather(model.chunk_sets)
    return (
        dedup_volumes(sets, model.schedule),
        remote_rows(sets, model.schedule, model.offsets, model.opts.dedup),
    )


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("reorganize", "budget", "model"),
    [(False, None, "gcn"), (True, 0, "gcn"), (True, None, "sage"), (False, 0, "gin")],
)
def test_counted_transfers_equal_set_formulas(
    graph_file, shared_tmp, world, device, reorganize, budget, model
):
    path = metis_graph(graph_file, shared_tmp, world, n=120, directed=True, seed=8,
                       features=6, classes=4)
    cfg = TrainConfig(layers=3, hidden=5, dropout=0.2, dtype="float32", seed=1, epochs=2,
                      **kind_settings(model))
    host = {}
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        for dedup in LEVELS:
            model = OffloadModel.read(path, grid, cfg, OffloadOptions(4, dedup, reorganize, budget))
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
@pytest.mark.parametrize("tiers", [None, {"dd": 25.0}])
def test_reorganization_never_increases_c(graph_file, world, device, seed, tiers):
    """The reorganised schedule is kept only when HongTu's C (at the run's tiers) is no more."""
    path = graph_file(f"r{seed}.h5", n=100, directed=False, seed=seed, features=3, classes=2)
    cfg = TrainConfig(layers=2, hidden=4, dtype="float32", seed=seed, epochs=1)
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        plain = OffloadModel.read(path, grid, cfg, OffloadOptions(5, "full", False))
        reorg = OffloadModel.read(path, grid, cfg,
                                OffloadOptions(5, "full", True, tier_gbps=tiers))
    r = reorg.reorganization
    assert r is not None and r.before == plain.volumes
    assert reorg.volumes.cost(1.0, tiers) <= plain.volumes.cost(1.0, tiers)
    assert r.c_before == plain.volumes.cost(1.0, tiers)
    assert reorg.volumes == (r.after if r.accepted else r.before)
    assert reorg.volumes == (r.after if r.accepted else r.before)
    for i in range(world.size):
        assert sorted(reorg.schedule[i].tolist()) == list(range(5))


@pytest.mark.mpi
def test_more_chunks_than_rows(graph_file, world, device):
    path = graph_file("tiny.h5", n=9, directed=True, seed=2, features=3, classes=2)
    cfg = TrainConfig(layers=2, hidden=3, dropout=0.0, dtype="float64", seed=2)
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        compare_with_serial(
            lambda: OffloadModel.read(path, grid, cfg, OffloadOptions(6, "full", True)),
            path, cfg, world, epochs=2,
        )


def dgx1_like(ranks: int):
    """The first ``ranks`` ranks of ``configs/topologies/dgx1-4.json``, without latency.

    At 3 and 4 ranks a PCIe-QPI pair sits beside NVLink paths: without latency relaying
    around the slow pair pays even for these small rows.
    """
    import json

    from hpcgnn.planning.topology import parse_topology

    doc = json.loads(open("configs/topologies/dgx1-4.json").read())
    nodes = [{**nd, "ranks": [r for r in nd["ranks"] if r < ranks]} for nd in doc["nodes"]]
    nodes = [nd for nd in nodes if nd["ranks"]]
    names = {nd["name"] for nd in nodes}
    links = [ln for ln in doc["links"] if max(ln["a"], ln["b"]) < ranks]
    shared = [sh for sh in doc["shared"] if sh["node"] in names]
    return parse_topology({"name": f"dgx1-{ranks}", "ranks": ranks, "nodes": nodes,
                           "shared": shared, "links": links})


@pytest.mark.mpi
@pytest.mark.parametrize(
    "dedup,reorganize,topology,cache",
    [
        pytest.param("inter", False, "dgx1", "all", marks=pytest.mark.ranks(3, 4)),
        pytest.param("full", True, "uniform", "none", marks=pytest.mark.ranks(2, 4)),
    ],
)
def test_planned_offload_matches_serial_p2p_and_cost_model(
    graph_file, shared_tmp, world, device, dedup, reorganize, topology, cache
):
    # the fetches of the deduplicated rows and the gradient pushes follow SPST plans; with
    # cache "none" every layer recomputes its aggregate, so the reloads go through them too
    path = metis_graph(graph_file, shared_tmp, world, n=72, directed=True, seed=4,
                       features=7, classes=3)
    cfg = TrainConfig(layers=3, hidden=6, dropout=0.3, dtype="float64", seed=3, epochs=2)
    topo = dgx1_like(world.size) if topology == "dgx1" else None
    budget = None if cache == "all" else 0
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        models = []

        def make(exchange="planned"):
            opts = OffloadOptions(3, dedup, reorganize, budget, exchange)
            models.append(OffloadModel.read(path, grid, cfg, opts, topology=topo))
            return models[-1]

        res, _ = compare_with_serial(make, path, cfg, world, epochs=2)
        model = models[-1]
        assert sum(model.cached) == (3 if cache == "all" else 0), model.cached
        tables = model.exchange.tables
        plans = [t.fetch.staged for t in tables] + [t.push.staged for t in tables]
        assert_all(world, all(p is not None for p in plans), "a table is not planned")
        _, remote = formulas(model, world)
        assert_all(world, model.remote == remote, f"{model.remote} != {remote}")
        assert model.transfers[0] >= remote[0] and model.transfers[1] >= remote[1]
        if topology == "dgx1" and world.size >= 3:  # the PCIe-QPI pair is relayed around
            assert any(p.num_stages >= 2 for p in plans), [p.counts for p in plans]
        assert_measured_equals_predicted(model, res, world)
        # the same parameters as the p2p exchange, up to the order of the gradient sums
        p2p = make("p2p")
        p2p_res = train_fullbatch(p2p, cfg)
        assert p2p.transfers == p2p.remote
        for a, b in zip(model.weights, p2p.weights, strict=True):
            np.testing.assert_allclose(device.to_host(a), device.to_host(b), 0, 1e-12)
        assert [e.loss for e in res.epochs] == pytest.approx([e.loss for e in p2p_res.epochs],
                                                              rel=0, abs=1e-12)


@pytest.mark.mpi
@pytest.mark.ranks(2)
def test_planned_exchange_needs_a_deduplicated_fetch(graph_file, world, device):
    path = graph_file("p.h5", n=20, directed=False, seed=1, features=3, classes=2)
    cfg = TrainConfig(layers=2, hidden=3, dtype="float32", seed=1)
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        with pytest.raises(ConfigError, match="fetches of --dedup inter or full"):
            OffloadModel.read(path, grid, cfg, OffloadOptions(2, "none", exchange="planned"))
