import numpy as np
import pytest
from mpi4py import MPI

from hpcgnn.config import TrainConfig
from hpcgnn.cost.halo import halo_volumes, predict_halo
from hpcgnn.grid import ProcessGrid
from hpcgnn.models.halo import HaloGCN
from hpcgnn.training.fullbatch import train_fullbatch
from hpcgnn.training.report import summed_over_ranks
from tests.models.reference import KINDS, compare_with_serial, metis_graph, problem_of
from tests.mpi import assert_all

EXCLUDED = {"control", "halo_setup"}



def measured_bytes(result, world) -> dict[str, float]:
    measured = summed_over_ranks(world, result.per_epoch(result.step_bytes))
    return {c: v for c, v in measured.items() if c not in EXCLUDED}


def check_halo_cost(result, model, path, cfg, grid, world, backward="auto"):
    """Measured per-epoch bytes equal the halo predictor's exactly."""
    measured = measured_bytes(result, world)
    volumes = halo_volumes(path, model.offsets)
    predicted = predict_halo(problem_of(path, cfg), grid.shape, volumes, backward).bytes_total
    cats = set(measured) | set(predicted)
    ok = all(abs(measured.get(c, 0.0) - predicted.get(c, 0.0)) < 1e-6 for c in cats)
    assert_all(world, ok, f"halo: measured {measured} vs predicted {predicted}")
    if world.size > 1:
        assert_all(world, predicted["halo"] > 0, "no halo traffic predicted")


def halo_against_serial(path, cfg, world, device, exchange, backward="auto"):
    """The halo model of ``exchange`` equals the serial run; p2p measures its predicted bytes."""
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        models = []

        def make():
            models.append(HaloGCN.read(path, grid, cfg, exchange=exchange))
            return models[-1]

        res, _ = compare_with_serial(make, path, cfg, world)
        if exchange == "p2p":
            check_halo_cost(res, models[-1], path, cfg, grid, world, backward)


@pytest.mark.mpi
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_halo_matches_serial_and_cost_model(graph_file, shared_tmp, world, device, directed, dtype):
    path = metis_graph(graph_file, shared_tmp, world, n=61, directed=directed, seed=7,
                       features=5, classes=3)
    cfg = TrainConfig(layers=3, hidden=6, dropout=0.3, dtype=dtype, seed=11)
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        models = []

        def make():
            models.append(HaloGCN.read(path, grid, cfg))
            return models[-1]

        res, _ = compare_with_serial(make, path, cfg, world)
        check_halo_cost(res, models[-1], path, cfg, grid, world)


@pytest.mark.mpi
@pytest.mark.parametrize("backward", ["push", "pull"])
def test_halo_backward_modes_on_directed_graph(graph_file, world, device, backward):
    path = graph_file(n=47, directed=True, seed=3, features=9, classes=3)
    # widths 9 -> 4 -> 3: the first layer aggregates X W (a backward SpMM on layer 0 too)
    cfg = TrainConfig(layers=2, hidden=4, dropout=0.2, dtype="float64", seed=5)
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        models = []

        def make():
            models.append(HaloGCN.read(path, grid, cfg, backward=backward))
            return models[-1]

        res, _ = compare_with_serial(make, path, cfg, world, epochs=3)
        assert_all(world, models[-1].aggregation.mode == backward)
        check_halo_cost(res, models[-1], path, cfg, grid, world, backward)


