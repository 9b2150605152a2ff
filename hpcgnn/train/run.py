"""Orchestration of one full-batch training run (what ``hpcgnn train`` does)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from hpcgnn.comm.collective import collective
from hpcgnn.comm.memory import check_memory
from hpcgnn.config import ALGORITHMS, GRID_KIND, TrainConfig
from hpcgnn.cost.model import Problem, predict
from hpcgnn.errors import ConfigError
from hpcgnn.exchange.offload import DEDUP_LEVELS
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphFile, GraphMeta
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.shapes import GridShape, choose_shape
from hpcgnn.planning.topology import Topology, load_topology, uniform_topology
from hpcgnn.spmm.halo import EXCHANGES
from hpcgnn.train.checkpoint import load_checkpoint, restore, save_checkpoint
from hpcgnn.train.loop import EpochRecord, TrainResult, train_fullbatch
from hpcgnn.train.model_state import make_optimizer
from hpcgnn.train.report import build_metrics, summed_over_ranks, write_json
from hpcgnn.train.trace import gather_trace, write_trace


@dataclass
class RunOptions:
    """Everything ``hpcgnn train`` needs besides the model hyper-parameters."""

    graph: str
    algo: str = "1d"
    grid: str | None = None
    replication: int | None = None
    metrics: str | None = None
    trace: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    resume: str | None = None
    quiet: bool = False
    mode: str = "fullbatch"
    exchange: str = "p2p"
    topology: str | None = None
    chunks: int = 4
    dedup: str = "full"
    reorganize: bool = False
    tier_gbps: dict[str, float] | None = None

    @property
    def label(self) -> str:
        """Algorithm name in reports: ``offload`` for ``--mode offload``."""
        return "offload" if self.mode == "offload" else self.algo


def check_options(opts: RunOptions) -> None:
    """Reject inconsistent flags (the same on every rank, before any communication)."""
    if opts.algo not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm '{opts.algo}' (choose from {', '.join(ALGORITHMS)})")
    if opts.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every must be >= 0, got {opts.checkpoint_every}")
    if opts.checkpoint_every and not opts.checkpoint_dir:
        raise ConfigError("--checkpoint-every needs --checkpoint-dir")
    if opts.exchange not in EXCHANGES:
        raise ConfigError(f"--exchange must be one of {', '.join(EXCHANGES)}, not {opts.exchange}")
    if opts.mode == "offload":
        if opts.algo not in ("1d", "halo"):
            raise ConfigError(
                f"--mode offload partitions the vertices itself; it cannot run --algo {opts.algo}"
            )
        if opts.chunks < 1:
            raise ConfigError(f"--chunks must be >= 1, got {opts.chunks}")
        if opts.dedup not in DEDUP_LEVELS:
            raise ConfigError(f"--dedup must be one of {', '.join(DEDUP_LEVELS)}")
    elif opts.reorganize:
        raise ConfigError("--reorganize applies to --mode offload only")
    if opts.label != "halo" and (opts.exchange != "p2p" or opts.topology):
        raise ConfigError("--exchange and --topology apply to --algo halo only")


def load_run_topology(opts: RunOptions, grid: ProcessGrid) -> Topology | None:
    """The halo run's topology: ``--topology``, else all ranks on one node (collective)."""
    if opts.label != "halo":
        return None
    with collective(grid.world):
        topo = load_topology(opts.topology) if opts.topology else uniform_topology(grid.size)
        if topo.num_ranks != grid.size:
            raise ConfigError(
                f"topology '{topo.name}' has {topo.num_ranks} ranks but the job has {grid.size}"
            )
    return topo


