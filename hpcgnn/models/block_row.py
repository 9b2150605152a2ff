"""CAGNET 1D and 1.5D full-batch GCN: block rows on a ``(P/c) x c`` grid."""

from __future__ import annotations

from dataclasses import replace

import scipy.sparse as sp
import torch

from hpcgnn.config import TrainConfig
from hpcgnn.cost.block_row import predict_block_row
from hpcgnn.cost.estimate import Estimate
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.layout.trace import ATTENTION, uses
from hpcgnn.models.base import RowBlockModel
from hpcgnn.models.share import RowShare
from hpcgnn.nn.gat import Neighbourhood
from hpcgnn.nn.gcn import Aggregation, LayerOps
from hpcgnn.spmm.block_row import BlockRowAggregation, block_row_neighbourhood


class BlockRowGCN(RowBlockModel):
    """GCN distributed by block rows: CAGNET 1D (``1d`` grid) and 1.5D (``1.5d`` grid).

    On a ``(P/c) x c`` grid process row ``i`` holds block row ``i`` of every matrix,
    replicated on its ``c`` processes; 1D is ``c = 1``. The replicas compute identical
    logits and gradients, so loss, accuracy and weight gradients are summed over the
    process column only (``comm = grid.col``), each block row counted once.

    Parameters
    ----------
    share
        Process row ``i``'s block row: rows ``[offsets[i], offsets[i+1])`` of ``Â^T``,
        ``Â``, features, labels and masks (:meth:`read` loads it from a file).
    grid
        A ``1d`` or ``1.5d`` process grid.
    cfg
        Training configuration.
    weights
        ``W^1 .. W^L`` to train (default: Glorot from ``cfg.seed``).

    """

    def __init__(
        self, share: RowShare, grid: ProcessGrid, cfg: TrainConfig,
        weights: list[torch.Tensor] | None = None,
    ) -> None:
        super().__init__(share, grid, cfg, weights)
        if share.a is None:
            raise ValueError("a block-row model needs the rows of Â (load_rows(with_a=True))")
        ops = LayerOps(self._aggregation(share.a_t, share.a))
        if uses(self.widths, cfg.kind, ATTENTION):
            ops = replace(ops, neighbourhood=self._neighbourhood(share.a_t))
        self.layers = [ops] * cfg.layers

    def _neighbourhood(self, a_t: sp.csr_matrix) -> Neighbourhood:
        """GAT's source rows of this rank's edges.

        Every block row all-gathered (1D), or the blocks of this process column's stage
        chunk, the rows' sources split along the process row (1.5D).
        """
        grid, offsets = self.grid, self.offsets
        assert grid is not None and offsets is not None
        return block_row_neighbourhood(grid.col, grid.row, a_t, offsets, self.cfg.torch_dtype)

    def _aggregation(self, a_t: sp.csr_matrix, a: sp.csr_matrix) -> Aggregation:
        """The layers' ``Â^T H`` operator from this rank's rows of ``Â^T`` and ``Â``."""
        grid, offsets = self.grid, self.offsets
        assert grid is not None and offsets is not None
        return BlockRowAggregation(grid.col, grid.row, a_t, a, offsets, self.cfg.torch_dtype)

    def predict_cost(self) -> Estimate | None:
        """CAGNET 1D / 1.5D bytes of one epoch (:mod:`hpcgnn.cost.block_row`)."""
        assert self.grid is not None
        return predict_block_row(self.problem(), self.grid.shape)