@pytest.mark.mpi
def test_halo_sets_cover_exactly_the_remote_columns(graph_file, world, device):
    path = graph_file(n=40, directed=True, seed=9)
    cfg = TrainConfig(layers=2, hidden=4, dtype="float64")
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        model = HaloGCN.read(path, grid, cfg)
        op = model.aggregation
        lo, hi = model.rows
        for sets in (op.fwd_sets, op.bwd_sets):
            h = sets.halo
            ok = bool(np.all((h < lo) | (h >= hi))) and bool(np.all(np.diff(h) > 0))
            ok = ok and int(sets.recv_counts.sum()) == len(h)
            ok = ok and int(sets.send_counts.sum()) == len(sets.send_rows)
            ok = ok and bool(np.all((sets.send_rows >= 0) & (sets.send_rows < hi - lo)))
            assert_all(world, ok, "inconsistent halo sets")
        volumes = halo_volumes(path, model.offsets)
        r = world.rank
        ok = len(op.fwd_sets.halo) == volumes.fwd_recv[r]
        ok = ok and len(op.fwd_sets.send_rows) == volumes.fwd_send[r]
        ok = ok and len(op.bwd_sets.halo) == volumes.bwd_recv[r]
        assert_all(world, ok, "halo_volumes disagrees with the halo sets")


@pytest.mark.mpi
def test_metis_parts_move_fewer_halo_bytes(graph_file, shared_tmp, world, device):
    from hpcgnn.cli.main import main

    src = graph_file(n=200, directed=False, seed=1, features=4, classes=4, avg_degree=6.0)
    dst = shared_tmp / "metis.h5"
    # ``hpcgnn partition`` is collective: rank 0 partitions, the others wait for it
    rc = main(["partition", str(src), "--parts", str(world.size), "--method", "metis",
               "--out", str(dst), "--quiet"])
    assert_all(world, rc == 0, "partition failed")
    world.mpi.Barrier()
    cfg = TrainConfig(layers=2, hidden=8, dropout=0.0, dtype="float32", seed=2, epochs=1)
    halo = {}
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        for name, path in (("block", src), ("metis", dst)):
            model = HaloGCN.read(path, grid, cfg)
            res = train_fullbatch(model, cfg)
            halo[name] = measured_bytes(res, world).get("halo", 0.0)
            check_halo_cost(res, model, path, cfg, grid, world)
    if world.size == 1:
        assert halo == {"block": 0.0, "metis": 0.0}
    else:
        assert halo["metis"] < halo["block"], halo
    if world.rank == 0:
        print(f"\nP={world.size} halo bytes per epoch: {halo}")


def line_topology(ranks: int):
    """Ranks on a chain 0-1-...-(P-1): messages to non-neighbours must be forwarded."""
    from hpcgnn.planning.topology import parse_topology

    links = [{"a": r, "b": r + 1, "bandwidth_gbps": 10.0} for r in range(ranks - 1)]
    return parse_topology({"name": "line", "ranks": ranks, "links": links})


@pytest.mark.mpi
@pytest.mark.parametrize("topology", ["uniform", "line"])
@pytest.mark.parametrize("directed", [False, True])
def test_planned_halo_matches_serial_and_cost_model(
    graph_file, shared_tmp, world, device, topology, directed, monkeypatch
):
    import functools

    from hpcgnn.cost.halo import planned_volumes
    from hpcgnn.exchange.staged import StagedExchange
    from hpcgnn.spmm import halo as spmm_halo

    if topology == "line":  # keep SPST's trees even where the routed direct plan ties
        monkeypatch.setattr(
            spmm_halo, "StagedExchange", functools.partial(StagedExchange, fallback=False)
        )
    path = metis_graph(graph_file, shared_tmp, world, n=80, directed=directed, seed=5,
                       features=6, classes=3)
    cfg = TrainConfig(layers=3, hidden=5, dropout=0.3, dtype="float64", seed=4)
    topo = line_topology(world.size) if topology == "line" else None
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        models = []

        def make():
            models.append(HaloGCN.read(path, grid, cfg, exchange="planned", topology=topo))
            return models[-1]

        res, _ = compare_with_serial(make, path, cfg, world)
        agg = models[-1].aggregation
        ex = agg.fwd_exchange
        assert_all(world, agg.mode == "push" and agg.exchange == "planned")
        if topology == "line" and world.size >= 3:
            far = any(abs(s - d) > 1 for (_, s, d) in ex.counts)
            assert_all(world, not far and ex.num_stages >= 2, "a transfer skips a rank")
        measured = measured_bytes(res, world)
        volumes = planned_volumes(ex.counts, world.size)
        predicted = predict_halo(problem_of(path, cfg), grid.shape, volumes, "push").bytes_total
        cats = set(measured) | set(predicted)
        ok = all(abs(measured.get(c, 0.0) - predicted.get(c, 0.0)) < 1e-6 for c in cats)
        assert_all(world, ok, f"planned: measured {measured} vs predicted {predicted}")


