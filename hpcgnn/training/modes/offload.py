"""``--mode offload``: HongTu's partition x chunk training with host-resident vertex data."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from hpcgnn.config import GRID_KIND, TrainConfig, check_types
from hpcgnn.cost.ranking import memory_parts
from hpcgnn.errors import ConfigError
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphMeta
from hpcgnn.layout.shapes import GridShape, choose_shape
from hpcgnn.models.offload import OffloadModel, OffloadOptions
from hpcgnn.planning.topology import Topology
from hpcgnn.training.fullbatch import FullBatchTrainer
from hpcgnn.training.modes.base import Estimate, Mode, Setup
from hpcgnn.training.modes.fullbatch import load_run_topology
from hpcgnn.utils.memory import parse_bytes

#: The cache budget of a run that gives none (``--device-memory``), in bytes or with K/M/G/T.
DEVICE_MEMORY_ENV = "HPCGNN_DEVICE_MEMORY"


@dataclass(frozen=True, kw_only=True)
class OffloadMode(Mode[FullBatchTrainer]):
    """HongTu: ``chunks`` per partition, ``dedup``, ``reorganize``, the cache budget.

    ``OffloadMode(chunks=8, dedup="inter")``; the options are checked when the mode is made
    (:class:`~hpcgnn.models.offload.OffloadOptions`).

    Attributes
    ----------
    chunks
        Chunks per partition (default: 4).
    dedup
        Neighbour-load deduplication: ``none``, ``inter`` (across ranks of a batch) or
        ``full`` (plus reuse across consecutive batches; default).
    reorganize
        HongTu's greedy 2-phase chunk reorganisation (kept only if it does not raise
        ``V_ru``).
    device_memory
        Bytes per rank for the aggregates cached from the forward to the backward (a number,
        or text such as ``"2G"``; ``None``: ``$HPCGNN_DEVICE_MEMORY`` when the run starts,
        else no limit); held in bytes.
    exchange, topology
        ``p2p``, or ``planned``: the device-to-device fetches planned on ``topology``
        (``None``: all ranks on one node).
    grid, replication
        ``--grid`` (a 1D grid of every rank) and ``--replication`` (refused by the grid).
    in_place, interleave, zero_copy, merged
        HongTu's device paths (``--no-in-place``, ``--interleave``, ``--zero-copy``,
        ``--merged-buffer``; :class:`~hpcgnn.exchange.offload.DevicePaths`): in-place
        buffers (default), interleaved device-to-device rounds, zero-copy host reads, the
        merged transition + neighbour buffer. The same results.
    """

    name: ClassVar[str] = "offload"
    elastic_labels: ClassVar[frozenset[str]] = frozenset({"offload"})
    multi_label: ClassVar[bool] = True

    chunks: int = 4
    dedup: str = "full"
    reorganize: bool = False
    device_memory: float | str | None = None
    exchange: str = "p2p"
    topology: str | None = None
    grid: str | tuple[int, ...] | None = None
    replication: int | None = None
    in_place: bool = True
    interleave: bool = False
    zero_copy: bool = False
    merged: bool = False

    def __post_init__(self) -> None:
        check_types(self)
        if self.device_memory is not None:
            object.__setattr__(self, "device_memory",
                               parse_bytes(str(self.device_memory), "--device-memory"))
        self.options(None)  # OffloadOptions' checks
        if self.topology and self.exchange != "planned":
            raise ConfigError("--topology in --mode offload needs --exchange planned")

    def options(self, tier_gbps: dict[str, float] | None) -> OffloadOptions:
        """The offloaded model's options, the reorganisation weighing ``tier_gbps``."""
        budget = None if self.device_memory is None else float(self.device_memory)
        return OffloadOptions(
            chunks=self.chunks, dedup=self.dedup, reorganize=self.reorganize,
            cache_budget=budget, exchange=self.exchange, tier_gbps=tier_gbps,
            in_place=self.in_place, interleave=self.interleave, zero_copy=self.zero_copy,
            merged=self.merged,
        )

    def for_run(self, cfg: TrainConfig, ranks: int) -> OffloadMode:
        """Without ``device_memory``: ``$HPCGNN_DEVICE_MEMORY``'s, if set."""
        env = os.environ.get(DEVICE_MEMORY_ENV)
        if self.device_memory is None and env:
            return replace(self, device_memory=parse_bytes(env, DEVICE_MEMORY_ENV))
        return self

    def grid_shape(self, ranks: int) -> GridShape:
        """A 1D grid of every rank."""
        return choose_shape(GRID_KIND[self.name], ranks, self.grid, self.replication)

    def check_graph(self, meta: GraphMeta) -> None:
        """Every chunk needs a vertex."""
        if self.chunks > meta.num_nodes:
            raise ConfigError(
                f"--chunks {self.chunks} is more than the graph's {meta.num_nodes} vertices"
            )

    def memory(self, cfg: TrainConfig, meta: GraphMeta, shape: GridShape) -> Estimate:
        """The full-batch bound on ``shape`` (the cache budget caps the aggregates)."""
        memory = memory_parts(meta, cfg, shape)
        return Estimate(shape, str(cfg.hidden), memory.total, memory.parts)

    def link_topology(self, grid: ProcessGrid) -> Topology | None:
        """The planned exchange's topology (collective), else ``None``."""
        if self.exchange != "planned":
            return None
        return load_run_topology(self.topology, grid)

    def build(self, setup: Setup) -> FullBatchTrainer:
        """The full-batch trainer of the offloaded model."""
        model = OffloadModel.read(
            setup.graph, setup.grid, setup.cfg, self.options(setup.tier_gbps),
            topology=setup.topology,
        )
        return FullBatchTrainer(model, setup.cfg, setup.grid.world)

    def describe(self, setup: Setup, trainer: FullBatchTrainer) -> str:
        """Chunks, deduplication, reorganisation and the plan's topology."""
        topo = setup.topology
        reorg = " reorganized" if self.reorganize else ""
        plan = f" planned exchange on topology {topo.name}" if topo is not None else ""
        return f"offload {self.chunks} chunks/part dedup {self.dedup}{reorg}{plan},"

    def config(self, setup: Setup) -> dict[str, Any]:
        """The offload options."""
        topo = setup.topology
        return {
            "chunks": self.chunks, "dedup": self.dedup, "reorganize": self.reorganize,
            "exchange": self.exchange, "topology": self.topology or (topo.name if topo else None),
            "in_place": self.in_place, "interleave": self.interleave, "zero_copy": self.zero_copy,
            "merged": self.merged,
        }
