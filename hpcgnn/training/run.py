"""Orchestration of one training run, every mode (what ``hpcgnn train`` does).

Grid, the graph file's structural checks (:func:`hpcgnn.graph.check.check_graph`), the
memory check, the mode's trainer (:mod:`hpcgnn.training.modes`), resume, the one epoch loop
(:func:`hpcgnn.training.loop.run_epochs`), checkpoints and the report
(:func:`hpcgnn.training.report.finish_run`). What differs between modes is the mode's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch
from mpi4py import MPI

from hpcgnn.comm.collective import collective
from hpcgnn.comm.memory import MemoryPeaks, check_memory, memory_section
from hpcgnn.comm.node import host_cores
from hpcgnn.config import TrainConfig, check_loss, check_types
from hpcgnn.cost.ranking import cost_problem, grid_note
from hpcgnn.errors import ConfigError
from hpcgnn.graph.check import check_graph
from hpcgnn.grid.device import choose_device
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.memory import MemoryGraph, open_graph
from hpcgnn.kernels.prepare import prepare_kernels
from hpcgnn.kinds import Layer
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.trace import check_layer
from hpcgnn.nn.optim import load_optimizer_libraries
from hpcgnn.training.checkpoint import GRAPH_CONTENT, load_checkpoint, state_bytes_bound
from hpcgnn.training.csv_log import CsvLog
from hpcgnn.training.loop import (
    EpochRecord,
    KeptWeights,
    Trainer,
    TrainResult,
    WholeModel,
    run_epochs,
)
from hpcgnn.training.modes import MODES
from hpcgnn.training.modes.base import Mode, Setup
from hpcgnn.training.modes.fullbatch import FullBatchMode
from hpcgnn.training.predict import TRAINING_ONLY, write_predictions
from hpcgnn.training.report import finish_run, max_over_ranks, summed_over_ranks
from hpcgnn.utils.files import check_directory, check_output
from hpcgnn.utils.progress import Step

#: Largest ``threads`` (torch's thread pool fails on absurd counts without a word).
MAX_THREADS = 4096
#: The ``algo`` labels whose checkpoints resume one another's at any rank count
#: (:attr:`~hpcgnn.training.modes.base.Mode.elastic_labels`: the full-batch layouts and
#: HongTu's offload; a GIST checkpoint resumes at any rank count when both runs' groups
#: run one of them, :func:`~hpcgnn.training.checkpoint.load_checkpoint`).
ELASTIC = frozenset().union(*(mode.elastic_labels for mode in MODES.values()))
#: The options that name a file or a directory (an empty one is refused).
PATHS = ("metrics", "trace", "checkpoint_dir", "resume", "log_csv", "finetune")


@dataclass
class RunOptions:
    """Everything ``hpcgnn train`` needs besides the model hyper-parameters.

    ``mode``: the mode and its options (:mod:`hpcgnn.training.modes`); the rest is every
    mode's: the graph, the outputs, checkpoints, the device. Checked when made
    (:class:`~hpcgnn.errors.ConfigError`).
    """

    #: The graph file's path, or a graph in memory (full-batch modes only).
    graph: str | MemoryGraph
    mode: Mode = field(default_factory=FullBatchMode)
    metrics: str | None = None
    trace: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    resume: str | None = None
    quiet: bool = False
    tier_gbps: dict[str, float] | None = None
    device: str | None = None
    #: ``--finetune``: start from this checkpoint's weights (any settings; a new optimiser).
    finetune: str | None = None
    #: ``--log-csv``: one CSV row per epoch, appended as training runs (rank 0).
    log_csv: str | None = None
    #: ``--trace-epochs``: the 1-based epochs ``(first, last)`` the trace records (``None``:
    #: every epoch).
    trace_epochs: tuple[int, int] | None = None
    #: ``hpcgnn predict``: write the logits of the model in ``resume`` here instead of
    #: training (:mod:`hpcgnn.training.predict`).
    predict_out: str | None = None
    #: ``--sync-comm``: time each collective's wait for its ranks apart (``wait``).
    sync_comm: bool = False
    #: ``hpcgnn.train``: the result carries the metrics document and the trained weights,
    #: whole, on every rank (``TrainResult.metrics``, ``TrainResult.weights``).
    keep_result: bool = False
    #: ``--threads``: torch's intra-op threads in this process (``None``: torch's choice).
    threads: int | None = None
    #: The set-up line and the summary lines (rank 0); ``hpcgnn.train(quiet=True)`` prints
    #: none, as it prints no per-epoch lines.
    summary: bool = True

    def __post_init__(self) -> None:
        check_types(self)
        if not isinstance(self.graph, (str, MemoryGraph)):
            raise ConfigError(f"graph: a graph file's path or a hpcgnn.io.memory.MemoryGraph,"
                              f" not {type(self.graph).__name__}")
        if isinstance(self.graph, MemoryGraph) and not isinstance(self.mode, FullBatchMode):
            raise ConfigError(f"a graph in memory trains in FullBatchMode (any algo); the"
                              f" {self.mode.name} mode reads a graph file: write it with"
                              " hpcgnn prepare, or train it from its file")
        if self.threads is not None and not 1 <= self.threads <= MAX_THREADS:
            raise ConfigError(f"--threads must be in [1, {MAX_THREADS}], got {self.threads}")
        for name in PATHS:
            if getattr(self, name) == "":  # a path left empty by a script's unset variable
                raise ConfigError(f"--{name.replace('_', '-')}: an empty path")
        if self.trace_epochs is not None:
            if not self.trace:
                raise ConfigError("--trace-epochs needs --trace")
            window = tuple(self.trace_epochs)
            if len(window) != 2 or any(type(e) is not int for e in window) or not (
                1 <= window[0] <= window[1] < 2**63
            ):
                raise ConfigError(f"--trace-epochs: expected the epochs (A, B) with"
                                  f" 1 <= A <= B, got {self.trace_epochs}")
        if self.finetune and self.resume:
            raise ConfigError("--finetune starts a new run from a checkpoint's weights;"
                              " --resume continues one: give one of them")
        if self.checkpoint_every < 0:
            raise ConfigError(f"--checkpoint-every must be >= 0, got {self.checkpoint_every}")
        if self.checkpoint_every and not self.checkpoint_dir:
            raise ConfigError("--checkpoint-every needs --checkpoint-dir")


def configure(
    graph: str | MemoryGraph, mode: Mode, settings: Mapping[str, Any], layer: Layer | None = None
) -> tuple[TrainConfig, RunOptions]:
    """The run's :class:`~hpcgnn.config.TrainConfig` and :class:`RunOptions` from its settings.

    ``settings``: every setting by its name, which is the field's (``hpcgnn.train``'s
    keywords, the ``train`` flags' destinations); names of neither are not read (the
    command's other flags). ``layers`` goes through the mode's :meth:`~Mode.depth`, a
    missing ``model`` is the mode's default, ``layer`` is a researcher's own layer object.
    Values arrive converted (paths as text, the tiers as a mapping).
    """
    own = {"layers", "model", "layer", "graph", "mode"}
    cfg = TrainConfig(
        layers=mode.depth(settings.get("layers")),
        model=settings.get("model") or mode.default_model, layer=layer,
        **{f.name: settings[f.name] for f in fields(TrainConfig)
           if f.name in settings and f.name not in own},
    )
    opts = RunOptions(graph=graph, mode=mode, **{
        f.name: settings[f.name] for f in fields(RunOptions)
        if f.name in settings and f.name not in own
    })
    return cfg, opts


def train(opts: RunOptions, cfg: TrainConfig, comm: MPI.Comm = MPI.COMM_WORLD) -> TrainResult:
    """Run one training job on ``comm``; every rank returns the same result.

    With ``opts.predict_out`` the model of the checkpoint ``opts.resume`` writes its
    logits there instead (``hpcgnn predict``), and the result holds no epochs.
    ``opts.threads`` sets torch's threads of this process first.
    """
    if opts.threads is not None:
        torch.set_num_threads(opts.threads)
    load_optimizer_libraries()  # a library's memory before the start mark, not the run's
    opts = replace(opts, mode=opts.mode.for_run(cfg, comm.Get_size()))
    cfg = opts.mode.resolve(cfg, comm.Get_size())
    if cfg.select_model == "best" and opts.mode.sharded_checkpoints:
        raise ConfigError(
            f"--select-model best keeps a copy of the whole model, which {opts.mode.where}"
            " never holds (its rows are sharded over the ranks): use --select-model last"
        )
    shape = opts.mode.grid_shape(comm.Get_size())
    grid = ProcessGrid(comm, shape, device=choose_device(comm, opts.device, prepare_kernels))
    try:
        return _train_on_grid(opts, cfg, grid)
    finally:
        grid.free()


def _check_outputs(opts: RunOptions, grid: ProcessGrid) -> None:
    """Outputs fail now, not after training (rank 0's; every rank's sharded checkpoints)."""
    if grid.rank == 0:
        for flag, path in (("--metrics", opts.metrics), ("--trace", opts.trace),
                           ("--log-csv", opts.log_csv)):
            if path:
                check_output(path, flag)
    if opts.checkpoint_dir and (grid.rank == 0 or opts.mode.sharded_checkpoints):
        check_directory(opts.checkpoint_dir, "--checkpoint-dir")
    if opts.predict_out and grid.rank == 0:
        check_output(opts.predict_out, "--out")


def _train_on_grid(opts: RunOptions, cfg: TrainConfig, grid: ProcessGrid) -> TrainResult:
    mode, root = opts.mode, grid.rank == 0
    peaks = MemoryPeaks()
    peaks.mark("start", grid.device)  # the process before the run: libraries, MPI, device
    say = (lambda *a: print(*a, flush=True)) if root and opts.summary else (lambda *a: None)
    with collective(grid.world):
        with open_graph(opts.graph) as gf:
            meta = gf.meta
        _check_outputs(opts, grid)
        mode.check_graph(meta)
        check_loss(cfg.loss, meta.multi_label)
        # the layer's forward on shapes: a layer that cannot run these widths stops here
        check_layer(layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers),
                    cfg.kind)
    # the file's structure before any model, and its content fingerprint (checkpoints are
    # bound to it; the metrics record it): each rank reads 1/P of the file
    verb = "predict" if opts.predict_out else "train"
    with Step(f"hpcgnn {verb}: checking {opts.graph}", enabled=root and opts.summary):
        content = check_graph(grid.world, opts.graph, True)
    need = mode.memory(cfg, meta, grid.shape)
    check_memory(grid.world, need.bytes, (
        f"{mode.label} on grid {need.shape} ({meta.num_features} features, hidden"
        f" {need.hidden}, {meta.num_classes} classes, {cfg.layers} layers)"
    ))
    setup = Setup(opts.graph, grid, cfg, meta, mode.link_topology(grid), need.bytes,
                  opts.tier_gbps)
    t0 = grid.stats.clock()
    with Step(f"hpcgnn {verb}: setting up {mode.label} on {grid.size} ranks",
              enabled=root and opts.summary):
        trainer = mode.build(setup)
    setup_s = grid.stats.clock() - t0
    kept: KeptWeights | None = None
    if cfg.select_model == "best" and not opts.predict_out:
        assert isinstance(trainer, WholeModel)  # a sharded model is refused in train()
        kept = trainer.keep_best()
    cfg = mode.schedule(cfg, trainer)  # GIST: the rounds of its epoch budget
    setup = replace(setup, cfg=cfg)
    note = grid_note(cost_problem(meta, cfg, meta.partition_offsets), grid.shape)
    notes = f" | note: {note}" if note else ""
    if grid.device.is_cuda or grid.wire.stage_host:  # how device buffers reach MPI, and why
        notes += f" | MPI buffers {grid.wire.path} ({grid.wire.reason})"
    say(
        f"hpcgnn {'predict' if opts.predict_out else 'train'}: {meta.name or opts.graph}:"
        f" {meta.num_nodes} vertices,"
        f" {meta.num_edges} edges, {meta.num_features} features, {meta.num_classes} classes"
        f" | {mode.describe(setup, trainer)} grid {grid.shape}"
        f" on {grid.size} ranks ({grid.device.name}) | setup {setup_s:.2f} s{notes}"
    )
    c = cfg.as_dict()
    # a resumed run may train longer, evaluate otherwise, hold its features otherwise
    for key in ("epochs", "eval_every", "sparse_features", "early_stopping"):
        c.pop(key)
    fingerprint = {
        **c, "algo": mode.label, "grid": str(grid.shape), "num_nodes": meta.num_nodes,
        "num_edges": meta.num_edges, GRAPH_CONTENT: content, **mode.fingerprint(setup),
    }
    start_epoch, history = 0, []
    bound = state_bytes_bound(meta.num_features, meta.num_classes, cfg)  # a checkpoint's
    if opts.resume:
        more = None if opts.predict_out else cfg.epochs
        ignore = TRAINING_ONLY if opts.predict_out else ()
        state = load_checkpoint(opts.resume, grid.world, fingerprint, more, ignore, bound,
                                elastic=ELASTIC)
        trainer.restore_checkpoint(state, opts.resume)
        start_epoch = int(state["epoch"])
        history = [EpochRecord(**rec) for rec in state["history"]]
        say(f"{'the model of' if opts.predict_out else 'resumed from'} {opts.resume}"
            f" after epoch {start_epoch}")
    if opts.finetune:
        state = load_checkpoint(opts.finetune, grid.world, None, None, max_bytes=bound)
        trainer.load_weights(state, opts.finetune)
        say(f"fine-tuning the weights of {opts.finetune} (after its epoch {state['epoch']})"
            " with a new optimiser")
    if opts.predict_out:
        try:
            rows = write_predictions(opts.predict_out, grid.world, meta, *trainer.predictions())
        finally:
            trainer.free()
        say(f"predictions of the model after epoch {start_epoch}: {rows} vertices x"
            f" {meta.num_classes} logits written to {opts.predict_out}")
        return TrainResult(epochs=history)

    def progress(rec: EpochRecord) -> None:
        if root and not opts.quiet:
            acc = ""
            if rec.train_acc is not None:
                acc = f" | train {rec.train_acc:.4f} val {rec.val_acc:.4f}"
            share = 100.0 * rec.comm_s / rec.time_s if rec.time_s > 0 else 0.0
            print(
                f"{mode.step_name} {rec.epoch:5d} | loss {rec.loss:.4f}{acc}"
                f" | {rec.time_s * 1e3:9.1f} ms"
                f" | comm {share:4.1f}%",
                flush=True,
            )

    log: CsvLog | None = None
    if opts.log_csv:
        with collective(grid.world):
            if root:
                log = CsvLog(opts.log_csv, history)

    def checkpoint(done: int, result: TrainResult) -> None:
        if opts.log_csv:
            with collective(grid.world):  # a full disk on rank 0 stops every rank
                if log is not None:
                    log.write(result.epochs[-1])
        every, directory = opts.checkpoint_every, opts.checkpoint_dir
        last = done == cfg.epochs or done == result.stopped_after
        if directory and ((every and done % every == 0) or last):
            history = [e.as_dict() for e in result.epochs]
            trainer.save_checkpoint(directory, done, history, fingerprint)

    peaks.mark("setup", grid.device)  # the graph's checks, the model built, a checkpoint read
    grid.world.barrier()
    grid.stats.reset()
    grid.stats.tracing = bool(opts.trace)
    grid.stats.sync_waits = opts.sync_comm

    def trace_window(number: int) -> None:
        window = opts.trace_epochs
        if opts.trace and window is not None:
            grid.stats.tracing = window[0] <= number <= window[1]
    try:
        result = run_epochs(
            trainer, cfg, progress, start_epoch=start_epoch, history=history,
            after_epoch=checkpoint, before_epoch=trace_window, kept=kept,
            say_steps=root and opts.summary, memory=peaks,
        )
        result.metrics = _report(opts, setup, trainer, result, content)
        if opts.keep_result:  # GIST: gathers its row shards (collective)
            result.weights = [w.detach().cpu().clone() for w in trainer.weights]
    finally:
        trainer.free()
        if log is not None:
            log.close()
    return result


def device_section(grid: ProcessGrid) -> dict:
    """The ``device`` section: the kind, the GPU's model on cuda (rank 0's), the cores.

    ``emulated: true`` on the emulated GPU (:mod:`hpcgnn.backend.emulation`);
    ``ranks_per_host`` and ``cores_per_host`` of the host with the fewest cores per rank,
    and ``oversubscribed: true`` where it has fewer cores than ranks (its communication
    times include waiting for a core). Collective.
    """
    dev = grid.device
    hosts, cores = host_cores(grid.world)
    host = min(cores, key=lambda h: cores[h] / hosts.count(h))
    ranks = hosts.count(host)
    return {
        "kind": dev.kind, **({"name": dev.name} if dev.is_cuda else {}),
        **({"emulated": True} if dev.emulated else {}),
        "ranks_per_host": ranks, "cores_per_host": cores[host],
        **({"oversubscribed": True} if ranks > cores[host] else {}),
    }


def wire_section(grid: ProcessGrid) -> dict:
    """How buffers reached MPI (``comm.path``, per category) and the staging bytes.

    Collective: the categories' paths are joined over ranks; ``staged_bytes`` is summed
    over ranks and categories, for the whole run after setup (training and evaluation),
    and ``method_bytes`` (where messages named their pair's method: a planned halo) the
    bytes per category and method, summed over ranks, over the same span.
    """
    paths: dict[str, set[str]] = {}
    methods: dict[str, dict[str, int]] = {}
    for rank_paths, rank_methods in grid.world.allgather_obj(
        (grid.stats.paths, grid.stats.methods)
    ):
        for cat, p in rank_paths.items():
            paths.setdefault(cat, set()).update(p)
        for cat, split in rank_methods.items():
            summed = methods.setdefault(cat, {})
            for m, b in split.items():
                summed[m] = summed.get(m, 0) + b
    staged = grid.world.allreduce_scalar(sum(grid.stats.staged.values()))
    return {
        "path": grid.wire.path,
        "path_reason": grid.wire.reason,
        "paths": {k: "+".join(sorted(v)) for k, v in sorted(paths.items())},
        "staged_bytes": staged,
        **({"method_bytes": dict(sorted(methods.items()))} if methods else {}),
    }


def _report(
    opts: RunOptions, setup: Setup, trainer: Trainer, result: TrainResult, content: str | None,
) -> dict[str, Any] | None:
    """Ask the trainer for its prediction and sections, then write the report (collective).

    Returns the metrics document on every rank with ``opts.keep_result``, else ``None``.
    """
    grid, cfg, mode = setup.grid, setup.cfg, opts.mode
    measured = summed_over_ranks(grid.world, result.per_epoch(result.step_bytes))
    phases_sum = summed_over_ranks(grid.world, result.per_epoch(result.step_seconds))
    phases = {k: v / grid.size for k, v in phases_sum.items()}
    predicted, sections, lines = trainer.summary(result, measured, phases, opts.tier_gbps)
    after_first = result.seconds_after_first()  # the same step count on every rank
    if after_first is not None:
        steady = summed_over_ranks(grid.world, after_first)
        sections = {**sections, "time": {**sections.get("time", {}), "phases_after_first": {
            k: v / grid.size for k, v in steady.items()}}}
    busiest = max_over_ranks(grid.world, result.per_epoch(result.step_bytes))
    sections = {
        **sections, "device": device_section(grid),
        "comm": {**sections.get("comm", {}), "busiest_rank_bytes": busiest,
                 **wire_section(grid)},
        "memory": memory_section(grid.world, result.memory, setup.memory_bytes or None),
    }
    config = {
        **cfg.as_dict(), "algo": mode.label, "grid": str(grid.shape),
        "graph": setup.meta.path if isinstance(opts.graph, MemoryGraph) else opts.graph,
        "mode": mode.name, **mode.config(setup), "sync_comm": opts.sync_comm,
    }
    return finish_run(
        grid, result, config=config, meta=setup.meta, measured=measured, phases=phases,
        predicted=predicted, sections=sections, lines=lines, metrics=opts.metrics,
        trace=opts.trace, step_name=mode.step_name, content=content, share=opts.keep_result,
        summary=opts.summary,
    )