def build_model(
    path: str, grid: ProcessGrid, cfg: TrainConfig, opts: RunOptions,
    topo: Topology | None = None,
) -> Any:
    """Instantiate the distributed model ``opts`` asks for on ``grid``."""
    algo = opts.algo
    if opts.mode == "offload":
        from hpcgnn.models.offload import OffloadGCN, OffloadOptions

        return OffloadGCN(
            path, grid, cfg, OffloadOptions(opts.chunks, opts.dedup, opts.reorganize)
        )
    if algo == "halo":
        from hpcgnn.models.halo import HaloGCN

        return HaloGCN(path, grid, cfg, exchange=opts.exchange, topology=topo)
    if grid.kind in ("1d", "1.5d"):
        from hpcgnn.models.block_row import BlockRowGCN

        return BlockRowGCN(path, grid, cfg)
    from hpcgnn.models.summa import GridGCN

    return GridGCN(path, grid, cfg)


def cost_problem(meta: GraphMeta, cfg: TrainConfig, row_offsets: np.ndarray | None) -> Problem:
    """The cost model's view of this run."""
    widths = tuple(layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers))
    offsets = None if row_offsets is None else tuple(int(x) for x in row_offsets)
    return Problem(
        meta.num_nodes,
        meta.num_edges + meta.num_nodes,
        widths,
        8 if cfg.dtype == "float64" else 4,
        offsets,
    )


def memory_estimate(meta: GraphMeta, cfg: TrainConfig, shape: GridShape) -> float:
    """Rough upper bound of the bytes one rank allocates (matrices, activations, buffers).

    Sparse blocks of ``Â^T`` and ``Â`` are held as 64-bit-index CSR (about 20 bytes per
    nonzero, twice during loading); every layer keeps its input, output and gradient.
    """
    blocks = shape.dims[0] if shape.kind in ("1d", "1.5d") else shape.size
    itemsize = 8 if cfg.dtype == "float64" else 4
    rows = meta.num_nodes / blocks
    nnz = (meta.num_edges + meta.num_nodes) / blocks
    widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
    dense = rows * sum(widths) * itemsize * 4 + rows * max(widths) * itemsize * 2
    return 2 * 2 * 20 * nnz + dense + 8 * meta.num_nodes * 2


def _fingerprint(opts: RunOptions, cfg: TrainConfig, meta: GraphMeta, shape: GridShape) -> dict:
    c = cfg.as_dict()
    c.pop("epochs")
    c.pop("eval_every")
    return {
        **c,
        "algo": opts.label,
        "grid": str(shape),
        "num_nodes": meta.num_nodes,
        "num_edges": meta.num_edges,
    }


def train(opts: RunOptions, cfg: TrainConfig, comm: MPI.Comm = MPI.COMM_WORLD) -> TrainResult:
    """Run one training job on ``comm``; every rank returns the same result."""
    check_options(opts)
    shape = choose_shape(GRID_KIND[opts.label], comm.Get_size(), opts.grid, opts.replication)
    grid = ProcessGrid(comm, shape)
    try:
        return _train_on_grid(opts, cfg, grid)
    finally:
        grid.free()


