"""What a training mode is: the part of a training run that differs from mode to mode.

A mode (``--mode``, or the ``mode=`` object of :func:`hpcgnn.api.train`) owns its options,
their checks, the defaults it gives the model (depth, layer), its process grid, the memory
a rank needs, the trainer it builds, the words that describe it, its section of the
metrics' ``config`` and its part of the checkpoint fingerprint.
:mod:`hpcgnn.training.run` runs every mode through this interface alone;
:mod:`hpcgnn.training.modes` registers the modes. A mode is built from Python values; the
command line's flags become one in :mod:`hpcgnn.cli.modes`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from hpcgnn.config import DEFAULT_LAYERS, TrainConfig
from hpcgnn.errors import ConfigError
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.memory import MemoryGraph
from hpcgnn.io.reader import GraphMeta
from hpcgnn.kinds import GCN, ORDERED_MODES, PRODUCT_ORDERS
from hpcgnn.layout.shapes import GridShape
from hpcgnn.planning.topology import Topology
from hpcgnn.training.loop import Trainer

T = TypeVar("T", bound=Trainer)


@dataclass(frozen=True)
class Setup:
    """What a mode builds its trainer from: the file, the grid, the model settings.

    Attributes
    ----------
    graph
        The graph file, or a graph in memory (full-batch modes).
    grid
        The run's process grid (GIST: all ranks; a group's trainer gets its group's grid).
    cfg
        The model's settings, the layer kind resolved.
    meta
        The graph's sizes.
    topology
        The link topology of a partitioned exchange (:meth:`Mode.link_topology`), else ``None``.
    memory_bytes
        The bytes per rank the memory check allowed.
    tier_gbps
        The tiers' bandwidths of the run (``--tier-gbps``; ``None``: the defaults).
    """

    graph: str | MemoryGraph
    grid: ProcessGrid
    cfg: TrainConfig
    meta: GraphMeta
    topology: Topology | None = None
    memory_bytes: float = 0.0
    tier_gbps: dict[str, float] | None = None


@dataclass(frozen=True)
class Estimate:
    """A mode's memory need per rank: on which grid, for how wide a model, how many bytes.

    ``parts``: ``bytes`` by part where the mode's estimate has them
    (:func:`hpcgnn.cost.ranking.memory_parts`, what ``hpcgnn model`` prints), else ``None``.
    """

    shape: GridShape
    hidden: str
    bytes: float
    parts: dict[str, float] | None = None


class Mode(ABC, Generic[T]):
    """One ``--mode`` of ``hpcgnn train``: its options and everything they decide.

    Subclasses are frozen dataclasses of their options, given by keyword and checked when
    the mode is made (:class:`~hpcgnn.errors.ConfigError`), registered in
    :data:`hpcgnn.training.modes.MODES`.
    """

    #: The ``--mode`` name (the metrics' ``config.mode``).
    name: ClassVar[str]
    #: Every rank writes its own checkpoint file (the model lies sharded), not rank 0 alone.
    sharded_checkpoints: ClassVar[bool] = False
    #: The ``algo`` labels of the mode whose checkpoints are elastic: they resume at any
    #: rank count and under any label of a mode that has them (the model and Adam's state
    #: whole, the dropout masks keyed by global ids: the same trajectory up to float
    #: rounding), so ``algo`` and ``grid`` do not bind them. Empty: bound to both.
    elastic_labels: ClassVar[frozenset[str]] = frozenset()
    #: Whether the mode's models take sparse input features (``--sparse-features``).
    sparse_features: ClassVar[bool] = True
    #: What one step of the loop is called on the console (GIST: a round).
    step_name: ClassVar[str] = "epoch"
    #: Whether the mode trains multi-label targets (``--loss bce``).
    multi_label: ClassVar[bool] = False

    def depth(self, layers: int | None) -> int:
        """The model's layers: ``layers`` (``--layers``), else the mode's default (2).

        Raises
        ------
        ConfigError
            For ``layers`` the mode's options contradict (a sampler's sizes).
        """
        return DEFAULT_LAYERS if layers is None else layers

    @property
    def default_model(self) -> str:
        """The layer trained when none is named (``--model``): GCN's."""
        return GCN.name

    def for_run(self, cfg: TrainConfig, ranks: int) -> Mode:
        """This mode completed with what it takes from the run: ``cfg`` on ``ranks``.

        The first step of a run (:func:`hpcgnn.training.run.train`); a mode that needs
        nothing from the run (the default) is itself.
        """
        return self

    @property
    def label(self) -> str:
        """The algorithm in reports (``config.algo``): the mode's name unless it says more."""
        return self.name

    def resolve(self, cfg: TrainConfig, ranks: int) -> TrainConfig:
        """``cfg`` for this mode on ``ranks``: refuses a layer kind or a loss it cannot train."""
        self.check_features(cfg)
        if cfg.product_order != PRODUCT_ORDERS[0] and self.label not in ORDERED_MODES:
            raise ConfigError(f"--product-order {cfg.product_order} orders the full-batch"
                              f" layouts' products ({', '.join(sorted(ORDERED_MODES))}):"
                              f" {self.where} evaluates its own order (use auto)")
        if cfg.loss == "bce" and not self.multi_label:
            raise ConfigError(f"--loss bce is not implemented with {self.where} yet: train"
                              " multi-label targets with --mode fullbatch, offload, minibatch"
                              " or gist")
        if self.label not in cfg.kind.modes:
            raise ConfigError(
                f"--model {cfg.kind} is not available with {self.where} yet (it trains with "
                f"{', '.join(sorted(cfg.kind.modes))})"
            )
        return cfg

    def check_features(self, cfg: TrainConfig) -> None:
        """Refuse ``--sparse-features on`` where the models read dense feature rows."""
        if cfg.sparse_features == "on" and not self.sparse_features:
            raise ConfigError(
                f"--sparse-features on: {self.where} reads dense feature rows (use auto or"
                " off; see docs/performance.md)"
            )

    @property
    def where(self) -> str:
        """The flags that chose this mode, for messages."""
        return f"--mode {self.name}"

    @abstractmethod
    def grid_shape(self, ranks: int) -> GridShape:
        """The process grid of the run on ``ranks`` (raises ``GridError`` if none fits)."""

    def check_graph(self, meta: GraphMeta) -> None:
        """Refuse options the graph cannot satisfy (the same on every rank)."""

    @abstractmethod
    def memory(self, cfg: TrainConfig, meta: GraphMeta, shape: GridShape) -> Estimate:
        """Bytes a rank needs for the model on ``shape``, checked before anything is allocated."""

    def link_topology(self, grid: ProcessGrid) -> Topology | None:
        """The link topology a partitioned exchange plans on (collective), else ``None``."""
        return None

    @abstractmethod
    def build(self, setup: Setup) -> T:
        """The trainer of this mode on ``setup.grid``."""

    def schedule(self, cfg: TrainConfig, trainer: T) -> TrainConfig:
        """``cfg`` the loop runs once ``trainer`` is built (GIST: ``epochs`` = its rounds)."""
        return cfg

    @abstractmethod
    def describe(self, setup: Setup, trainer: T) -> str:
        """The mode in the run's first line, before ``grid <shape>``."""

    def config(self, setup: Setup) -> dict[str, Any]:
        """The mode's options in the metrics' ``config`` section."""
        return {}

    def fingerprint(self, setup: Setup) -> dict[str, Any]:
        """What a checkpoint of this mode must agree on besides the model and the graph."""
        return {}
