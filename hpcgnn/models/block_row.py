"""Distributed full-batch GCN: one class per data layout, all sharing the training loop."""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.comm.collective import collective
from hpcgnn.config import TrainConfig
from hpcgnn.graph.blocks import normalized_rows
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphFile
from hpcgnn.layout.blocks import vertex_offsets
from hpcgnn.layout.order import layer_sizes
from hpcgnn.nn.gcn import Aggregation, gcn_forward
from hpcgnn.rng import dropout_keep
from hpcgnn.spmm.block_row import BlockRowAggregation
from hpcgnn.train.model_state import init_weights

ALLREDUCE = "allreduce"


class RowBlockModel:
    """State shared by the models whose ranks own contiguous vertex rows.

    Process row ``i`` owns block row ``i``: the file's partition when it fits, else an
    even split.
    """

    def _load(
        self, path: str | os.PathLike, grid: ProcessGrid, cfg: TrainConfig, with_a: bool
    ) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
        """Read this rank's rows (collective); returns its rows of ``Â^T`` and of ``Â``.

        Sets ``grid``, ``comm`` (the process column), ``cfg``, ``meta``, ``offsets``,
        ``rows``, ``row_ids``, ``x``, ``y``, ``masks``, ``widths`` and ``weights``.
        """
        self.grid, self.cfg = grid, cfg
        self.comm = comm = grid.col
        np_dtype = np.float64 if cfg.dtype == "float64" else np.float32
        with collective(grid.world):
            with GraphFile(path) as gf:
                meta = gf.meta
                self.offsets = vertex_offsets(meta.num_nodes, comm.size, meta.partition_offsets)
                lo, hi = (int(v) for v in self.offsets[comm.rank : comm.rank + 2])
                a_t = normalized_rows(gf, lo, hi, True, np_dtype)
                a = normalized_rows(gf, lo, hi, False, np_dtype) if with_a else None
                self.x = torch.from_numpy(gf.read_features(lo, hi).astype(np_dtype))
                self.y = torch.from_numpy(gf.read_labels(lo, hi))
                self.masks = {
                    m: torch.from_numpy(gf.read_mask(m, lo, hi)) for m in ("train", "val", "test")
                }
        self.meta = meta
        self.rows = (lo, hi)
        self.row_ids = np.arange(lo, hi)
        self.widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        self.weights = init_weights(meta.num_features, meta.num_classes, cfg)
        return a_t, a


class BlockRowGCN(RowBlockModel):
    """GCN distributed by block rows: CAGNET 1D (``1d`` grid) and 1.5D (``1.5d`` grid).

    On a ``(P/c) x c`` grid process row ``i`` holds block row ``i`` of every matrix,
    replicated on its ``c`` processes; 1D is ``c = 1``. The replicas compute identical
    logits and gradients, so loss, accuracy and weight gradients are summed over the
    process column only (``comm = grid.col``), each block row counted once.

    Parameters
    ----------
    path
        Graph file; process row ``i`` reads only rows ``[offsets[i], offsets[i+1])`` of
        ``A^T``, ``A``, features, labels and masks (plus the degree vectors).
    grid
        A ``1d`` or ``1.5d`` process grid.
    cfg
        Training configuration.

    """

    def __init__(self, path: str | os.PathLike, grid: ProcessGrid, cfg: TrainConfig) -> None:
        a_t, a = self._load(path, grid, cfg, with_a=True)
        assert a is not None
        op = self._aggregation(a_t, a)
        self.ops = [op] * cfg.layers

    def _aggregation(self, a_t: sp.csr_matrix, a: sp.csr_matrix) -> Aggregation:
        """The layers' ``Â^T H`` operator from this rank's rows of ``Â^T`` and ``Â``."""
        grid = self.grid
        return BlockRowAggregation(grid.col, grid.row, a_t, a, self.offsets, self.cfg.torch_dtype)

    def logits(self, epoch: int | None) -> torch.Tensor:
        """This rank's block row of the logits."""
        keep = None
        if epoch is not None:

            def keep(layer: int) -> np.ndarray:
                w = self.widths[layer]
                return dropout_keep(
                    self.cfg.seed, epoch, layer, self.rows, (0, w), w, self.cfg.dropout
                )

        return gcn_forward(self.x, self.weights, self.ops, self.cfg.dropout, keep, self.comm.stats)

    def reduce_gradients(self) -> None:
        """Sum the partial weight gradients ``(Â^T H)_i^T G_i`` over the block rows."""
        for w in self.weights:
            assert w.grad is not None
            self.comm.allreduce(w.grad, ALLREDUCE)
