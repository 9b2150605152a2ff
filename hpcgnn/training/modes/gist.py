"""``--mode gist``: independent sub-GCNs on ``M`` rank groups, each group running a mode.

A group runs the full-batch mode of ``--algo`` or, with ``--sampler``, the minibatch mode
on its ``P / M`` ranks (``--grid`` and ``--replication`` shape the group's grid); the
run's grid is a 1D grid of every rank, over which the global model's rows are sharded.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol

import torch

from hpcgnn.config import GRID_KIND, TrainConfig, check_types
from hpcgnn.cost.gist import memory_bytes
from hpcgnn.errors import ConfigError, HpcgnnError
from hpcgnn.io.reader import GraphMeta
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.shapes import GridShape, choose_shape
from hpcgnn.layout.subnets import Placement, model_params, subnet_widths
from hpcgnn.layout.trace import ATTENTION, trace
from hpcgnn.training.gist import (
    GistOptions,
    GistTrainer,
    GroupTrainer,
    biased,
    check_gist,
    sub_config,
)
from hpcgnn.training.modes.base import Estimate, Mode, Setup
from hpcgnn.training.modes.fullbatch import FullBatchMode
from hpcgnn.training.modes.minibatch import MinibatchMode


class GroupMode(Protocol):
    """What GIST needs of the mode its groups run (full-batch or minibatch)."""

    @property
    def group_algo(self) -> str:
        """``config.group_algo``: ``--algo``, or ``minibatch``."""

    @property
    def sampler(self) -> str | None:
        """The sampler of sampled groups (their models have biases), else ``None``."""

    def depth(self, layers: int | None) -> int:
        """The model's layers (see :meth:`Mode.depth`)."""

    @property
    def default_model(self) -> str:
        """The layer trained when none is named (see :meth:`Mode.default_model`)."""

    def for_run(self, cfg: TrainConfig, ranks: int) -> Any:
        """The group's mode completed for a group of ``ranks`` (see :meth:`Mode.for_run`)."""

    def resolve(self, cfg: TrainConfig, ranks: int) -> TrainConfig:
        """``cfg`` for the group's mode (see :meth:`Mode.resolve`)."""

    def grid_shape(self, ranks: int) -> GridShape:
        """A group's grid on ``ranks``."""

    def memory(self, cfg: TrainConfig, meta: GraphMeta, shape: GridShape) -> Estimate:
        """A group rank's bytes for the model ``cfg`` on ``shape``."""

    def build(self, setup: Setup, weights: list[torch.Tensor] | None = None) -> Any:
        """The group's trainer, training the injected ``weights``."""

    def group_description(self, trainer: Any) -> str:
        """What the group runs, in the run's first line."""

    def group_config(self) -> dict[str, Any]:
        """The group mode's options in the metrics' ``config``."""

    def fingerprint(self, setup: Setup) -> dict[str, Any]:
        """The group mode's part of the checkpoint fingerprint."""


