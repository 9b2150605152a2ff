"""Full-batch GCN on a 1D vertex partition with point-to-point halo exchange."""

from __future__ import annotations

import os

import numpy as np
import torch

from hpcgnn.comm.collective import collective
from hpcgnn.dist.blocks import vertex_offsets
from hpcgnn.dist.local_blocks import normalized_rows
from hpcgnn.dist.spmm_halo import HaloAggregation
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphFile
from hpcgnn.models.gcn import gcn_forward
from hpcgnn.models.init import layer_sizes
from hpcgnn.models.random import dropout_keep
from hpcgnn.train.config import TrainConfig
from hpcgnn.train.model_state import init_weights

ALLREDUCE = "allreduce"


class HaloGCN:
    """GCN whose aggregations exchange only the halo rows (``--algo halo``, p2p).

    Rank ``r`` owns a contiguous vertex range: the file's partition when it has exactly
    ``P`` parts, otherwise :func:`hpcgnn.dist.blocks.vertex_offsets`. Each layer's
    aggregation gathers the remote rows its ``Â^T`` rows touch with one all-to-allv and
    multiplies locally; see :class:`hpcgnn.dist.spmm_halo.HaloAggregation`.

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
    """

    def __init__(
        self, path: str | os.PathLike, grid: ProcessGrid, cfg: TrainConfig,
        backward: str = "auto",
    ) -> None:
        if grid.kind != "1d":
            raise ValueError(f"the halo algorithm needs a 1d grid, not {grid.kind!r}")
        self.grid = grid
        self.comm = grid.col
        self.cfg = cfg
        comm = grid.col
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
                self.masks = {
                    m: torch.from_numpy(gf.read_mask(m, lo, hi)) for m in ("train", "val", "test")
                }
        op = HaloAggregation(comm, a_t, a, self.offsets, cfg.torch_dtype, backward)
        self.meta = meta
        self.rows = (lo, hi)
        self.row_ids = np.arange(lo, hi)
        self.aggregation = op
        self.ops = [op] * cfg.layers
        self.widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        self.weights = init_weights(meta.num_features, meta.num_classes, cfg)

    def logits(self, epoch: int | None) -> torch.Tensor:
        """This rank's rows of the logits (dropout of epoch ``epoch``; none when ``None``)."""
        keep = None
        if epoch is not None:

            def keep(layer: int) -> np.ndarray:
                w = self.widths[layer]
                return dropout_keep(
                    self.cfg.seed, epoch, layer, self.rows, (0, w), w, self.cfg.dropout
                )

        return gcn_forward(self.x, self.weights, self.ops, self.cfg.dropout, keep, self.comm.stats)

    def reduce_gradients(self) -> None:
        """Sum the partial weight gradients over the ranks."""
        for w in self.weights:
            assert w.grad is not None
            self.comm.allreduce(w.grad, ALLREDUCE)
