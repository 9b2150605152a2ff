"""``--mode offload``: HongTu's partition x chunk training with host-resident vertex data."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hpcgnn.config import GRID_KIND, TrainConfig
from hpcgnn.cost.machine import tiers_from_flag
from hpcgnn.cost.ranking import memory_estimate
from hpcgnn.errors import ConfigError
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphMeta
from hpcgnn.layout.shapes import GridShape, choose_shape
from hpcgnn.models.offload import OffloadGCN, OffloadOptions
from hpcgnn.models.offload_gat import OffloadGAT
from hpcgnn.planning.topology import Topology
from hpcgnn.training.fullbatch import FullBatchTrainer
from hpcgnn.training.modes.base import Estimate, Mode, Setup, refuse_others
from hpcgnn.training.modes.fullbatch import load_run_topology
from hpcgnn.utils.memory import parse_bytes

#: The flags of the offload mode (``--algo``: only ``1d`` or ``halo``, which change nothing).
FLAGS = ("algo", "exchange", "topology", "chunks", "dedup", "reorganize", "device_memory")


def device_memory(args: argparse.Namespace) -> float | None:
    """``--device-memory``, else ``$HPCGNN_DEVICE_MEMORY``, in bytes (``None``: no limit)."""
    if args.device_memory is not None:
        return parse_bytes(args.device_memory, "--device-memory")
    env = os.environ.get("HPCGNN_DEVICE_MEMORY")
    return parse_bytes(env, "HPCGNN_DEVICE_MEMORY") if env else None


@dataclass(frozen=True)
class OffloadMode(Mode[FullBatchTrainer]):
    """HongTu: ``--chunks`` per partition, ``--dedup``, ``--reorganize``, the cache budget.

    Attributes
    ----------
    options
        The offloaded model's options (:class:`~hpcgnn.models.offload.OffloadOptions`).
    topology
        ``--exchange planned``: the topology of the device-to-device plan (``None``: one node).
    grid, replication
        ``--grid`` (a 1D grid of every rank) and ``--replication`` (refused by the grid).
    """

    name: ClassVar[str] = "offload"

    options: OffloadOptions = field(default_factory=OffloadOptions)
    topology: str | None = None
    grid: str | None = None
    replication: int | None = None

    def __post_init__(self) -> None:
        if self.topology and self.options.exchange != "planned":
            raise ConfigError("--topology in --mode offload needs --exchange planned")

    @classmethod
    def from_args(cls, args: argparse.Namespace, ranks: int) -> OffloadMode:
        """The offload flags; ``--algo`` other than ``1d`` / ``halo`` is refused."""
        if args.algo not in (None, "1d", "halo"):
            raise ConfigError(
                f"--mode offload partitions the vertices itself; it cannot run --algo {args.algo}"
            )
        refuse_others(args, FLAGS)
        options = OffloadOptions(
            chunks=4 if args.chunks is None else args.chunks, dedup=args.dedup or "full",
            reorganize=bool(args.reorganize), cache_budget=device_memory(args),
            exchange=args.exchange or "p2p",
            tier_gbps=tiers_from_flag(getattr(args, "tier_gbps", None)),
        )
        return cls(
            options=options, topology=args.topology, grid=args.grid,
            replication=args.replication,
        )

    def grid_shape(self, ranks: int) -> GridShape:
        """A 1D grid of every rank."""
        return choose_shape(GRID_KIND[self.name], ranks, self.grid, self.replication)

    def check_graph(self, meta: GraphMeta) -> None:
        """Every chunk needs a vertex."""
        if self.options.chunks > meta.num_nodes:
            raise ConfigError(
                f"--chunks {self.options.chunks} is more than the graph's {meta.num_nodes}"
                " vertices"
            )

    def memory(self, cfg: TrainConfig, meta: GraphMeta, shape: GridShape) -> Estimate:
        """The full-batch bound on ``shape`` (the cache budget caps the aggregates)."""
        return Estimate(shape, str(cfg.hidden), memory_estimate(meta, cfg, shape))

    def link_topology(self, grid: ProcessGrid) -> Topology | None:
        """The planned exchange's topology (collective), else ``None``."""
        if self.options.exchange != "planned":
            return None
        return load_run_topology(self.topology, grid)

    def build(self, setup: Setup) -> FullBatchTrainer:
        """The full-batch trainer of the offloaded model."""
        cls = OffloadGAT if setup.cfg.kind.attention else OffloadGCN
        model = cls.read(
            setup.graph, setup.grid, setup.cfg, self.options, topology=setup.topology
        )
        return FullBatchTrainer(model, setup.cfg, setup.grid.world)

    def describe(self, setup: Setup, trainer: FullBatchTrainer) -> str:
        """Chunks, deduplication, reorganisation and the plan's topology."""
        o, topo = self.options, setup.topology
        reorg = " reorganized" if o.reorganize else ""
        plan = f" planned exchange on topology {topo.name}" if topo is not None else ""
        return f"offload {o.chunks} chunks/part dedup {o.dedup}{reorg}{plan},"

    def config(self, setup: Setup) -> dict[str, Any]:
        """The offload options."""
        o, topo = self.options, setup.topology
        return {
            "chunks": o.chunks, "dedup": o.dedup, "reorganize": o.reorganize,
            "exchange": o.exchange, "topology": self.topology or (topo.name if topo else None),
        }
