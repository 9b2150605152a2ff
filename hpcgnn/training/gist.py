"""GIST: independent sub-GCN training on rank groups, for models wider than a rank holds.

The ``P`` ranks form ``M`` groups of ``P / M`` (group ``m``: world ranks
``m P/M .. (m+1) P/M - 1``, root the first; where ``M`` does not divide ``P``, consecutive
groups whose sizes differ by one, the larger first: full-batch groups only; where
``M > P``, groups of one rank, a rank hosting several sub-networks, which it trains one
after the other: :class:`~hpcgnn.layout.subnets.Placement`). A *round* (one epoch of the
loop):

1. every hidden dimension of the global model is split at random into ``M`` disjoint
   groups (:func:`hpcgnn.layout.subnets.subnets`, the same on every rank);
2. the owners of the global weights' rows send each sub-model (weights and Adam moments)
   to its group (:meth:`hpcgnn.exchange.subnets.SubnetShards.scatter`);
3. group ``m`` trains sub-GCN ``m`` for ``K`` local iterations with the full-batch
   algorithm of ``--algo`` on its own process grid: its trainer
   (:class:`~hpcgnn.training.submodel.SubModelHost`) loads the sub-weights into the one
   model of :mod:`hpcgnn.models`, with an Adam whose state is the sub-model's moments
   (step count: the iterations run so far), trains and unloads them;
4. the roots send the trained sub-models back to the owners
   (:meth:`~hpcgnn.exchange.subnets.SubnetShards.write_back`).

``--epochs E`` is the budget of a baseline trained alone, split across the sub-GCNs as in
the paper: ``R = ceil(E S / (M K))`` rounds, so each trains ``R K / S >= E / M`` epochs of
work (``S``: a group's optimizer steps per epoch; :class:`GistBudget`); ``--rounds`` gives
``R`` instead. With ``--gist-rescale`` the merged model is evaluated with the weights that
read a split hidden dimension scaled by ``1 / M`` (:meth:`GistTrainer.merged_scales`).

Only sub-models travel; no rank ever holds the whole model. Evaluation runs the global
model where it lies, model-parallel over the row shards
(:class:`~hpcgnn.models.sharded.ShardedForward`, ``gist_eval``, outside the training
steps), ``params_sha256`` streams the shards through rank 0's hash
(:meth:`~hpcgnn.exchange.subnets.SubnetShards.digest`) and checkpoints write each rank's
rows to its own file (:func:`~hpcgnn.training.checkpoint.save_sharded_checkpoint`), so a model
wider than any rank can hold trains, is evaluated and resumes. Dropout masks are the global
model's masks at each sub-network's column ids in step ``round K + k``, so with
``M = 1, K = 1`` GIST is ordinary full-batch training step for step.

Any layer trains (:class:`~hpcgnn.kinds.Layer`; ``--model MODULE:CLASS``): the sub-weights
are cut by the shapes the layer declares (:func:`~hpcgnn.layout.subnets.model_params`:
each axis that follows a split hidden width keeps the sub-network's ids of it, so GIN's
``W_2`` and GCNII's convolution follow the hidden width they equal), a group trains the
same forward on its layout's primitives with them, and the evaluation runs that forward
too, on column blocks (:class:`~hpcgnn.models.sharded.ShardedPrimitives`).

With ``--sampler`` a group runs the minibatch pipeline instead
(:class:`~hpcgnn.training.minibatch.MinibatchTrainer` with the sub-model injected): ``K``
local iterations are its next ``K`` optimizer steps in a stream of minibatch epochs that
continues across rounds (every group walks epochs ``0, 1, ..`` of the shuffled training
set, :meth:`~hpcgnn.training.minibatch.MinibatchTrainer.stream`); the minibatch dropout
masks are the global model's at the sub-network's columns, and the sampled models'
biases are replicated (:class:`~hpcgnn.exchange.subnet_biases.SubnetBiases`), each after
its layer's last weight. The groups train the layers the minibatch mode runs. With ``M =
1`` and ``K`` the steps of an epoch, GIST is ``--mode minibatch`` step for step.

A layer may keep groups of a hidden width's columns together
(:meth:`~hpcgnn.kinds.Layer.width_groups`): GAT's heads. Each hidden layer's ``K`` heads
are split into ``M`` groups of whole heads (``M <= K``; :func:`check_gist`), so sub-GAT
``m`` is an ordinary GAT of its heads, whose attention is the merged model's for those
heads. The score vectors ``a_src, a_dst`` (whose rows follow no width) are replicated
like the sampled biases (``gist_attention``): a hidden layer's rows are its head's
sub-model's, the output layer's are every sub-model's and averaged after the round. A
sub-GAT draws the global model's attention dropout at its global head ids
(:meth:`hpcgnn.models.base.GCNModel.logits`). ``--gist-rescale`` is refused with a layer
that attends (the scaled weights would scale its scores too).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hpcgnn.backend import Device, get_device
from hpcgnn.config import TrainConfig
from hpcgnn.cost.gist import bias_bytes, round_bytes
from hpcgnn.errors import ConfigError, InputError
from hpcgnn.exchange.subnet_biases import ATTENTION, BIAS, SubnetBiases
from hpcgnn.exchange.subnets import EVAL, GATHER, SCATTER, SubnetShards
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphMeta
from hpcgnn.layout.blocks import even_offsets
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.shapes import GridShape
from hpcgnn.layout.subnets import (
    PARAM_KINDS,
    Placement,
    SubWeights,
    cut,
    merge,
    model_params,
    reads_split,
    split_block,
    stream_shapes,
    subnet_widths,
    subnets,
    vector_places,
)
from hpcgnn.layout.trace import ATTENTION as ATTENDS
from hpcgnn.layout.trace import uses
from hpcgnn.models.sharded import ShardedForward
from hpcgnn.nn.gcn import cross_entropy_sum, loss_terms
from hpcgnn.nn.init import glorot_shape_rows
from hpcgnn.training.checkpoint import restore_sharded, save_sharded_checkpoint
from hpcgnn.training.fullbatch import FullBatchTrainer, global_counts
from hpcgnn.training.gist_report import gist_report
from hpcgnn.training.loop import TrainResult
from hpcgnn.training.minibatch import MinibatchTrainer
from hpcgnn.utils.memory import current_rss_bytes

#: Rows of a weight drawn at once by the initialiser (its float64 draw stays small).
INIT_CHUNK = 1 << 20

#: The trainer of a group: full-batch (``--algo``) or minibatch (``--sampler``).
GroupTrainer = FullBatchTrainer | MinibatchTrainer

#: ``make_trainer(grid, cfg, weights)``: a group's trainer on ``grid`` with the injected
#: ``weights`` (the model of ``--algo``, or the sampled model of ``--sampler``).
TrainerFactory = Callable[[ProcessGrid, TrainConfig, list[torch.Tensor]], GroupTrainer]


@dataclass(frozen=True)
class GistOptions:
    """``--subnets M``, ``--local-iters K`` and ``--gist-rescale``.

    ``rescale``: the global model is evaluated (and predicts) with every weight that reads
    a split hidden dimension scaled by ``1 / M`` (:meth:`GistTrainer.merged_scales`).
    """

    subnets: int
    local_iters: int
    rescale: bool = False

    def __post_init__(self) -> None:
        if self.subnets < 1:
            raise ConfigError(f"--subnets must be >= 1, got {self.subnets}")
        if self.local_iters < 1:
            raise ConfigError(f"--local-iters must be >= 1, got {self.local_iters}")


@dataclass(frozen=True)
class GistBudget:
    """The rounds a run trains and each sub-GCN's share of the epochs.

    As in the paper, ``--epochs E`` is the budget of a baseline trained alone, split across
    the ``M`` sub-GCNs: each trains ``E / M`` epochs of work. An epoch of work is ``S``
    optimizer steps of a group: one full batch (``S = 1``), or with ``--sampler`` the
    group's steps over the training set. A round is ``K`` of those steps, so
    ``R = ceil(E S / (M K))`` (rounded up: at least the budget); ``--rounds R`` overrides.

    Attributes
    ----------
    epochs
        ``E`` the rounds were derived from; ``None`` when ``--rounds`` gave them.
    rounds
        ``R``.
    steps_per_epoch
        ``S``.
    local_iters
        ``K``.
    """

    epochs: int | None
    rounds: int
    steps_per_epoch: int
    local_iters: int

    @property
    def derived(self) -> bool:
        """Whether ``R`` was derived from ``--epochs`` (not given by ``--rounds``)."""
        return self.epochs is not None

    def epochs_of_work(self, rounds: int | None = None) -> float:
        """Epochs of work each sub-GCN trains in ``rounds`` rounds (default ``R``): ``R K / S``."""
        r = self.rounds if rounds is None else rounds
        return r * self.local_iters / self.steps_per_epoch

    def describe(self, subnets: int) -> str:
        """``R`` rounds and where they come from, for the run's first line."""
        each = f"{self.epochs_of_work():.4g} epochs of work per sub-model"
        source = "--rounds" if self.epochs is None else f"--epochs {self.epochs} / {subnets}"
        return f"{self.rounds} rounds ({source}: {each})"