@dataclass(frozen=True, kw_only=True)
class GistMode(Mode[GistTrainer]):
    """GIST: ``subnets`` (M) groups, ``local_iters`` (K) per round, ``rounds`` (R) rounds.

    ``GistMode(subnets=2, group=FullBatchMode(algo="1.5d"))``, or sampled groups:
    ``GistMode(subnets=2, group=MinibatchMode(sampler="sage", fanout=[10, 5]))``; the
    options are checked when the mode is made, and against the ranks and the model when the
    run starts (:func:`~hpcgnn.training.gist.check_gist`).

    Attributes
    ----------
    group
        The mode each group runs on its ``P / M`` ranks: full-batch (default: 1D; the halo
        exchange point to point) or minibatch.
    subnets, local_iters
        ``M`` sub-models and ``K`` local iterations (each default 1).
    rounds
        ``R`` (``None``: derived from the ``epochs`` budget once the groups' trainers know
        their steps per epoch, :class:`~hpcgnn.training.gist.GistBudget`).
    rescale
        Evaluate (and predict with) the merged model scaled by ``1/M`` where a weight reads
        a split hidden dimension (``--gist-rescale``).
    """

    name: ClassVar[str] = "gist"
    #: Multi-label targets, with full-batch and sampled groups alike.
    multi_label: ClassVar[bool] = True
    sharded_checkpoints: ClassVar[bool] = True
    step_name: ClassVar[str] = "round"

    group: GroupMode = field(default_factory=FullBatchMode)
    subnets: int = 1
    local_iters: int = 1
    rounds: int | None = None
    rescale: bool = False
    #: ``M``, ``K`` and the rescaled evaluation, as the trainer takes them (checked).
    options: GistOptions = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_types(self)
        if not isinstance(self.group, FullBatchMode | MinibatchMode):
            raise ConfigError(f"--mode gist: a group runs FullBatchMode or MinibatchMode, not"
                              f" {type(self.group).__name__}")
        if isinstance(self.group, FullBatchMode) and (
            self.group.exchange != "p2p" or self.group.topology
        ):
            raise ConfigError("--exchange and --topology apply to --algo halo and --mode"
                              " offload only (a GIST group exchanges its halo point to point)")
        if self.rounds is not None and self.rounds < 1:
            raise ConfigError(f"--rounds must be >= 1, got {self.rounds}")
        object.__setattr__(self, "options",
                           GistOptions(self.subnets, self.local_iters, self.rescale))

    def depth(self, layers: int | None) -> int:
        """The group mode's."""
        return self.group.depth(layers)

    @property
    def default_model(self) -> str:
        """The group mode's."""
        return self.group.default_model

    def for_run(self, cfg: TrainConfig, ranks: int) -> GistMode:
        """The group mode completed for a group of ``P / M`` ranks."""
        group = self.group.for_run(cfg, max(1, ranks // max(1, self.subnets)))
        return replace(self, group=group)

    def resolve(self, cfg: TrainConfig, ranks: int) -> TrainConfig:
        """The group's layers, a kind GIST trains, ``M`` groups that fit."""
        cfg = super().resolve(self.group.resolve(cfg, ranks), ranks)
        check_gist(self.options, cfg, ranks)
        m = self.options.subnets
        if m < ranks and ranks % m and self.group.sampler is not None:
            raise ConfigError(f"--subnets {m} must divide the {ranks} ranks into equal groups"
                              " with --sampler (each group's epoch has the same steps)")
        self.group_shapes(ranks)  # every group's grid, refused on every rank alike
        return cfg

    def schedule(self, cfg: TrainConfig, trainer: GistTrainer) -> TrainConfig:
        """``R`` rounds as the loop's epochs: ``--rounds``, or the ``--epochs`` budget's."""
        return replace(cfg, epochs=trainer.budget.rounds)

    def grid_shape(self, ranks: int) -> GridShape:
        """A 1D grid of every rank (the global model's row shards)."""
        return choose_shape(GRID_KIND[self.name], ranks, None, None)

    def group_shapes(self, ranks: int) -> list[GridShape]:
        """The grid of each group: its mode's on its ranks (:class:`Placement`)."""
        return [self.group.grid_shape(n) for n in Placement.of(ranks, self.options.subnets).sizes]

    def group_shape(self, ranks: int) -> GridShape:
        """The grid of the smallest group (the most per rank; every group's when ``M | P``)."""
        return self.group_shapes(ranks)[-1]

    def _sub_cfg(self, cfg: TrainConfig) -> TrainConfig:
        """A group's sub-model: ``ceil(hidden / M)`` wide (GAT: ``ceil(K / M)`` whole heads)."""
        return sub_config(cfg, subnet_widths(cfg.kind, cfg.hidden, self.options.subnets)[0])

    def memory(self, cfg: TrainConfig, meta: GraphMeta, shape: GridShape) -> Estimate:
        """A group's sub-model on its grid plus this rank's global rows and evaluation.

        ``shape``: the run's 1D grid. A GIST rank holds its group's sub-model of
        ``ceil(hidden / M)`` on the group's grid plus its rows of the global model and the
        model-parallel evaluation (:func:`hpcgnn.cost.gist.memory_bytes`), never the whole
        global model. With ``M > P`` rank 0 hosts the most sub-networks: their exchange
        buffers all at once, and a group trainer per width among them.
        """
        ranks, sub_cfg = shape.size, self._sub_cfg(cfg)
        hosted = Placement.of(ranks, self.options.subnets).hosted(0)
        split = subnet_widths(cfg.kind, cfg.hidden, self.options.subnets)
        trainers = len({split[m] for m in hosted})
        group_shape = self.group_shape(ranks)
        widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        sub = layer_sizes(meta.num_features, sub_cfg.hidden, meta.num_classes, cfg.layers)
        with_bias = biased(cfg, self.group.sampler)

        def sharded(widths: list[int], cfg: TrainConfig) -> list[tuple[int, ...]]:
            return [p.shape for p in model_params(widths, cfg.kind, with_bias) if p.sharded]

        heads = max((c.heads for c in trace(widths, cfg.kind) if c.primitive == ATTENTION),
                    default=0)
        extra = memory_bytes(
            sharded(widths, cfg), sharded(sub, sub_cfg) * len(hosted), meta.num_nodes,
            meta.num_edges,
            ranks, cfg.itemsize, heads,
        )
        group = trainers * self.group.memory(sub_cfg, meta, group_shape).bytes
        return Estimate(group_shape, f"{sub_cfg.hidden} of {cfg.hidden}", group + extra)

    def _full_shape(self, ranks: int) -> GridShape | None:
        """The grid ordinary training of the global model would use on all ranks."""
        try:
            return choose_shape(GRID_KIND[self.group.group_algo], ranks, None, None)
        except HpcgnnError:  # e.g. no automatic 3D grid for this P
            return None

    def build(self, setup: Setup) -> GistTrainer:
        """The GIST trainer; each group's trainer is its mode's, with injected weights."""
        grid, cfg, meta = setup.grid, setup.cfg, setup.meta
        full = self._full_shape(grid.size) or grid.shape
        mine = Placement.of(grid.size, self.options.subnets).hosted(grid.world.rank)[0]

        def make_trainer(group_grid: Any, sub_cfg: TrainConfig, weights: Any) -> GroupTrainer:
            group_setup = replace(setup, grid=group_grid, cfg=sub_cfg, topology=None)
            trainer: GroupTrainer = self.group.build(group_setup, weights)
            return trainer

        return GistTrainer(
            grid, cfg, meta, self.options, self.group_shapes(grid.size)[mine], make_trainer,
            estimates={
                "full_model_estimate_bytes": self.group.memory(cfg, meta, full).bytes,
                "gist_estimate_bytes": setup.memory_bytes,
            },
            sampler=self.group.sampler, rounds=self.rounds,
        )

    def describe(self, setup: Setup, trainer: GistTrainer) -> str:
        """``M`` x ``K``, the groups' grid and what they run."""
        o = self.options
        scaled = f", merged model scaled by 1/{o.subnets}" if o.rescale else ""
        return (
            f"gist {o.subnets} sub-models x {o.local_iters} local iterations,"
            f" {trainer.budget.describe(o.subnets)}{scaled},"
            f" each group of {trainer.group_size} ranks on grid {trainer.group_grid.shape}"
            f" running {self.group.group_description(trainer.inner)} | global"
        )

    def config(self, setup: Setup) -> dict[str, Any]:
        """``M``, ``K``, ``--rounds``, ``--gist-rescale``, the groups' algorithm and options."""
        o = self.options
        return {
            "subnets": o.subnets, "local_iters": o.local_iters, "rounds": self.rounds,
            "gist_rescale": o.rescale,
            "group_algo": self.group.group_algo, **self.group.group_config(),
        }

    def fingerprint(self, setup: Setup) -> dict[str, Any]:
        """What shapes the sub-models, their training and (rescaled) the evaluated model.

        ``gist_rescale`` only when given, so checkpoints of runs without it still resume.
        """
        o = self.options
        return {
            **({"gist_rescale": True} if o.rescale else {}),
            **self.group.fingerprint(setup), "subnets": o.subnets,
            "local_iters": o.local_iters, "group_algo": self.group.group_algo,
            "group_grid": ", ".join(dict.fromkeys(map(str, self.group_shapes(setup.grid.size)))),
        }
