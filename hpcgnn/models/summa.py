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

Any layer runs the same way (:func:`hpcgnn.layout.summa.layer_plans`, from the layer's
trace): each of its aggregations is a SUMMA SpMM, each dense product a planned dense step,
and the last layer's output is gathered to column 0 unless a dense step delivered it. GAT
layers (``--model gat``) run ``z = H W`` by the dense step and then the edge computation
of :mod:`hpcgnn.spmm.summa_attention` on the same stages (the blocks are the pattern of
``A^T + I``; its backward keeps them, so no blocks of ``Â`` are read).

Weights are replicated; each process computes a partial weight gradient from its blocks
and :meth:`GridGCN.reduce_gradients` all-reduces all of them over the world in one
message. With ``--bias`` each layer's bias is replicated too: P(i, j, l) adds its columns
``j`` to its rows of a hidden layer's output (the last layer's whole bias where the logits
are whole rows on column 0, nothing on the other columns' empty rows), so its partial
gradient is nonzero on the columns it holds of the rows it holds. Every output entry lies
on one process only (the fine blocks ``(i, l)`` split the rows, the column blocks the
columns; no replicas), so the sum of the partials over the world, in the same one
message as the weights', is the bias's gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.comm.collective import collective
from hpcgnn.config import TrainConfig
from hpcgnn.cost.estimate import Estimate
from hpcgnn.cost.summa import SummaBlockNnz, predict_summa
from hpcgnn.graph.normalize import operator_block
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.memory import GraphSource, open_graph
from hpcgnn.io.reader import GraphMeta
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.summa import (
    RowReader,
    SummaLayout,
    layer_plans,
    owned_blocks,
)
from hpcgnn.layout.trace import AGGREGATE, uses
from hpcgnn.models.base import GCNModel
from hpcgnn.models.share import input_features, read_vertex_arrays
from hpcgnn.nn.gcn import LayerOps
from hpcgnn.rng import Columns
from hpcgnn.spmm.dense_step import DenseStep, gather_rows
from hpcgnn.spmm.summa import SummaAggregation, SummaGrid, SummaSpMM
from hpcgnn.spmm.summa_attention import SummaAttention


@dataclass(frozen=True)
class SummaShare:
    """What P(i, j, l) of a SUMMA grid holds of a graph.

    Attributes
    ----------
    meta
        The graph's sizes.
    layout
        The block layout of the grid.
    fwd_blocks, bwd_blocks
        Its sparse blocks of ``Â^T`` and of ``Â`` (``None``: ``Â`` is symmetric, the forward
        blocks serve both directions).
    rows
        The rows of fine block ``(i, l)``, whose features (column block ``j``) it holds.
    scored
        The rows it scores (fine block ``(i, l)`` on column 0, none elsewhere).
    x, y, masks
        Its features, and the labels and masks of the rows it scores.
    """

    meta: GraphMeta
    layout: SummaLayout
    fwd_blocks: dict[int, sp.csr_matrix]
    bwd_blocks: dict[int, sp.csr_matrix] | None
    rows: tuple[int, int]
    scored: tuple[int, int]
    x: torch.Tensor | SparseFeatures
    y: torch.Tensor
    masks: dict[str, torch.Tensor]


def load_summa(source: GraphSource, grid: ProcessGrid, cfg: TrainConfig) -> SummaShare:
    """Read what this process holds on a ``2d`` / ``3d`` grid (collective over the world).

    P(i, j, l) reads the rows of row block ``i`` of ``A^T`` and (directed graphs, or the mean
    operator) ``A`` one fine block at a time, keeping only its own column pieces; the
    features of fine block ``(i, l)`` and, on column 0, its labels and masks; plus both
    degree vectors.
    """
    sgrid = SummaGrid.of(grid)
    np_dtype = cfg.numpy_dtype
    i, j, layer = sgrid.coords
    with collective(grid.world), open_graph(source) as gf:
        meta = gf.meta
        n = meta.num_nodes
        layout = SummaLayout(n, sgrid.dims, meta.partition_offsets)
        in_ptr = gf.read_indptr(0, n, transpose=True)
        out_ptr = gf.read_indptr(0, n, transpose=False)

        def rows_of(transpose: bool) -> RowReader:
            row_ptr, col_ptr = (in_ptr, out_ptr) if transpose else (out_ptr, in_ptr)

            def read(lo: int, hi: int) -> sp.csr_matrix:
                block = gf.read_csr(lo, hi, transpose=transpose,
                                    weights=cfg.kind.operator.weighted)
                return operator_block(
                    block, lo, transpose, row_ptr[lo : hi + 1], col_ptr, cfg.kind, np_dtype
                )

            return read

        fwd_blocks = owned_blocks(layout, i, j, layer, rows_of(True))
        # the mean D_in^-1 A^T is not symmetric even when A is; a layer without an
        # aggregation (GAT: its backward keeps the forward's pattern blocks) reads no Â
        widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        separate = ((meta.directed or not cfg.kind.operator.symmetric)
                    and uses(widths, cfg.kind, AGGREGATE))
        bwd_blocks = owned_blocks(layout, i, j, layer, rows_of(False)) if separate else None
        lo, hi = layout.fine_range(i, layer)
        scored = (lo, hi) if j == 0 else (lo, lo)  # column 0 scores
        x, y, masks = read_vertex_arrays(
            gf, (lo, hi), np_dtype, layout.col_range(meta.num_features, j), scored, grid.device
        )
    # after the collective read: a rank whose block failed has told every rank
    features = input_features(x, cfg, grid.world, grid.device)
    return SummaShare(meta, layout, fwd_blocks, bwd_blocks, (lo, hi), scored, features, y,
                      masks)