def _train_on_grid(opts: RunOptions, cfg: TrainConfig, grid: ProcessGrid) -> TrainResult:
    root = grid.rank == 0
    say = (lambda *a: print(*a, flush=True)) if root else (lambda *a: None)
    with collective(grid.world):
        with GraphFile(opts.graph) as gf:
            meta = gf.meta
    check_memory(
        grid.world, memory_estimate(meta, cfg, grid.shape), f"{opts.label} on grid {grid.shape}"
    )
    topo = load_run_topology(opts, grid)
    t0 = time.perf_counter()
    model = build_model(opts.graph, grid, cfg, opts, topo)
    setup_s = time.perf_counter() - t0
    notes = ""
    if grid.kind == "1.5d" and (grid.dims[0] % grid.dims[1]):
        notes = (
            f" | note: c={grid.dims[1]} does not divide P/c={grid.dims[0]};"
            " stage chunks differ by one"
        )
    say(
        f"hpcgnn train: {meta.name or opts.graph}: {meta.num_nodes} vertices,"
        f" {meta.num_edges} edges, {meta.num_features} features, {meta.num_classes} classes"
        f" | {_describe(opts, topo)} grid {grid.shape}"
        f" on {grid.size} ranks | setup {setup_s:.2f} s{notes}"
    )
    fingerprint = _fingerprint(opts, cfg, meta, grid.shape)
    optimizer = make_optimizer(model.weights, cfg)
    start_epoch, history = 0, []
    if opts.resume:
        state = load_checkpoint(opts.resume, grid.world, fingerprint)
        restore(state, model.weights, optimizer)
        start_epoch = int(state["epoch"])
        history = [EpochRecord(**rec) for rec in state["history"]]
        say(f"resumed from {opts.resume} after epoch {start_epoch}")

    def progress(rec: EpochRecord) -> None:
        if root and not opts.quiet:
            acc = ""
            if rec.train_acc is not None:
                acc = f" | train {rec.train_acc:.4f} val {rec.val_acc:.4f}"
            share = 100.0 * rec.comm_s / rec.time_s if rec.time_s > 0 else 0.0
            print(
                f"epoch {rec.epoch + 1:5d} | loss {rec.loss:.4f}{acc} | {rec.time_s * 1e3:9.1f} ms"
                f" | comm {share:4.1f}%",
                flush=True,
            )

    def checkpoint(done: int, opt: Any, result: TrainResult) -> None:
        if opts.checkpoint_every and (done % opts.checkpoint_every == 0 or done == cfg.epochs):
            with collective(grid.world):
                if root:
                    save_checkpoint(
                        opts.checkpoint_dir,
                        epoch=done,
                        weights=model.weights,
                        optimizer=opt,
                        history=[e.as_dict() for e in result.epochs],
                        fingerprint=fingerprint,
                    )

    grid.world.barrier()
    grid.stats.reset()
    grid.stats.tracing = bool(opts.trace)
    result = train_fullbatch(
        model,
        cfg,
        progress,
        start_epoch=start_epoch,
        optimizer=optimizer,
        history=history,
        after_epoch=checkpoint,
    )
    _report(opts, cfg, grid, meta, model, result, say, topo)
    return result


def _describe(opts: RunOptions, topo: Topology | None) -> str:
    if opts.mode == "offload":
        reorg = " reorganized" if opts.reorganize else ""
        return f"offload {opts.chunks} chunks/part dedup {opts.dedup}{reorg},"
    if opts.label == "halo" and topo is not None:
        return f"halo {opts.exchange} exchange on topology {topo.name},"
    return opts.algo


