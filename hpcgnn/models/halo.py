"""Halo (partitioned) full-batch GCN: a 1D vertex partition with point-to-point halo exchange."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.config import TrainConfig
from hpcgnn.cost.estimate import Estimate
from hpcgnn.cost.halo import HaloVolumes, planned_volumes, predict_halo
from hpcgnn.errors import ConfigError
from hpcgnn.exchange.staged import StagedExchange
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.trace import ATTENTION, row_exchange_widths, uses
from hpcgnn.models.block_row import BlockRowGCN
from hpcgnn.models.exchange_report import halo_report
from hpcgnn.models.share import RowShare
from hpcgnn.nn.gat import Neighbourhood
from hpcgnn.planning.topology import Topology, uniform_topology
from hpcgnn.spmm.halo import HaloAggregation


class HaloGCN(BlockRowGCN):
    """GCN whose aggregations exchange only the halo rows (``--algo halo``).

    Rank ``r`` owns a contiguous vertex range: part ``r`` of the file's partition (of
    ``P`` parts, or of a multiple of ``P`` coarsened by
    :func:`hpcgnn.layout.blocks.vertex_offsets`), or an even split of a file without one;
    any other partition is refused (:func:`hpcgnn.models.share.require_partition`). Each layer's
    aggregation gathers the remote rows its ``Â^T`` rows touch with one all-to-allv and
    multiplies locally; see :class:`hpcgnn.spmm.halo.HaloAggregation`.

    Parameters
    ----------
    share
        Rank ``r``'s rows of ``Â^T``, ``Â``, features, labels and masks (:meth:`read`).
    grid
        A ``1d`` process grid (``grid.col`` spans all ranks).
    cfg
        Training configuration.
    backward
        Backward exchange: ``"auto"`` (default), ``"push"`` or ``"pull"``.
    exchange
        ``"p2p"`` (default) or ``"planned"`` (DGCL SPST stages on ``topology``).
    topology
        Topology of the planned exchange (default: one node, equal links).
    weights
        ``W^1 .. W^L`` to train (default: Glorot from ``cfg.seed``).
    """

    follows_partition = True

    def __init__(
        self,
        share: RowShare,
        grid: ProcessGrid,
        cfg: TrainConfig,
        backward: str = "auto",
        exchange: str = "p2p",
        topology: Topology | None = None,
        weights: list[torch.Tensor] | None = None,
    ) -> None:
        if grid.kind != "1d":
            raise ValueError(f"the halo algorithm needs a 1d grid, not {grid.kind!r}")
        widths = layer_sizes(share.meta.num_features, cfg.hidden, share.meta.num_classes,
                             cfg.layers)
        if uses(widths, cfg.kind, ATTENTION):  # the adjoint of GAT's gather is the push
            if backward == "pull":
                raise ConfigError(f"--model {cfg.kind}: the halo backward pushes the gathered"
                                  " rows' gradients back (backward push or auto, not pull)")
            backward = "push"
        self._backward = backward
        self._exchange = exchange
        self.topology = topology if topology is not None else uniform_topology(grid.size)
        super().__init__(share, grid, cfg, weights)

    def _aggregation(self, a_t: sp.csr_matrix, a: sp.csr_matrix) -> HaloAggregation:
        """The halo-exchanging operator (kept as ``self.aggregation`` for the cost model)."""
        assert self.offsets is not None
        self.aggregation = HaloAggregation(
            self.comm, a_t, a, self.offsets, self.cfg.torch_dtype, self._backward,
            self._exchange, self.topology,
            self.exchange_width * self.cfg.itemsize,
        )
        return self.aggregation

    def _neighbourhood(self, a_t: sp.csr_matrix) -> Neighbourhood:
        """GAT's source rows: the owned rows and the halo, by the model's exchange."""
        return self.aggregation.neighbourhood()

    @property
    def exchange_width(self) -> int:
        """Width of the widest rows the exchange moves (the plan is made for them)."""
        return max(max(f) for f in row_exchange_widths(self.widths, self.cfg.kind))

    def predict_cost(self) -> Estimate | None:
        """Halo bytes of one epoch from every rank's halo sizes (collective)."""
        agg, grid = self.aggregation, self.grid
        assert grid is not None
        if agg.exchange == "planned":  # every transfer of the plan, forwarding included
            staged = cast(StagedExchange, agg.fwd_exchange)  # "planned" builds a staged one
            volumes = planned_volumes(staged.counts, grid.size)
        else:
            mine = (
                len(agg.fwd_sets.halo), int(agg.fwd_sets.send_counts.sum()),
                len(agg.bwd_sets.halo),
            )
            per_rank = np.array(grid.world.allgather_obj(mine), dtype=np.int64).reshape(-1, 3)
            volumes = HaloVolumes(per_rank[:, 0], per_rank[:, 1], per_rank[:, 2])
        return predict_halo(self.problem(), grid.shape, volumes, agg.mode)

    def exchange_report(
        self, measured: dict[str, float], predicted: dict[str, float],
        tier_gbps: dict[str, float] | None,
    ) -> dict[str, Any] | None:
        """DGCL counts, modelled and probed stage times (collective)."""
        assert self.grid is not None
        return halo_report(self, self.grid, self.topology, measured, tier_gbps)
