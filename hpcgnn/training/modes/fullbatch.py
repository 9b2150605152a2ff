"""``--mode fullbatch``: CAGNET's 1D, 1.5D, 2D and 3D SpMM, or the partitioned halo model.

``--algo halo`` is the full-batch mode on METIS-style partitions: each rank holds its rows
and exchanges the halo rows it needs, point to point or along a DGCL plan on
``--topology`` (``--exchange planned``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from hpcgnn.comm.collective import collective
from hpcgnn.config import ALGORITHMS, GRID_KIND, TrainConfig, check_types
from hpcgnn.cost.ranking import memory_parts
from hpcgnn.errors import ConfigError
from hpcgnn.exchange.staged import EXCHANGES
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphMeta
from hpcgnn.layout.shapes import GridShape, choose_shape
from hpcgnn.models.base import GCNModel
from hpcgnn.planning.topology import Topology, load_topology, uniform_topology
from hpcgnn.training.fullbatch import FullBatchTrainer
from hpcgnn.training.modes.base import Estimate, Mode, Setup


def load_run_topology(name: str | None, grid: ProcessGrid) -> Topology:
    """``--topology``, else all ranks on one node with equal links (collective)."""
    with collective(grid.world):
        return load_topology(name, grid.size) if name else uniform_topology(grid.size)


@dataclass(frozen=True, kw_only=True)
class FullBatchMode(Mode[FullBatchTrainer]):
    """Full-batch training with the distributed SpMM of ``--algo`` on a grid of its kind.

    ``FullBatchMode(algo="1.5d", replication=2)``; ``FullBatchMode()`` is 1D on every rank.

    Attributes
    ----------
    algo
        ``1d``, ``1.5d``, ``2d``, ``3d`` or ``halo``.
    grid, replication
        ``--grid`` (``"4"``, ``"2x2"``, ``"2x2x2"``) and ``--replication`` (``None``: chosen
        for the rank count).
    exchange, topology
        ``--algo halo``: ``p2p`` or ``planned`` on ``topology``, a topology file (``None``:
        all ranks on one node).
    """

    name: ClassVar[str] = "fullbatch"
    elastic_labels: ClassVar[frozenset[str]] = frozenset(ALGORITHMS)
    multi_label: ClassVar[bool] = True

    algo: str = "1d"
    grid: str | tuple[int, ...] | None = None
    replication: int | None = None
    exchange: str = "p2p"
    topology: str | None = None

    def __post_init__(self) -> None:
        check_types(self)
        if self.algo not in ALGORITHMS:
            raise ConfigError(
                f"unknown algorithm '{self.algo}' (choose from {', '.join(ALGORITHMS)})"
            )
        if self.exchange not in EXCHANGES:
            raise ConfigError(f"--exchange must be one of {', '.join(EXCHANGES)}")
        if self.algo != "halo" and (self.exchange != "p2p" or self.topology):
            raise ConfigError(
                "--exchange and --topology apply to --algo halo and --mode offload only"
            )

    @property
    def label(self) -> str:
        """``--algo``."""
        return self.algo

    @property
    def group_algo(self) -> str:
        """What a GIST group of this mode runs (``config.group_algo``): ``--algo``."""
        return self.algo

    @property
    def sampler(self) -> str | None:
        """No sampler: the groups of GIST train the full graph."""
        return None

    @property
    def where(self) -> str:
        """``--algo <algo>``."""
        return f"--algo {self.algo}"

    def grid_shape(self, ranks: int) -> GridShape:
        """A grid of ``--algo``'s kind: ``--grid`` / ``--replication``, else chosen."""
        return choose_shape(GRID_KIND[self.algo], ranks, self.grid, self.replication)

    def memory(self, cfg: TrainConfig, meta: GraphMeta, shape: GridShape) -> Estimate:
        """The full-batch model's blocks, activations and buffers on ``shape``."""
        memory = memory_parts(meta, cfg, shape, self.algo)
        return Estimate(shape, str(cfg.hidden), memory.total, memory.parts)

    def link_topology(self, grid: ProcessGrid) -> Topology | None:
        """``--algo halo``: the topology its exchange is reported (and planned) on."""
        return load_run_topology(self.topology, grid) if self.algo == "halo" else None

    def model(self, setup: Setup, weights: list[torch.Tensor] | None = None) -> GCNModel:
        """The distributed model of ``--algo`` on ``setup.grid``.

        ``weights``: injected parameters (GIST's sub-weights), else the Glorot initialisation.
        """
        path, grid, cfg = setup.graph, setup.grid, setup.cfg
        if self.algo == "halo":
            from hpcgnn.models.halo import HaloGCN

            return HaloGCN.read(
                path, grid, cfg, exchange=self.exchange, topology=setup.topology,
                weights=weights,
            )
        if grid.kind in ("1d", "1.5d"):
            from hpcgnn.models.block_row import BlockRowGCN

            return BlockRowGCN.read(path, grid, cfg, weights=weights)
        from hpcgnn.models.summa import GridGCN

        return GridGCN.read(path, grid, cfg, weights=weights)

    def build(self, setup: Setup, weights: list[torch.Tensor] | None = None) -> FullBatchTrainer:
        """The full-batch trainer of :meth:`model`."""
        return FullBatchTrainer(self.model(setup, weights), setup.cfg, setup.grid.world)

    def group_description(self, trainer: FullBatchTrainer) -> str:
        """What a GIST group of this mode runs."""
        return f"{self.algo} full-batch"

    def group_config(self) -> dict[str, Any]:
        """Nothing beyond ``group_algo``."""
        return {}

    def describe(self, setup: Setup, trainer: FullBatchTrainer) -> str:
        """``--algo``, and the halo exchange's strategy and topology."""
        if setup.topology is not None:
            return f"halo {self.exchange} exchange on topology {setup.topology.name},"
        return self.algo

    def config(self, setup: Setup) -> dict[str, Any]:
        """``--algo halo``: ``exchange`` and ``topology``; nothing more for the SpMMs."""
        if self.algo != "halo":
            return {}
        name = self.topology or (setup.topology.name if setup.topology is not None else None)
        return {"exchange": self.exchange, "topology": name}
