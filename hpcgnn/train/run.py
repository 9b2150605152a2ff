"""Orchestration of one training run, every mode (what ``hpcgnn train`` does).

Grid, the graph file's structural checks (:func:`hpcgnn.graph.check.check_graph`), model
(or minibatch trainer), resume, the one epoch loop
(:func:`hpcgnn.train.loop.run_epochs`), checkpoints and the report
(:func:`hpcgnn.train.report.finish_run`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from mpi4py import MPI

from hpcgnn.comm.collective import collective
from hpcgnn.comm.memory import check_memory
from hpcgnn.config import ALGORITHMS, GRID_KIND, TrainConfig, resolve_model
from hpcgnn.cost.block_row import replication_note
from hpcgnn.cost.gist import memory_bytes as gist_memory_bytes
from hpcgnn.cost.ranking import cost_problem, memory_estimate, minibatch_memory_estimate
from hpcgnn.errors import ConfigError, HpcgnnError
from hpcgnn.exchange.offload import DEDUP_LEVELS
from hpcgnn.exchange.staged import EXCHANGES
from hpcgnn.graph.check import check_graph
from hpcgnn.grid.device import choose_device
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphFile, GraphMeta
from hpcgnn.kernels.prepare import prepare_kernels
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.shapes import GridShape, choose_shape
from hpcgnn.models.base import GCNModel
from hpcgnn.planning.topology import Topology, load_topology, uniform_topology
from hpcgnn.sampling.spec import SamplerSpec
from hpcgnn.train.checkpoint import GRAPH_CONTENT, load_checkpoint, restore, save_checkpoint
from hpcgnn.train.fullbatch import FullBatchTrainer
from hpcgnn.train.gist import GistOptions, GistTrainer, check_gist
from hpcgnn.train.loop import EpochRecord, Trainer, TrainResult, run_epochs
from hpcgnn.train.minibatch import MinibatchTrainer
from hpcgnn.train.report import finish_run, max_over_ranks, summed_over_ranks
from hpcgnn.utils.files import check_directory, check_output

MODES = ("fullbatch", "minibatch", "offload", "gist")


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
    spec: SamplerSpec | None = None
    graph_layout: str = "replicated"
    gist: GistOptions | None = None
    device_memory: float | None = None
    device: str | None = None

    @property
    def label(self) -> str:
        """Algorithm name in reports: ``offload`` / ``minibatch`` / ``gist`` for those modes."""
        return self.mode if self.mode in ("offload", "minibatch", "gist") else self.algo


def check_options(opts: RunOptions) -> None:
    """Reject inconsistent flags (the same on every rank, before any communication)."""
    if opts.mode not in MODES:
        raise ConfigError(f"--mode must be one of {', '.join(MODES)}, not {opts.mode}")
    if opts.algo not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm '{opts.algo}' (choose from {', '.join(ALGORITHMS)})")
    if opts.checkpoint_every < 0:
        raise ConfigError(f"--checkpoint-every must be >= 0, got {opts.checkpoint_every}")
    if opts.checkpoint_every and not opts.checkpoint_dir:
        raise ConfigError("--checkpoint-every needs --checkpoint-dir")
    if opts.exchange not in EXCHANGES:
        raise ConfigError(f"--exchange must be one of {', '.join(EXCHANGES)}, not {opts.exchange}")
    if opts.mode == "minibatch" and opts.spec is None:
        raise ConfigError("--mode minibatch needs a sampler specification")
    if opts.mode == "gist":
        if opts.gist is None:
            raise ConfigError("--mode gist needs --subnets and --local-iters")
    elif opts.gist is not None:
        raise ConfigError("--subnets, --local-iters and --rounds apply to --mode gist only")
    elif opts.spec is not None and opts.mode != "minibatch":
        raise ConfigError("a sampler applies to --mode minibatch or --mode gist only")
    if opts.mode == "offload":
        if opts.algo not in ("1d", "halo"):
            raise ConfigError(
                f"--mode offload partitions the vertices itself; it cannot run --algo {opts.algo}"
            )
        if opts.chunks < 1:
            raise ConfigError(f"--chunks must be >= 1, got {opts.chunks}")
        if opts.dedup not in DEDUP_LEVELS:
            raise ConfigError(f"--dedup must be one of {', '.join(DEDUP_LEVELS)}")
        if opts.exchange == "planned" and opts.dedup == "none":
            raise ConfigError(
                "--exchange planned plans the device-to-device fetches of --dedup inter or"
                " full; --dedup none loads every row from the host"
            )
        if opts.topology and opts.exchange != "planned":
            raise ConfigError("--topology in --mode offload needs --exchange planned")
    elif opts.reorganize or opts.device_memory is not None:
        flag = "--reorganize" if opts.reorganize else "--device-memory"
        raise ConfigError(f"{flag} applies to --mode offload only")
    if opts.label not in ("halo", "offload") and (opts.exchange != "p2p" or opts.topology):
        raise ConfigError("--exchange and --topology apply to --algo halo and --mode offload only")


def check_model(opts: RunOptions, cfg: TrainConfig) -> TrainConfig:
    """The run's config with its layer type resolved; refuses a model the run cannot train.

    In minibatch mode, and in GIST with a sampler, the sampler defines the layers
    (:func:`~hpcgnn.config.resolve_model`: ``sage`` trains GraphSAGE-mean, ``ladies`` GCN),
    so ``cfg.model`` becomes the sampler's.
    """
    if opts.spec is not None:
        return replace(cfg, model=resolve_model(None, opts.spec.sampler))
    if opts.label not in cfg.kind.modes:
        where = f"--mode {opts.mode}" if opts.mode != "fullbatch" else f"--algo {opts.algo}"
        raise ConfigError(
            f"--model {cfg.kind} is not available with {where} yet (it trains with "
            f"{', '.join(sorted(cfg.kind.modes))})"
        )
    return cfg


def load_run_topology(opts: RunOptions, grid: ProcessGrid) -> Topology | None:
    """The topology of a halo run or a planned offload run (collective).

    ``--topology``, else all ranks on one node; ``None`` for any other run.
    """
    if opts.label != "halo" and not (opts.label == "offload" and opts.exchange == "planned"):
        return None
    with collective(grid.world):
        if opts.topology:
            return load_topology(opts.topology, grid.size)
        return uniform_topology(grid.size)


def build_model(
    path: str, grid: ProcessGrid, cfg: TrainConfig, opts: RunOptions,
    topo: Topology | None = None, weights: list[torch.Tensor] | None = None,
) -> GCNModel:
    """Instantiate the distributed full-batch model ``opts`` asks for on ``grid``.

    ``weights``: injected parameters (GIST's sub-weights), else the Glorot initialisation.
    """
    if opts.mode == "offload":
        from hpcgnn.models.offload import OffloadGCN, OffloadOptions

        return OffloadGCN(
            path, grid, cfg,
            OffloadOptions(
                opts.chunks, opts.dedup, opts.reorganize, opts.device_memory, opts.exchange
            ),
            topology=topo,
        )
    if opts.algo == "halo":
        from hpcgnn.models.halo import HaloGCN

        return HaloGCN(path, grid, cfg, exchange=opts.exchange, topology=topo, weights=weights)
    if grid.kind in ("1d", "1.5d"):
        from hpcgnn.models.block_row import BlockRowGCN

        return BlockRowGCN(path, grid, cfg, weights=weights)
    from hpcgnn.models.summa import GridGCN

    return GridGCN(path, grid, cfg, weights=weights)


def memory_needed(
    opts: RunOptions, cfg: TrainConfig, meta: GraphMeta, shape: GridShape, ranks: int
) -> float:
    """Bytes a rank needs for the model, checked before anything is allocated for it.

    ``shape``: the run's grid; for GIST, each group's grid. A GIST rank holds its group's
    sub-model of ``ceil(hidden / M)`` on that grid plus its rows of the global model and
    the model-parallel evaluation (:func:`hpcgnn.cost.gist.memory_bytes`), never the whole
    global model.
    """
    if opts.mode == "minibatch":
        return _group_estimate(opts, cfg, meta, shape)
    if opts.gist is not None:
        sub_cfg = replace(cfg, hidden=-(-cfg.hidden // opts.gist.subnets))
        widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        sub = layer_sizes(meta.num_features, sub_cfg.hidden, meta.num_classes, cfg.layers)
        extra = gist_memory_bytes(
            widths, sub, meta.num_nodes, meta.num_edges, ranks, cfg.itemsize,
            cfg.weights_per_layer,
        )
        return _group_estimate(opts, sub_cfg, meta, shape) + extra
    return memory_estimate(meta, cfg, shape)


def _group_estimate(opts: RunOptions, cfg: TrainConfig, meta: GraphMeta, shape: GridShape) -> float:
    """Bytes of the model ``cfg`` on ``shape``: the sampled one with a sampler, else full-batch."""
    if opts.spec is None:
        return memory_estimate(meta, cfg, shape)
    return minibatch_memory_estimate(meta, cfg, shape, cfg.kind.weights_per_layer)


def _fingerprint(
    opts: RunOptions, cfg: TrainConfig, meta: GraphMeta, shape: GridShape, content: str | None,
    group_shape: GridShape | None = None,
) -> dict:
    c = cfg.as_dict()
    c.pop("epochs")
    c.pop("eval_every")
    out = {
        **c,
        "algo": opts.label,
        "grid": str(shape),
        "num_nodes": meta.num_nodes,
        "num_edges": meta.num_edges,
        GRAPH_CONTENT: content,
    }
    if opts.spec is not None:  # the samples, the batches and their optimizer steps
        out.update(sampling=opts.spec.as_dict(), graph_layout=opts.graph_layout)
    if opts.gist is not None:  # what shapes the sub-models and their training
        out.update(
            subnets=opts.gist.subnets, local_iters=opts.gist.local_iters,
            group_algo="minibatch" if opts.spec is not None else opts.algo,
            group_grid=str(group_shape),
        )
    return out


def train(opts: RunOptions, cfg: TrainConfig, comm: MPI.Comm = MPI.COMM_WORLD) -> TrainResult:
    """Run one training job on ``comm``; every rank returns the same result."""
    check_options(opts)
    cfg = check_model(opts, cfg)
    if opts.gist is not None:  # --grid and --replication shape each group
        check_gist(opts.gist, cfg, comm.Get_size())
        shape = choose_shape("1d", comm.Get_size(), None, None)
    else:
        shape = choose_shape(GRID_KIND[opts.label], comm.Get_size(), opts.grid, opts.replication)
    grid = ProcessGrid(comm, shape, device=choose_device(comm, opts.device, prepare_kernels))
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
        if root:  # outputs fail now, not after training
            for flag, path in (("--metrics", opts.metrics), ("--trace", opts.trace)):
                if path:
                    check_output(path, flag)
            if opts.checkpoint_dir:
                check_directory(opts.checkpoint_dir, "--checkpoint-dir")
        if opts.checkpoint_dir and opts.gist is not None and not root:  # each writes its rows
            check_directory(opts.checkpoint_dir, "--checkpoint-dir")
        if opts.mode == "offload" and opts.chunks > meta.num_nodes:
            raise ConfigError(
                f"--chunks {opts.chunks} is more than the graph's {meta.num_nodes} vertices"
            )
    group_shape = _group_shape(opts, grid)
    # the file's structure before any model; its content only for checkpoints
    content = check_graph(grid.world, opts.graph, bool(opts.checkpoint_dir or opts.resume))
    est_shape, hidden = grid.shape, str(cfg.hidden)
    if group_shape is not None:  # a GIST group holds one sub-model of hidden/M on its grid
        assert opts.gist is not None
        est_shape = group_shape
        hidden = f"{-(-cfg.hidden // opts.gist.subnets)} of {cfg.hidden}"
    need = memory_needed(opts, cfg, meta, est_shape, grid.size)
    check_memory(grid.world, need, (
        f"{opts.label} on grid {est_shape} ({meta.num_features} features, hidden {hidden},"
        f" {meta.num_classes} classes, {cfg.layers} layers)"
    ))
    topo = load_run_topology(opts, grid)
    t0 = grid.stats.clock()
    trainer: FullBatchTrainer | MinibatchTrainer | GistTrainer
    if opts.mode == "minibatch":
        assert opts.spec is not None
        trainer = MinibatchTrainer(opts.graph, opts.spec, opts.graph_layout, cfg, grid)
    elif group_shape is not None:
        assert opts.gist is not None
        trainer = GistTrainer(
            grid, cfg, meta, opts.gist, group_shape, _group_trainers(opts),
            estimates={
                "full_model_estimate_bytes": _group_estimate(
                    opts, cfg, meta, _full_shape(opts, grid)
                ),
                "gist_estimate_bytes": need,
            },
            sampler=opts.spec.sampler if opts.spec is not None else None,
        )
    else:
        trainer = FullBatchTrainer(build_model(opts.graph, grid, cfg, opts, topo), cfg, grid.world)
    setup_s = grid.stats.clock() - t0
    note = replication_note(cost_problem(meta, cfg, meta.partition_offsets), grid.shape)
    notes = f" | note: {note}" if note else ""
    if grid.device.is_cuda or grid.wire.stage_host:  # how device buffers reach MPI, and why
        notes += f" | MPI buffers {grid.wire.path} ({grid.wire.reason})"
    say(
        f"hpcgnn train: {meta.name or opts.graph}: {meta.num_nodes} vertices,"
        f" {meta.num_edges} edges, {meta.num_features} features, {meta.num_classes} classes"
        f" | {_describe(opts, topo, trainer)} grid {grid.shape}"
        f" on {grid.size} ranks ({grid.device.name}) | setup {setup_s:.2f} s{notes}"
    )
    fingerprint = _fingerprint(opts, cfg, meta, grid.shape, content, group_shape)
    start_epoch, history = 0, []
    if opts.resume:
        state = load_checkpoint(opts.resume, grid.world, fingerprint, cfg.epochs)
        if isinstance(trainer, GistTrainer):
            trainer.restore_checkpoint(state, opts.resume)
        else:
            restore(state, trainer.weights, trainer.optimizer)
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

    def checkpoint(done: int, result: TrainResult) -> None:
        every = opts.checkpoint_every
        if opts.checkpoint_dir and ((every and done % every == 0) or done == cfg.epochs):
            history = [e.as_dict() for e in result.epochs]
            if isinstance(trainer, GistTrainer):  # every rank writes its rows
                assert opts.checkpoint_dir is not None
                trainer.save_checkpoint(opts.checkpoint_dir, done, history, fingerprint)
                return
            assert opts.checkpoint_dir is not None
            with collective(grid.world):
                if root:
                    save_checkpoint(
                        opts.checkpoint_dir,
                        epoch=done,
                        weights=trainer.weights,
                        optimizer=trainer.optimizer,
                        history=history,
                        fingerprint=fingerprint,
                    )

    grid.world.barrier()
    grid.stats.reset()
    grid.stats.tracing = bool(opts.trace)
    result = run_epochs(
        trainer, cfg, progress, start_epoch=start_epoch, history=history,
        after_epoch=checkpoint,
    )
    _report(opts, cfg, grid, meta, trainer, result, topo)
    if isinstance(trainer, GistTrainer):
        trainer.free()
    return result


def _group_kind(opts: RunOptions) -> str:
    """GIST: the kind of a group's grid (``--algo``'s, or minibatch's with a sampler)."""
    return GRID_KIND["minibatch" if opts.spec is not None else opts.algo]


def _group_shape(opts: RunOptions, grid: ProcessGrid) -> GridShape | None:
    """GIST: the process grid of each rank group (its kind, ``--grid`` on ``P / M`` ranks)."""
    if opts.gist is None:
        return None
    size = grid.size // opts.gist.subnets
    return choose_shape(_group_kind(opts), size, opts.grid, opts.replication)


def _group_trainers(opts: RunOptions) -> Callable[..., FullBatchTrainer | MinibatchTrainer]:
    """GIST: how a group's trainer is built with injected weights (``--algo`` or sampler)."""
    spec = opts.spec
    if spec is not None:
        return lambda g, c, w: MinibatchTrainer(opts.graph, spec, opts.graph_layout, c, g, w)
    return lambda g, c, w: FullBatchTrainer(
        build_model(opts.graph, g, c, opts, weights=w), c, g.world
    )


def _full_shape(opts: RunOptions, grid: ProcessGrid) -> GridShape:
    """GIST: the grid ordinary training of the global model would use on all ranks."""
    try:
        return choose_shape(_group_kind(opts), grid.size, None, None)
    except HpcgnnError:  # e.g. no automatic 3D grid for this P
        return grid.shape


def _describe(opts: RunOptions, topo: Topology | None, trainer: Trainer) -> str:
    if isinstance(trainer, GistTrainer):
        assert opts.gist is not None
        what = f"{opts.algo} full-batch"
        if isinstance(trainer.inner, MinibatchTrainer):
            what = _describe_minibatch(trainer.inner, opts)
        return (
            f"gist {opts.gist.subnets} sub-models x {opts.gist.local_iters} local iterations,"
            f" each group of {trainer.group_size} ranks on grid {trainer.group_grid.shape}"
            f" running {what} | global"
        )
    if isinstance(trainer, MinibatchTrainer):
        return f"{_describe_minibatch(trainer, opts)},"
    if opts.mode == "offload":
        reorg = " reorganized" if opts.reorganize else ""
        plan = f" planned exchange on topology {topo.name}" if topo is not None else ""
        return f"offload {opts.chunks} chunks/part dedup {opts.dedup}{reorg}{plan},"
    if opts.label == "halo" and topo is not None:
        return f"halo {opts.exchange} exchange on topology {topo.name},"
    return opts.algo


def _describe_minibatch(trainer: MinibatchTrainer, opts: RunOptions) -> str:
    spec, b = trainer.spec, trainer.batching()
    return (
        f"minibatch {spec.sampler} {','.join(map(str, spec.sizes))} batch {b['batch_size']}"
        f" per rank, {b['global_batch']} per step, bulk {b['bulk']},"
        f" {b['optimizer_steps_per_epoch']} steps/epoch | {opts.graph_layout} graph"
    )


def _mode_config(opts: RunOptions, grid: ProcessGrid, topo: Topology | None) -> dict:
    if opts.mode == "minibatch":
        assert opts.spec is not None
        return {
            **opts.spec.as_dict(), "graph_layout": opts.graph_layout,
            "replication": grid.shape.replication,
        }
    if opts.mode == "offload":
        return {
            "chunks": opts.chunks, "dedup": opts.dedup, "reorganize": opts.reorganize,
            "exchange": opts.exchange, "topology": opts.topology or (topo and topo.name),
        }
    if opts.gist is not None:
        if opts.spec is not None:
            return {
                "subnets": opts.gist.subnets, "local_iters": opts.gist.local_iters,
                "group_algo": "minibatch", **opts.spec.as_dict(),
                "graph_layout": opts.graph_layout,
            }
        return {
            "subnets": opts.gist.subnets, "local_iters": opts.gist.local_iters,
            "group_algo": opts.algo,
        }
    if opts.label == "halo":
        return {"exchange": opts.exchange, "topology": opts.topology or (topo and topo.name)}
    return {}


def device_section(grid: ProcessGrid) -> dict:
    """The ``device`` section: the kind, the GPU's model on cuda (rank 0's).

    ``emulated: true`` on the emulated GPU (:mod:`hpcgnn.backend.emulation`).
    """
    dev = grid.device
    return {
        "kind": dev.kind, **({"name": dev.name} if dev.is_cuda else {}),
        **({"emulated": True} if dev.emulated else {}),
    }


def wire_section(grid: ProcessGrid) -> dict:
    """How buffers reached MPI (``comm.path``, per category) and the staging bytes.

    Collective: the categories' paths are joined over ranks; ``staged_bytes`` is summed
    over ranks and categories, for the whole run after setup (training and evaluation).
    """
    paths: dict[str, set[str]] = {}
    for rank_paths in grid.world.allgather_obj(grid.stats.paths):
        for cat, p in rank_paths.items():
            paths.setdefault(cat, set()).update(p)
    staged = grid.world.allreduce_scalar(sum(grid.stats.staged.values()))
    return {
        "path": grid.wire.path,
        "path_reason": grid.wire.reason,
        "paths": {k: "+".join(sorted(v)) for k, v in sorted(paths.items())},
        "staged_bytes": staged,
    }


def _report(
    opts: RunOptions, cfg: TrainConfig, grid: ProcessGrid, meta: GraphMeta,
    trainer: Trainer, result: TrainResult, topo: Topology | None,
) -> None:
    """Ask the mode for its prediction and sections, then write the report (collective)."""
    measured = summed_over_ranks(grid.world, result.per_epoch(result.step_bytes))
    phases_sum = summed_over_ranks(grid.world, result.per_epoch(result.step_seconds))
    phases = {k: v / grid.size for k, v in phases_sum.items()}
    predicted, sections, lines = trainer.summary(result, measured, phases, opts.tier_gbps)
    busiest = max_over_ranks(grid.world, result.per_epoch(result.step_bytes))
    sections = {
        **sections, "device": device_section(grid),
        "comm": {**sections.get("comm", {}), "busiest_rank_bytes": busiest,
                 **wire_section(grid)},
    }
    config = {
        **cfg.as_dict(), "algo": opts.label, "grid": str(grid.shape), "graph": opts.graph,
        "mode": opts.mode, **_mode_config(opts, grid, topo),
    }
    finish_run(
        grid, result, config=config, meta=meta, measured=measured, phases=phases,
        predicted=predicted, sections=sections, lines=lines, metrics=opts.metrics,
        trace=opts.trace,
    )
