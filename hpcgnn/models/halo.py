"""Full-batch GCN on a 1D vertex partition with point-to-point halo exchange."""

from __future__ import annotations

import os

import scipy.sparse as sp

from hpcgnn.config import TrainConfig
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.models.block_row import BlockRowGCN
from hpcgnn.planning.topology import Topology
from hpcgnn.spmm.halo import HaloAggregation


class HaloGCN(BlockRowGCN):
    """GCN whose aggregations exchange only the halo rows (``--algo halo``).

    Rank ``r`` owns a contiguous vertex range: the file's partition when it has exactly
    ``P`` parts, otherwise :func:`hpcgnn.layout.blocks.vertex_offsets`. Each layer's
    aggregation gathers the remote rows its ``Â^T`` rows touch with one all-to-allv and
    multiplies locally; see :class:`hpcgnn.spmm.halo.HaloAggregation`.

    Parameters
    ----------
    path
        Graph file; rank ``r`` reads its rows of ``A^T``, ``A``, features, labels, masks.
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
    """

    def __init__(
        self,
        path: str | os.PathLike,
        grid: ProcessGrid,
        cfg: TrainConfig,
        backward: str = "auto",
        exchange: str = "p2p",
        topology: Topology | None = None,
    ) -> None:
        if grid.kind != "1d":
            raise ValueError(f"the halo algorithm needs a 1d grid, not {grid.kind!r}")
        self._backward = backward
        self._exchange = exchange
        self._topology = topology
        super().__init__(path, grid, cfg)

    def _aggregation(self, a_t: sp.csr_matrix, a: sp.csr_matrix) -> HaloAggregation:
        """The halo-exchanging operator (kept as ``self.aggregation`` for the cost model)."""
        self.aggregation = HaloAggregation(
            self.comm, a_t, a, self.offsets, self.cfg.torch_dtype, self._backward,
            self._exchange, self._topology,
        )
        return self.aggregation