@pytest.mark.mpi
@pytest.mark.parametrize("exchange", ["p2p", "planned"])
@pytest.mark.parametrize("model", list(KINDS))
def test_halo_kind_matches_serial_and_cost_model(
    graph_file, shared_tmp, world, device, exchange, model
):
    path = metis_graph(graph_file, shared_tmp, world, n=53, directed=True, seed=2,
                       features=9, classes=3)
    # widths 9 -> 4 -> 3: the aggregate of X W on layer 0 runs a backward exchange too
    cfg = TrainConfig(layers=2, hidden=4, dropout=0.2, dtype="float64", seed=6, **KINDS[model])
    halo_against_serial(path, cfg, world, device, exchange)


@pytest.mark.mpi
def test_halo_on_a_hierarchical_partition_matches_serial(graph_file, shared_tmp, world, device):
    from hpcgnn.cli.main import main

    src = graph_file(n=70, directed=False, seed=5, features=4, classes=3)
    dst = shared_tmp / "hier.h5"
    nodes = 2 if world.size % 2 == 0 else 1
    rc = main(["partition", str(src), "--parts", str(world.size), "--method", "metis",
               "--hierarchy", f"{nodes}x{world.size // nodes}", "--out", str(dst), "--quiet"])
    assert_all(world, rc == 0, "hierarchical partition failed")
    world.mpi.Barrier()
    cfg = TrainConfig(layers=2, hidden=6, dropout=0.0, dtype="float64", seed=3)
    halo_against_serial(dst, cfg, world, device, "p2p")


@pytest.mark.mpi
@pytest.mark.parametrize("per_rank", [1, 2])
def test_the_files_block_counts_are_what_halo_builds(graph_file, shared_tmp, world, device,
                                                     per_rank):
    """``hpcgnn partition`` records each block's nonzeros and halo (the memory check's)."""
    from hpcgnn.cli.main import main
    from hpcgnn.io.reader import GraphFile

    src = graph_file(n=60, directed=True, seed=5)
    dst = shared_tmp / f"random-{per_rank}.h5"
    rc = main(["partition", str(src), "--parts", str(per_rank * world.size), "--method",
               "random", "--out", str(dst), "--quiet"])
    assert_all(world, rc == 0, "partition failed")
    world.mpi.Barrier()
    with GraphFile(dst) as gf:
        counts = gf.meta.block_counts(world.size)
    assert counts is not None
    cfg = TrainConfig(layers=2, hidden=4, dtype="float64")
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=device) as grid:
        for backward in ("push", "pull"):
            op = HaloGCN.read(dst, grid, cfg, backward=backward).aggregation
            r, rows = world.rank, op.owned
            built = (op._a_t_loc.nnz, len(op.fwd_sets.halo), len(op.fwd_sets.send_rows),
                     len(op.bwd_sets.halo), len(op.bwd_sets.send_rows))
            recorded = (counts.in_edges[r] + rows, counts.fwd_recv[r], counts.fwd_send[r],
                        counts.bwd_recv[r], counts.bwd_send[r])
            assert_all(world, built == recorded, f"built {built}, recorded {recorded}")
            assert_all(world, op._a_bwd._nnz() == (
                counts.in_edges[r] if backward == "push" else counts.out_edges[r]) + rows)
