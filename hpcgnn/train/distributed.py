"""Distributed full-batch GCN: one class per data layout, all sharing the training loop."""

from __future__ import annotations

import os

import numpy as np
import torch

from hpcgnn.comm.collective import collective
from hpcgnn.dist.blocks import vertex_offsets
from hpcgnn.dist.local_blocks import normalized_rows
from hpcgnn.dist.spmm_1d import OneDAggregation
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphFile
from hpcgnn.models.gcn import gcn_forward
from hpcgnn.models.init import layer_sizes
from hpcgnn.models.random import dropout_keep
from hpcgnn.train.config import TrainConfig
from hpcgnn.train.model_state import init_weights

ALLREDUCE = "allreduce"


class BlockRowGCN:
    """GCN whose matrices are distributed by block rows over a 1D grid (CAGNET 1D).

    Parameters
    ----------
    path
        Graph file; rank ``i`` reads only rows ``[offsets[i], offsets[i+1])`` of ``A^T``,
        ``A``, features, labels and masks (plus the degree vectors).
    grid
        A ``1d`` process grid.
    cfg
        Training configuration.

    """

    def __init__(self, path: str | os.PathLike, grid: ProcessGrid, cfg: TrainConfig) -> None:
        self.grid = grid
        self.comm = grid.world
        self.cfg = cfg
        comm = grid.row
        np_dtype = np.float64 if cfg.dtype == "float64" else np.float32
        with collective(grid.world):
            with GraphFile(path) as gf:
                meta = gf.meta
                self.offsets = vertex_offsets(meta.num_nodes, comm.size, meta.partition_offsets)
                lo, hi = (int(v) for v in self.offsets[comm.rank : comm.rank + 2])
                a_t = normalized_rows(gf, lo, hi, True, np_dtype)
                a = normalized_rows(gf, lo, hi, False, np_dtype)
                self.x = torch.from_numpy(gf.read_features(lo, hi).astype(np_dtype))
                self.y = torch.from_numpy(gf.read_labels(lo, hi))
                self.masks = {m: torch.from_numpy(gf.read_mask(m, lo, hi)) for m in ("train", "val", "test")}
        self.meta = meta
        self.rows = (lo, hi)
        self.row_ids = np.arange(lo, hi)
        op = OneDAggregation(comm, a_t, a, self.offsets, cfg.torch_dtype)
        self.ops = [op] * cfg.layers
        self.widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        self.weights = init_weights(meta.num_features, meta.num_classes, cfg)

    def logits(self, epoch: int | None) -> torch.Tensor:
        """This rank's block row of the logits."""
        keep = None
        if epoch is not None:
            def keep(layer: int) -> np.ndarray:
                w = self.widths[layer]
                return dropout_keep(self.cfg.seed, epoch, layer, self.rows, (0, w), w, self.cfg.dropout)
        return gcn_forward(self.x, self.weights, self.ops, self.cfg.dropout, keep)

    def reduce_gradients(self) -> None:
        """All-reduce the partial weight gradients ``Y^l = (Â^T H)_i^T G_i`` over ranks."""
        for w in self.weights:
            assert w.grad is not None
            self.grid.world.allreduce(w.grad, ALLREDUCE)