def _report(
    opts: RunOptions,
    cfg: TrainConfig,
    grid: ProcessGrid,
    meta: GraphMeta,
    model: Any,
    result: TrainResult,
    say: Any,
    topo: Topology | None = None,
) -> None:
    measured = summed_over_ranks(grid.world, result.per_epoch(result.step_bytes))
    phases_per_rank = result.per_epoch(result.step_seconds)
    phases = {k: v / grid.size for k, v in summed_over_ranks(grid.world, phases_per_rank).items()}
    problem = cost_problem(meta, cfg, getattr(model, "offsets", None))
    exchange = None
    if opts.mode == "offload":
        from hpcgnn.cost.offload import predict_offload
        from hpcgnn.train.exchange_report import offload_report

        predicted = predict_offload(
            problem, grid.size, model.volumes, model.remote, opts.dedup
        ).bytes_total
        exchange = offload_report(model, measured, predicted, opts.tier_gbps)
    elif opts.label == "halo":  # halo sizes of every rank (collective call)
        from hpcgnn.cost.halo import HaloVolumes, planned_volumes, predict_halo
        from hpcgnn.train.exchange_report import halo_report

        agg = model.aggregation
        if agg.exchange == "planned":  # every transfer of the plan, forwarding included
            volumes = planned_volumes(agg.fwd_exchange.counts, grid.size)
        else:
            mine = (
                len(agg.fwd_sets.halo), int(agg.fwd_sets.send_counts.sum()),
                len(agg.bwd_sets.halo),
            )
            per_rank = np.array(grid.world.allgather_obj(mine), dtype=np.int64).reshape(-1, 3)
            volumes = HaloVolumes(per_rank[:, 0], per_rank[:, 1], per_rank[:, 2])
        predicted = predict_halo(problem, grid.shape, volumes, agg.mode).bytes_total
        assert topo is not None
        exchange = halo_report(model, grid, topo, measured, opts.tier_gbps)
    else:
        if grid.kind in ("2d", "3d"):  # exact sparse-block sizes (collective call)
            from dataclasses import asdict

            from hpcgnn.cost.summa import SummaProblem

            problem = SummaProblem(**asdict(problem), block_nnz=model.block_nnz())
        predicted = predict(opts.algo, problem, grid.shape).bytes_total
    events = gather_trace(grid.world, grid.stats) if opts.trace else None
    f = result.final
    say(
        f"final | loss {f['loss']:.4f} | train {f['train_acc']:.4f} val {f['val_acc']:.4f}"
        f" test {f['test_acc']:.4f} | params sha256 {result.params_sha256[:16]}"
    )
    if result.epochs:
        med = float(np.median([e.time_s for e in result.epochs]))
        total_m = sum(measured.values())
        total_p = sum(predicted.values())
        say(
            f"epoch median {med * 1e3:.1f} ms | comm per epoch {total_m / 1e6:.3f} MB measured,"
            f" {total_p / 1e6:.3f} MB predicted"
        )
    if exchange is not None:
        say(_exchange_line(exchange))
    if grid.rank != 0:
        return
    if opts.metrics:
        doc = build_metrics(
            result,
            world_size=grid.size,
            config={
                **cfg.as_dict(),
                "algo": opts.label,
                "grid": str(grid.shape),
                "graph": opts.graph,
                "mode": opts.mode,
                **_exchange_config(opts, topo),
            },
            measured_bytes=measured,
            predicted_bytes=predicted,
            phases=phases,
            extra={
                **({"exchange": exchange} if exchange is not None else {}),
                "graph": {
                    "num_nodes": meta.num_nodes,
                    "num_edges": meta.num_edges,
                    "num_features": meta.num_features,
                    "num_classes": meta.num_classes,
                    "directed": meta.directed,
                }
            },
        )
        write_json(opts.metrics, doc)
        print(f"metrics written to {opts.metrics}", file=sys.stderr)
    if opts.trace and events is not None:
        write_trace(opts.trace, events)
        print(f"trace written to {opts.trace}", file=sys.stderr)


def _exchange_config(opts: RunOptions, topo: Topology | None) -> dict:
    if opts.mode == "offload":
        return {"chunks": opts.chunks, "dedup": opts.dedup, "reorganize": opts.reorganize}
    if opts.label == "halo":
        return {"exchange": opts.exchange, "topology": opts.topology or (topo and topo.name)}
    return {}


def _exchange_line(ex: dict) -> str:
    """One summary line of the ``exchange`` metrics."""
    counts = f"V_ori {ex['V_ori']} V_p2p {ex['V_p2p']} V_ru {ex['V_ru']}"
    if ex["strategy"] == "offload":
        tiers = " ".join(f"{t} {b / 1e6:.3f}" for t, b in ex["bytes_per_tier"].items())
        return f"exchange | {counts} | MB per epoch: {tiers} | modelled C {ex['C_s'] * 1e3:.4f} ms"
    pl = ex["planner"]
    stages = " ".join(
        f"s{st['stage']} {st['modelled_s'] * 1e3:.3f}/{st['measured_s'] * 1e3:.3f}"
        for st in pl["stages"]
    )
    return (
        f"exchange | {ex['strategy']} on {ex['topology']}: {ex['transfers']} transfers in"
        f" {pl['num_stages']} stages | modelled p2p {pl['p2p_modelled_s'] * 1e3:.4f} ms,"
        f" this exchange {pl['modelled_s'] * 1e3:.4f} ms at F={pl['feature_dim']}"
        f" | stage ms modelled/measured: {stages or '-'}"
    )
