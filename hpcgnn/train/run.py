"""Orchestration of one full-batch training run (what ``hpcgnn train`` does)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from hpcgnn.comm.collective import collective
from hpcgnn.dist.cost_model import Problem, predict
from hpcgnn.errors import ConfigError
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.grid.shapes import GridShape, choose_shape
from hpcgnn.io.reader import GraphFile, GraphMeta
from hpcgnn.models.init import layer_sizes
from hpcgnn.train.algorithms import ALGORITHMS, GRID_KIND
from hpcgnn.train.checkpoint import load_checkpoint, restore, save_checkpoint
from hpcgnn.train.config import TrainConfig
from hpcgnn.train.fullbatch import EpochRecord, TrainResult, train_fullbatch
from hpcgnn.train.metrics import build_metrics, summed_over_ranks, write_json
from hpcgnn.train.model_state import make_optimizer
from hpcgnn.train.trace import gather_trace, write_trace
from hpcgnn.utils.memory import check_memory


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


def build_model(path: str, grid: ProcessGrid, cfg: TrainConfig, algo: str) -> Any:
    """Instantiate the distributed model of ``algo`` on ``grid``."""
    if algo == "halo":
        from hpcgnn.train.halo_gcn import HaloGCN

        return HaloGCN(path, grid, cfg)
    if grid.kind in ("1d", "1.5d"):
        from hpcgnn.train.distributed import BlockRowGCN

        return BlockRowGCN(path, grid, cfg)
    from hpcgnn.train.grid_gcn import GridGCN

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
        "algo": opts.algo,
        "grid": str(shape),
        "num_nodes": meta.num_nodes,
        "num_edges": meta.num_edges,
    }


def train(opts: RunOptions, cfg: TrainConfig, comm: MPI.Comm = MPI.COMM_WORLD) -> TrainResult:
    """Run one training job on ``comm``; every rank returns the same result."""
    if opts.algo not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm '{opts.algo}' (choose from {', '.join(ALGORITHMS)})")
    if opts.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every must be >= 0, got {opts.checkpoint_every}")
    if opts.checkpoint_every and not opts.checkpoint_dir:
        raise ConfigError("--checkpoint-every needs --checkpoint-dir")
    shape = choose_shape(GRID_KIND[opts.algo], comm.Get_size(), opts.grid, opts.replication)
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
        grid.world, memory_estimate(meta, cfg, grid.shape), f"{opts.algo} on grid {grid.shape}"
    )
    t0 = time.perf_counter()
    model = build_model(opts.graph, grid, cfg, opts.algo)
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
        f" | {opts.algo} grid {grid.shape}"
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
    _report(opts, cfg, grid, meta, model, result, say)
    return result


def _report(
    opts: RunOptions,
    cfg: TrainConfig,
    grid: ProcessGrid,
    meta: GraphMeta,
    model: Any,
    result: TrainResult,
    say: Any,
) -> None:
    measured = summed_over_ranks(grid.world, result.per_epoch(result.step_bytes))
    phases_per_rank = result.per_epoch(result.step_seconds)
    phases = {k: v / grid.size for k, v in summed_over_ranks(grid.world, phases_per_rank).items()}
    problem = cost_problem(meta, cfg, getattr(model, "offsets", None))
    if opts.algo == "halo":  # halo sizes of every rank (collective call)
        from hpcgnn.dist.cost_halo import HaloVolumes, predict_halo

        agg = model.aggregation
        mine = (len(agg.fwd_sets.halo), int(agg.fwd_sets.send_counts.sum()), len(agg.bwd_sets.halo))
        per_rank = np.array(grid.world.allgather_obj(mine), dtype=np.int64).reshape(-1, 3)
        volumes = HaloVolumes(per_rank[:, 0], per_rank[:, 1], per_rank[:, 2])
        predicted = predict_halo(problem, grid.shape, volumes, agg.mode).bytes_total
    elif grid.kind in ("2d", "3d"):  # exact sparse-block sizes (collective call)
        from dataclasses import asdict

        from hpcgnn.dist.cost_summa import SummaProblem

        problem = SummaProblem(**asdict(problem), block_nnz=model.block_nnz())
    if opts.algo != "halo":
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
    if grid.rank != 0:
        return
    if opts.metrics:
        doc = build_metrics(
            result,
            world_size=grid.size,
            config={
                **cfg.as_dict(),
                "algo": opts.algo,
                "grid": str(grid.shape),
                "graph": opts.graph,
                "mode": "fullbatch",
            },
            measured_bytes=measured,
            predicted_bytes=predicted,
            phases=phases,
            extra={
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