def gist_budget(
    epochs: int, opts: GistOptions, steps_per_epoch: int, rounds: int | None = None
) -> GistBudget:
    """The rounds of the ``--epochs`` budget, or of ``--rounds`` (see :class:`GistBudget`).

    ``steps_per_epoch``: ``S``, a group's optimizer steps in an epoch of work.
    """
    if rounds is not None:
        return GistBudget(None, rounds, steps_per_epoch, opts.local_iters)
    per_round = opts.subnets * opts.local_iters
    return GistBudget(
        epochs, -(-epochs * steps_per_epoch // per_round), steps_per_epoch, opts.local_iters
    )


def check_gist(opts: GistOptions, cfg: TrainConfig, ranks: int) -> None:
    """Reject settings GIST cannot run, with one line (the same on every rank)."""
    m = opts.subnets  # M >= 1 and K >= 1: GistOptions
    if m > 1 and cfg.layers < 2:
        raise ConfigError(
            "--subnets > 1 needs --layers >= 2 (there is no hidden dimension to split)"
        )
    if cfg.hidden < m:
        raise ConfigError(f"--hidden {cfg.hidden} cannot be split into {m} non-empty groups")
    groups = cfg.kind.width_groups(cfg.hidden)
    if m > groups:
        raise ConfigError(
            f"--subnets {m} splits --model {cfg.kind}'s --hidden {cfg.hidden} into {m} groups"
            f" of its {groups} column groups kept whole (GAT: --heads {cfg.heads} attention"
            f" heads): it needs --subnets <= {groups}"
        )
    if opts.rescale and uses([cfg.hidden] * (cfg.layers + 1), cfg.kind, ATTENDS):
        raise ConfigError(
            f"--gist-rescale is not available with --model {cfg.kind} (scaling the weights by"
            " 1/M scales the attention scores too, which changes the merged model's attention)"
        )


class GistTrainer:
    """The :class:`~hpcgnn.training.loop.Trainer` of GIST: one round per epoch of the loop.

    Parameters
    ----------
    grid
        All ranks (a 1D grid; the global model's shards are split over it).
    cfg
        The global model's settings (``epochs``: the budget ``E``, unless ``rounds``).
    meta
        The graph's sizes.
    opts
        ``M`` and ``K``.
    group_shape
        The process grid of this rank's group (``--algo``, or the sampler's ``1.5d``, with
        ``--grid`` on its ranks: :attr:`group_sizes`).
    make_trainer
        Builds a group's trainer with injected weights: full-batch on the model of
        ``--algo``, or minibatch (``sampler`` given).
    sampler
        ``--sampler`` (the groups train the sampled models of
        :mod:`hpcgnn.models.minibatch`, which have biases), else ``None``.
    estimates
        Memory estimates per rank to report beside the measured peak:
        ``full_model_estimate_bytes`` (ordinary training of the global model) and
        ``gist_estimate_bytes`` (what the memory check allowed for this run).
    rounds
        ``--rounds`` (``None``: derived from ``cfg.epochs``, :class:`GistBudget`).

    Attributes
    ----------
    budget
        The rounds and each sub-GCN's epochs of work; ``cfg.epochs`` is its ``R``.
    """

    def __init__(
        self, grid: ProcessGrid, cfg: TrainConfig, meta: GraphMeta, opts: GistOptions,
        group_shape: GridShape, make_trainer: TrainerFactory,
        estimates: dict[str, float] | None = None, sampler: str | None = None,
        rounds: int | None = None,
    ) -> None:
        world = grid.world
        self.memory_at_start = current_rss_bytes()
        self.grid, self.world, self.cfg, self.opts = grid, world, cfg, opts
        self.meta, self.estimates = meta, dict(estimates or {})
        m = opts.subnets
        placement = Placement.of(world.size, m)
        #: Ranks of each group: ``P / M``, or differing by one where ``M`` does not divide
        #: ``P``; one each when ``M > P`` (a rank hosts several sub-networks).
        self.group_sizes = list(placement.sizes)
        self.roots = list(placement.roots)
        #: The sub-networks this rank's group trains, in order (several only when ``M > P``).
        self.mine = placement.hosted(world.rank)
        self.group_size = self.group_sizes[self.mine[0]]
        self.widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        self.sampler = sampler
        #: The model's parameters and how a sub-network cuts them (its declared weights).
        self.params = model_params(self.widths, cfg.kind, biased(cfg, sampler))
        #: Hidden ids kept together (GAT: a head's units) and each sub-network's width.
        self.block = split_block(cfg.kind, cfg.hidden)
        self.hidden = subnet_widths(cfg.kind, cfg.hidden, m)
        split = world.mpi.Split(self.mine[0], world.rank)
        try:
            self.group_grid = ProcessGrid(split, group_shape, stats=grid.stats, device=grid.device)
        finally:
            split.Free()
        self.shards = self._initial_shards()
        #: The replicated parameters: the sampled biases, GAT's score vectors.
        self.vectors = self._initial_vectors()
        #: A group trainer per width of this rank's sub-networks (at most two: the widths
        #: differ by one block); one trains each of its width's sub-networks in turn.
        self.trainers: dict[int, GroupTrainer] = {}
        for width in dict.fromkeys(self.hidden[i] for i in self.mine):
            sub_cfg = sub_config(cfg, width)
            sub_widths = layer_sizes(meta.num_features, width, meta.num_classes, cfg.layers)
            sub_params = model_params(sub_widths, sub_cfg.kind, biased(cfg, sampler))
            zeros = _tensors([np.zeros(p.shape, dtype=cfg.numpy_dtype) for p in sub_params],
                             True, self.group_grid.device)
            self.trainers[width] = make_trainer(self.group_grid, sub_cfg, zeros)
            # between rounds the group's model holds empty weights: the sub-model lives in
            # the round's buffer (weights, moments) and is freed with it
            self.trainers[width].release()
            del zeros
        self.budget = gist_budget(cfg.epochs, opts, self._steps_per_epoch(), rounds)
        self.cfg = dataclasses.replace(cfg, epochs=self.budget.rounds)
        #: The train-set loss of the global model evaluated after each round (by number).
        self.merged_losses: dict[int, float] = {}
        self.steps_done = 0
        self.predicted_rounds: list[dict[str, float]] = []
        self.measured_rounds: list[dict[str, float]] = []
        self._forward: ShardedForward | None = None
        self.eval_measured: list[float] = []

    @property
    def inner(self) -> GroupTrainer:
        """The trainer of this rank's first sub-network (what the run's lines describe)."""
        return self.trainers[self.hidden[self.mine[0]]]

    def _steps_per_epoch(self) -> int:
        """``S``: a group's optimizer steps in an epoch of work (full batch: one)."""
        if isinstance(self.inner, MinibatchTrainer):
            return self.inner.batching()["optimizer_steps_per_epoch"]
        return 1

    def merged_scales(self) -> list[float] | None:
        """The factor of each row-sharded weight in the evaluated model (``None``: all 1).

        With ``--gist-rescale``: ``1 / M`` for every weight that reads a hidden dimension
        split across the sub-GCNs (:func:`~hpcgnn.layout.subnets.reads_split`), else 1.
        The shards (training, checkpoints, ``params_sha256``) are never scaled.
        """
        if not self.opts.rescale:
            return None
        m = self.opts.subnets
        return [1.0 / m if split else 1.0 for split in reads_split(self.params, self.widths)]

    def _initial_vectors(self) -> SubnetBiases | None:
        """The replicated parameters (:class:`SubnetBiases`), or none.

        The sampled biases (zeros); a layer's replicated weights (GAT's score vectors) the
        serial run's draws.
        """
        cfg, params = self.cfg, [p for p in self.params if not p.sharded]
        if not params:
            return None
        streams = stream_shapes(self.params)
        initial = [
            np.zeros(p.shape, cfg.numpy_dtype) if p.stream is None else glorot_shape_rows(
                streams[p.stream], cfg.seed + p.stream, p.index, 0, int(p.shape[0]),
                cfg.numpy_dtype,
            ) for p in params
        ]
        return SubnetBiases(self.world, params, self.widths, cfg.numpy_dtype, initial=initial)

    def _vector_values(self) -> list[np.ndarray] | None:
        """The replicated parameters' values in the model's order (``None``: there are none)."""
        return None if self.vectors is None else self.vectors.values[0]

    def _initial_shards(self) -> SubnetShards:
        """This rank's rows of the Glorot weights (the serial run's) and zero moments.

        Each row-sharded weight's rows from its stream (:func:`hpcgnn.nn.init.init_weights`:
        ``seed + stream``, the stream's matrices in the model's order), drawn in chunks of
        rows (:data:`INIT_CHUNK` entries), so the float64 draw never doubles a wide
        weight's memory.
        """
        cfg, r = self.cfg, self.world.rank
        params = [p for p in self.params if p.sharded]
        shapes = [p.shape for p in params]
        streams = stream_shapes(self.params)
        offsets = SubnetShards.offsets_of(shapes, self.world.size)
        weights = []
        for p, off in zip(params, offsets, strict=True):
            lo, hi = int(off[r]), int(off[r + 1])
            cols = int(p.shape[1])
            rows = np.empty((hi - lo, cols), dtype=cfg.numpy_dtype)
            step = max(1, INIT_CHUNK // max(1, cols))
            for a in range(lo, hi, step):
                b = min(hi, a + step)
                assert p.stream is not None
                rows[a - lo : b - lo] = glorot_shape_rows(
                    streams[p.stream], cfg.seed + p.stream, p.index, a, b, cfg.numpy_dtype
                )
            weights.append(rows)
        moments = [[np.zeros_like(a) for a in weights] for _ in PARAM_KINDS[1:]]
        return SubnetShards(self.world, shapes, [weights, *moments])

    @property
    def weights(self) -> list[torch.Tensor]:
        """The global model, whole (collective: every rank gathers every shard).

        For tests and small models: a run itself never assembles the model (see
        :meth:`evaluate`, :meth:`params_digest`, :meth:`save_checkpoint`).
        """
        weights = self.shards.full_weights()
        return _tensors(merge(self.params, weights, self._vector_values()), False)

    def params_digest(self) -> str:
        """``params_sha256`` of the global model, streamed through rank 0 (collective)."""
        return self.shards.digest(biases=self._vector_values(),
                                  places=vector_places(self.params))

    def _shard_shapes(self) -> list[tuple[int, int]]:
        return [tuple(w.shape) for _, w in self.shards.weight_shards()]

    def save_checkpoint(
        self, directory: str | os.PathLike, epoch: int, history: list[dict],
        fingerprint: dict[str, Any],
    ) -> None:
        """Every rank writes its rows of the weights and moments (collective).

        With ``--sampler`` the biases (GAT: the score vectors) and their moments
        (replicated) follow the weights in every rank's file, as more "weights" of each kind.
        """
        shards = self.shards.shards
        if self.vectors is not None:
            shards = [w + b for w, b in zip(shards, self.vectors.values, strict=True)]
        save_sharded_checkpoint(
            directory, self.world, epoch=epoch, shards=shards,
            adam_step=self.steps_done, history=history, fingerprint=fingerprint,
        )

    def restore_checkpoint(self, state: dict, directory: str | os.PathLike) -> None:
        """Read this rank's rows and the Adam step count of ``state`` (collective)."""
        want = int(state["epoch"]) * self.opts.local_iters
        if state.get("adam_step", want) != want:
            raise InputError(
                f"checkpoint in {directory}: Adam step {state['adam_step']} after round"
                f" {state['epoch']} of {self.opts.local_iters} local iterations (want {want})",
                collective=True,
            )
        self._take(self._read(state, directory))
        self.steps_done = want  # a sampled group's batch stream goes on from its step

    def _read(self, state: dict, directory: str | os.PathLike) -> list[list[np.ndarray]]:
        """This rank's rows (then the vectors) of every kind in a checkpoint of any ``P``."""
        vectors = [] if self.vectors is None else [b.shape for b in self.vectors.values[0]]
        return restore_sharded(state, directory, self.world, self.shards.shapes, vectors,
                               self.shards.shards[0][0].dtype, SubnetShards.offsets_of)

    def _take(self, kinds: list[list[np.ndarray]]) -> None:
        """The rows (and vectors) of every kind, :func:`restore_sharded`'s order."""
        n = len(self._shard_shapes())
        self.shards.shards = [kind[:n] for kind in kinds]
        if self.vectors is not None:
            self.vectors.values = [kind[n:] for kind in kinds]

    def load_weights(self, state: dict, directory: str | os.PathLike) -> None:
        """Start from a GIST checkpoint's weights alone (``--finetune``; collective).

        The checkpoint must be a GIST run's with the same widths, on any number of ranks
        (each rank reads the rows it holds now; ``--subnets``, ``--local-iters``, the learning rate,
        epochs and masks may differ); the Adam moments start at zero and the rounds at the
        first, as a new run. A replicated model's checkpoint (another mode) is refused in
        one line: its weights are not split into this run's rows.
        """
        rng = torch.get_rng_state()  # the checkpoint's RNG state is the old run's
        kinds = self._read(state, directory)
        torch.set_rng_state(rng)
        self._take([kinds[0], *([np.zeros_like(a) for a in kinds[0]] for _ in kinds[1:])])
        self.steps_done = 0

    def step(self, epoch: int) -> float:
        """One round, the paper's four steps; this rank's share of the round's loss.

        The shares sum over all ranks to the mean over groups of each group's mean loss.
        """
        cfg, k, m = self.cfg, self.opts.local_iters, self.opts.subnets
        before = _gist_bytes(self.world.stats)
        # 1. every hidden dimension split at random into M disjoint groups
        nets = subnets(cfg.seed, epoch, self.widths, m, self.block)  # GAT: whole heads
        group = self.group_grid.world
        cuts = [cut(self.params, n) for n in nets]  # each weight's rows and columns
        # 2. the owners of the global rows send each sub-model to its group
        subs = self.shards.scatter(cuts, self.roots, group, self.mine)
        dev, share = self.group_grid.device, 0.0
        trained: list[tuple[int, list[list[np.ndarray]], list[list[np.ndarray]] | None]] = []
        for index, sub in zip(self.mine, subs, strict=True):
            net = nets[index]
            vec = None if self.vectors is None else self.vectors.select(net)
            buffers = [  # weights, exp_avg, exp_avg_sq in the model's order, trained in place
                merge(self.params, w, None if vec is None else vec[i]) for i, w in enumerate(sub)
            ]
            # 3. the group trains its sub-model for K local iterations (a rank hosting
            # several sub-networks trains them one after the other)
            inner = self.trainers[self.hidden[index]]
            inner.load(
                _tensors(buffers[0], True, dev),
                (_tensors(buffers[1], False, dev), _tensors(buffers[2], False, dev)),
                self.steps_done, net,
            )
            share += inner.train(k) / m
            for bufs, out in zip(buffers, inner.unload(), strict=True):
                for buf, t in zip(bufs, out, strict=True):  # CPU: views of buf, a no-op
                    np.copyto(buf, dev.to_host(t))
            del out, buffers
            trained.append((index, sub, vec))
        del subs
        roots = trained if group.rank == 0 else []
        # 4. the roots send the trained sub-models back to the owners
        flat = self.shards.pack_trained(cuts, [(i, sub) for i, sub, _ in roots])
        self.shards.write_back(cuts, self.roots, flat)
        del flat
        if self.vectors is not None:
            self.vectors.write_back(m, [(nets[i], v) for i, _, v in roots if v is not None])
        del trained, roots
        self.steps_done += k
        self._account(cuts, before)
        return share

    def _account(self, nets: list[SubWeights], before: dict[str, float]) -> None:
        """The round's predicted and measured sub-model bytes."""
        cfg = self.cfg
        predicted = round_bytes(
            nets, self.shards.offsets, self.roots, self.group_sizes, cfg.itemsize
        )
        if self.vectors is not None:
            for category in self.vectors.categories:
                predicted[category] = bias_bytes(
                    self.vectors.sizes_of(category), self.world.size, cfg.itemsize
                )
        self.predicted_rounds.append(predicted)
        after = _gist_bytes(self.world.stats)
        self.measured_rounds.append({c: after[c] - before[c] for c in after})

    def reduce_loss(self, local: float) -> float:
        """The mean over groups of each group's loss (summed shares, collective)."""
        return self.world.allreduce_scalar(local)

    def global_logits(self) -> torch.Tensor:
        """Logits of every vertex from the row shards, model-parallel (collective)."""
        if self._forward is None:
            self._forward = ShardedForward(
                self.meta.path, self.world, self.cfg, self.params, self.widths, self.sampler,
            )
        return self._forward.logits(self.shards.shards[0], self._vector_values(),
                                    self.merged_scales())

    def evaluate(self) -> dict[str, float]:
        """Loss and accuracies of the global model, evaluated over its row shards.

        Every rank gets all logits; each scores an even block of the vertices and the
        counts are summed, as in full-batch training (so every rank reports the same).
        """
        before = _category_bytes(self.world.stats, EVAL)
        logits = self.global_logits()
        fwd = self._forward
        assert fwd is not None
        self.eval_measured.append(_category_bytes(self.world.stats, EVAL) - before)
        off = even_offsets(fwd.num_nodes, self.world.size)
        lo, hi = int(off[self.world.rank]), int(off[self.world.rank + 1])
        block, y = logits[lo:hi], fwd.y[lo:hi]
        masks = {k: m[lo:hi] for k, m in fwd.masks.items()}
        num_terms = max(1, loss_terms(int(fwd.masks["train"].sum()), fwd.y))
        share = float(cross_entropy_sum(block, y, masks["train"])) / num_terms
        loss = self.world.allreduce_scalar(share)
        self.merged_losses[self.steps_done // self.opts.local_iters] = loss
        return {"loss": loss, **global_counts(self.world, block, y, masks)}

    def predictions(self) -> tuple[np.ndarray, torch.Tensor]:
        """An even block of the global model's logits per rank (as it scores them)."""
        with torch.no_grad():
            logits = self.global_logits()
        assert self._forward is not None
        off = even_offsets(self._forward.num_nodes, self.world.size)
        lo, hi = int(off[self.world.rank]), int(off[self.world.rank + 1])
        return np.arange(lo, hi, dtype=np.int64), logits[lo:hi]

    def summary(
        self, result: TrainResult, measured: dict[str, float], phases: dict[str, float],
        tier_gbps: dict[str, float] | None,
    ) -> tuple[dict[str, float], dict[str, Any], list[str]]:
        """Predicted bytes (groups' models x K, plus sub-model traffic) and the ``gist`` section.

        See :func:`hpcgnn.training.gist_report.gist_report`.
        """
        return gist_report(self, result, measured)

    def categories(self) -> tuple[str, ...]:
        """The categories of the sub-model traffic of a round."""
        if self.vectors is None:
            return (SCATTER, GATHER)
        return (SCATTER, GATHER, *self.vectors.categories)

    def free(self) -> None:
        """Free the group's communicators."""
        self.group_grid.free()


def _tensors(
    arrays: list[np.ndarray], grad: bool, device: Device | None = None
) -> list[torch.Tensor]:
    """``arrays`` as tensors on ``device`` (default: the host).

    On the CPU they share the arrays' memory (on a GPU they are copies, written back after
    the round); ``grad``: leaves that require gradients (parameters), else plain (moments).
    """
    dev = get_device(device)
    return [dev.from_numpy(a).requires_grad_(grad) for a in arrays]


def _category_bytes(stats: Any, category: str) -> float:
    return float(stats.snapshot().get(category, {}).get("bytes", 0.0))


def _gist_bytes(stats: Any) -> dict[str, float]:
    snap = stats.snapshot()
    return {
        c: float(snap.get(c, {}).get("bytes", 0.0)) for c in (SCATTER, GATHER, BIAS, ATTENTION)
    }


def biased(cfg: TrainConfig, sampler: str | None) -> bool:
    """Whether the model has a bias per layer: a sampled group's, or ``--bias``."""
    return sampler is not None or cfg.bias


def sub_config(cfg: TrainConfig, hidden: int) -> TrainConfig:
    """A sub-network's settings: ``hidden`` wide (GAT: the heads of those columns)."""
    return dataclasses.replace(cfg, hidden=hidden, heads=max(1, cfg.heads * hidden // cfg.hidden))
