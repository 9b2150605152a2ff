"""Full-batch GCN on a 2D (SUMMA) or 3D (Split-3D) process grid, any grid shape.

Layout (:mod:`hpcgnn.layout.summa`): on a ``Pr x Pc x Pl`` grid (2D: ``Pl = 1``)
P(i, j, l) holds every layer input ``H^t((i, l), j)`` — the rows of fine block
``(i, l)``, feature-column block ``j`` of ``Pc`` — and the sparse blocks of ``Â^T``
(forward) and ``Â`` (backward) that it owns. One layer is

1. dropout on ``H((i, l), j)`` with exactly the serial run's mask (counter-based);
2. ``T = Â^T H`` with the SUMMA / Split-3D SpMM (:mod:`hpcgnn.spmm.summa`), ``T``
   in the layout of ``H``;
3. ``Z = T W`` along the process row (:mod:`hpcgnn.spmm.dense_step`); ``H = ReLU(Z)``.

Like the serial model, a layer whose output is narrower runs as ``Â^T (H W)`` (step 3
before step 2, the SpMM on ``f_out`` columns; :func:`hpcgnn.layout.order.transform_first`),
see :func:`hpcgnn.layout.summa.layer_plans`. The last layer delivers whole logit
rows of fine block ``(i, l)`` to process column ``j = 0``: those processes score the rows
(``row_ids``, ``y``, ``masks``); the others score nothing.

Weights are replicated; each process computes a partial weight gradient from its blocks
and :meth:`GridGCN.reduce_gradients` all-reduces all of them over the world in one
message.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.comm.collective import collective
from hpcgnn.config import TrainConfig
from hpcgnn.cost.summa import SummaBlockNnz
from hpcgnn.graph.blocks import degrees
from hpcgnn.graph.normalize import normalize_block
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphFile
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.summa import (
    RowReader,
    SummaLayout,
    layer_plans,
    owned_blocks,
)
from hpcgnn.nn.gcn import aggregate
from hpcgnn.rng import dropout_keep
from hpcgnn.spmm.dense_step import DenseStep, gather_rows
from hpcgnn.spmm.summa import SummaAggregation, SummaGrid, SummaSpMM, numpy_dtype
from hpcgnn.train.model_state import init_weights

ALLREDUCE = "allreduce"


class GridGCN:
    """GCN distributed over a ``2d`` or ``3d`` process grid (CAGNET 2D / 3D).

    Parameters
    ----------
    path
        Graph file. P(i, j, l) reads the rows of row block ``i`` of ``A^T`` and (directed
        graphs) ``A`` one fine block at a time, keeping only its own column pieces; the
        features of fine block ``(i, l)`` and, on column 0, its labels and masks; plus
        both degree vectors.
    grid
        A ``2d`` (``Pr x Pc``) or ``3d`` (``Pr x Pc x Pl``) grid of any shape.
    cfg
        Training configuration.

    Attributes
    ----------
    comm
        All ranks (``grid.world``).
    weights
        Replicated ``W^1 .. W^L``.
    row_ids, y, masks
        The rows this process scores (fine block ``(i, l)`` on column 0, none elsewhere).
    layout
        The block layout.
    offsets
        Offsets of the ``Pr * Pl`` fine blocks (``Problem.row_offsets`` for the cost model).

    """

    def __init__(self, path: str | os.PathLike, grid: ProcessGrid, cfg: TrainConfig) -> None:
        self.grid = grid
        self.sgrid = sgrid = SummaGrid.of(grid)
        self.comm = grid.world
        self.cfg = cfg
        dtype = cfg.torch_dtype
        np_dtype = numpy_dtype(dtype)
        i, j, layer = sgrid.coords
        with collective(grid.world):
            with GraphFile(path) as gf:
                meta = gf.meta
                n = meta.num_nodes
                self.layout = layout = SummaLayout(n, sgrid.dims, meta.partition_offsets)
                in_deg = degrees(gf, 0, n, True)
                out_deg = degrees(gf, 0, n, False)

                def rows_of(transpose: bool) -> RowReader:
                    row_deg, col_deg = (in_deg, out_deg) if transpose else (out_deg, in_deg)

                    def read(lo: int, hi: int) -> sp.csr_matrix:
                        block = gf.read_csr(lo, hi, transpose=transpose)
                        return normalize_block(block, lo, row_deg[lo:hi], col_deg, np_dtype)

                    return read

                fwd_blocks = owned_blocks(layout, i, j, layer, rows_of(True))
                bwd_blocks = (
                    owned_blocks(layout, i, j, layer, rows_of(False)) if meta.directed else None
                )
                lo, hi = layout.fine_range(i, layer)
                c0, c1 = layout.col_range(meta.num_features, j)
                x = gf.read_features(lo, hi)[:, c0:c1]
                self.x = torch.from_numpy(np.ascontiguousarray(x, dtype=np_dtype))
                scores = j == 0
                s_lo, s_hi = (lo, hi) if scores else (lo, lo)
                self.y = torch.from_numpy(gf.read_labels(s_lo, s_hi))
                self.masks = {
                    m: torch.from_numpy(gf.read_mask(m, s_lo, s_hi))
                    for m in ("train", "val", "test")
                }
        self.meta = meta
        self.offsets = layout.fine  # fine-block offsets: the cost model's ``row_offsets``
        self.rows = (lo, hi)
        self.row_ids = np.arange(s_lo, s_hi)
        fwd = SummaSpMM(layout, sgrid, fwd_blocks, dtype)
        # undirected: Â is symmetric, one set of blocks serves both directions
        bwd = SummaSpMM(layout, sgrid, bwd_blocks, dtype) if bwd_blocks is not None else fwd
        self.ops = [SummaAggregation(fwd, bwd)] * cfg.layers
        self.widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        self.plans = layer_plans(self.widths, layout.pc)
        self.dense = [
            DenseStep(sgrid.row, layout.cols(p.f_in), layout.cols(p.f_out), p.dense)
            for p in self.plans
        ]
        self.weights = init_weights(meta.num_features, meta.num_classes, cfg)

    def block_nnz(self) -> SummaBlockNnz:
        """Nonzeros of every sparse block of ``Â^T`` and ``Â`` (collective, ``"control"``).

        The exact input of :func:`hpcgnn.cost.summa.predict_summa`, gathered from the
        blocks already read (each process knows the counts of its row block and layer).
        """
        fwd, bwd = self.ops[0].matrices()
        i, j, layer = self.sgrid.coords
        mine = (i, layer, fwd.nnz, bwd.nnz) if j == 0 else None
        parts = [x for x in self.comm.allgather_obj(mine) if x is not None]
        pr, _, pl = self.layout.dims
        out_f: list[np.ndarray] = [np.zeros(0)] * pl
        out_b: list[np.ndarray] = [np.zeros(0)] * pl
        for layer_ in range(pl):
            rows = sorted((x for x in parts if x[1] == layer_), key=lambda x: x[0])
            out_f[layer_] = np.stack([x[2] for x in rows]).reshape(pr, -1)
            out_b[layer_] = np.stack([x[3] for x in rows]).reshape(pr, -1)
        return SummaBlockNnz(self.layout.dims, tuple(out_f), tuple(out_b))

    def _keep(self, epoch: int, layer: int) -> np.ndarray:
        """Dropout keep-mask of this process's block of the input of ``layer``."""
        w = self.widths[layer]
        cols = self.layout.col_range(w, self.sgrid.coords[1])
        return dropout_keep(self.cfg.seed, epoch, layer, self.rows, cols, w, self.cfg.dropout)

    def logits(self, epoch: int | None) -> torch.Tensor:
        """Logits of the rows this process scores (``0 x C`` off column 0).

        ``epoch=None`` evaluates without dropout.
        """
        p = self.cfg.dropout
        h = self.x
        last = len(self.weights) - 1
        layers = zip(self.weights, self.ops, self.dense, self.plans, strict=True)
        for t, (w, op, step, plan) in enumerate(layers):
            if epoch is not None and p > 0.0:
                keep = torch.from_numpy(self._keep(epoch, t))
                h = h * keep.to(h.dtype) * (1.0 / (1.0 - p))
            if plan.transform_first:
                z = aggregate(step(h, w), op)
                if plan.gather_logits:
                    z = gather_rows(z, self.sgrid.row, self.layout.cols(plan.f_out))
            else:
                z = step(aggregate(h, op), w)
            h = z if t == last else torch.relu(z)
        return h

    def reduce_gradients(self) -> None:
        """All-reduce the partial gradients of every ``W^l`` over all ranks (one message)."""
        grads = []
        for w in self.weights:
            if w.grad is None:
                w.grad = torch.zeros_like(w)
            grads.append(w.grad)
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.comm.allreduce(flat, ALLREDUCE)
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