class GridGCN(GCNModel):
    """GCN distributed over a ``2d`` or ``3d`` process grid (CAGNET 2D / 3D).

    Parameters
    ----------
    share
        What this process holds (:func:`load_summa`; :meth:`read` loads it).
    grid
        A ``2d`` (``Pr x Pc``) or ``3d`` (``Pr x Pc x Pl``) grid of any shape.
    cfg
        Training configuration.
    weights
        ``W^1 .. W^L`` to train (default: Glorot from ``cfg.seed``; a kind with a
        self weight: per layer ``W_self, W_neigh``, the self term one more dense step).

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

    fused_gradients = True  # one all-reduce of every W^l over all ranks

    def __init__(
        self, share: SummaShare, grid: ProcessGrid, cfg: TrainConfig,
        weights: list[torch.Tensor] | None = None,
    ) -> None:
        self.grid, self.cfg = grid, cfg
        self.sgrid = sgrid = SummaGrid.of(grid)
        self.comm = grid.world
        self.stats = grid.stats
        self.meta, self.layout = share.meta, share.layout
        layout, dtype = share.layout, cfg.torch_dtype
        self.x, self.y, self.masks = share.x, share.y, share.masks
        self.offsets = layout.fine  # fine-block offsets: the cost model's ``row_offsets``
        self.rows = share.rows
        self.row_ids = np.arange(*share.scored)
        fwd = SummaSpMM(layout, sgrid, share.fwd_blocks, dtype)
        # undirected GCN: Â is symmetric, one set of blocks serves both directions
        bwd = fwd
        if share.bwd_blocks is not None:
            bwd = SummaSpMM(layout, sgrid, share.bwd_blocks, dtype)
        self.aggregation = SummaAggregation(fwd, bwd)
        self._init_weights(weights)
        self.plans = layer_plans(self.widths, layout.pc, cfg.kind)
        attends = any(p.attention is not None for p in self.plans)
        attention = SummaAttention(fwd, layout) if attends else None
        self.layers = [
            LayerOps(
                self.aggregation,
                tuple(DenseStep(sgrid.row, layout.cols(f_in), layout.cols(f_out), variant)
                      for f_in, f_out, variant in p.dense_steps),
                partial(gather_rows, row=sgrid.row, cols=layout.cols(p.f_out))
                if p.gather_logits else None,
                attention=attention if p.attention is not None else None,
                columns=partial(layout.col_range, j=sgrid.coords[1]),
            )
            for p in self.plans
        ]

    @classmethod
    def read(
        cls, source: GraphSource, grid: ProcessGrid, cfg: TrainConfig,
        weights: list[torch.Tensor] | None = None,
    ) -> GridGCN:
        """The model of ``source`` (a graph file or a graph in memory) on ``grid``."""
        return cls(load_summa(source, grid, cfg), grid, cfg, weights)

    def block_nnz(self) -> SummaBlockNnz:
        """Nonzeros of every sparse block of ``Â^T`` and ``Â`` (collective, ``"control"``).

        The exact input of :func:`hpcgnn.cost.summa.predict_summa`, gathered from the
        blocks already read (each process knows the counts of its row block and layer).
        """
        fwd, bwd = self.aggregation.matrices()
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

    def dropout_columns(self) -> Callable[[int], Columns] | None:
        """Column block ``j`` of a layer input (this process's columns)."""
        j = self.sgrid.coords[1]
        return lambda width: self.layout.col_range(width, j)

    def predict_cost(self) -> Estimate | None:
        """SUMMA / Split-3D bytes of one epoch with the exact block nonzeros (collective)."""
        return predict_summa(self.problem(), self.layout.dims, self.block_nnz())
