"""The sampled models of ``--mode minibatch``: any layer's forward on each sampled hop.

Parameters are replicated: per layer the layer's weights and a bias (:func:`sampled_weights`).
Hop ``L-1`` of a sampled batch is applied first, each layer through the hop's
:class:`~hpcgnn.nn.sampled.BlockPrimitives` (the sampler's matrix of the layer's operator,
the output rows' own rows, the sampled edges). Evaluation is full-graph, the same forward on
the operator the sampled one estimates (the full-neighbourhood mean ``D^{-1} A^T`` for
the mean, sage's or cluster's, ``D^{-1}(A^T + I)`` for ladies' and cluster's normalized
one, the sum ``A^T + s I`` of the sampler's pattern, whose ones GAT attends over;
:func:`~hpcgnn.sampling.rows.eval_block`),
distributed 1.5D by CAGNET's staged broadcast SpMM
(:class:`~hpcgnn.spmm.block_row.BlockRowAggregation`, forward only), or for an attention
over all of every vertex's in-edges (the 1D / 1.5D neighbourhoods of
:mod:`hpcgnn.spmm.block_row`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hpcgnn.backend import Device
from hpcgnn.kernels.attention import HeadIds, edge_pattern
from hpcgnn.kernels.dropout import global_columns, keep_pairs, rows_keep
from hpcgnn.kernels.sparse_input import SparseFeatures, as_dense
from hpcgnn.kernels.spmm import sparse_matmul
from hpcgnn.kinds import Layer
from hpcgnn.layout.order import param_shapes
from hpcgnn.nn.gat import AttentionDrop, LocalNeighbourhood, Neighbourhood
from hpcgnn.nn.gcn import Input, dropout
from hpcgnn.nn.init import init_weights
from hpcgnn.nn.sampled import Block, BlockPrimitives
from hpcgnn.rng import dropout_key
from hpcgnn.sampling.rows import EdgeWeights
from hpcgnn.sampling.sampled import SampledBatch, SampledHop
from hpcgnn.sampling.samplers import Sampler


@dataclass(frozen=True)
class BatchMasks:
    """The dropout keep-masks of one batch's layer inputs, keyed by global vertex ids.

    ``masks(layer, rows, width)`` is the mask of the rows ``rows`` (global ids);
    :meth:`entries` the same decisions at chosen entries (a sparse input's nonzeros).

    Attributes
    ----------
    seed, epoch, batch, p
        The stream's key (:func:`hpcgnn.kernels.dropout.rows_keep`) and the probability.
    device
        Where the masks are drawn.
    columns
        Per layer, the global columns of the layer's input (a GIST sub-network's ids);
        ``None``: all of them.
    heads
        A GIST sub-GAT's global head ids (its attention dropout draws the global model's
        decisions of its heads); ``None``: the model's own.
    """

    seed: int
    epoch: int
    batch: int
    p: float
    device: Device
    columns: Sequence[np.ndarray] | None = None
    heads: HeadIds | None = None

    def __call__(self, layer: int, rows: np.ndarray | torch.Tensor, width: int) -> torch.Tensor:
        """The boolean keep-mask of the rows ``rows`` (host ids, or on the device)."""
        cols = None if self.columns is None else self.columns[layer]
        return rows_keep(self.seed, self.epoch, self.batch, layer, rows, width, self.p,
                         self.device, cols)

    def entries(self, layer: int, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """The keep decisions of the entries ``(rows[k], cols[k])``: global row, local column."""
        if self.columns is not None:
            cols = global_columns(self.columns[layer], cols)
        key = dropout_key(self.seed, self.epoch, layer, self.batch)
        return keep_pairs(key, rows, cols, self.p)


def sampled_weights(
    kind: Layer, widths: list[int], seed: int, dtype: np.dtype | type, device: Device
) -> list[torch.Tensor]:
    """Glorot weights and zero biases of ``kind``'s layers, on ``device``.

    Per layer the kind's weights (:func:`~hpcgnn.nn.init.init_weights`) and a bias of the
    layer's output width ``f_l`` (:func:`sampled_shapes`).
    """
    return init_weights(widths, seed, dtype, kind, device, bias=True)


def sampled_shapes(kind: Layer, widths: Sequence[int]) -> list[tuple[int, ...]]:
    """The shapes of a sampled model's parameters in its order, from the layer's declaration.

    Per layer its weights (:meth:`~hpcgnn.kinds.Layer.weights`), then its bias ``(f_l,)``
    (:func:`~hpcgnn.layout.order.param_shapes`).
    """
    return param_shapes(widths, kind, bias=True)


class MinibatchModel:
    """Any layer on sampled batches: its forward on each hop's :class:`BlockPrimitives`.

    Parameters
    ----------
    kind
        The layers (``cfg.kind``); the sampler's blocks provide its operator
        (:meth:`~hpcgnn.sampling.samplers.Sampler.check`).
    widths
        Layer widths ``f_0 .. f_L``.
    weights
        Per layer the kind's weights and a bias (:func:`sampled_weights`).
    sampler
        Whose hops the batches hold: the matrix each operator has on them
        (:meth:`block`).
    attention_p
        The drop probability of the attention coefficients while training.
    edge_weights
        The graph file's edge weights where the layer's operator is ``"weighted"``.
    """

    def __init__(self, kind: Layer, widths: list[int], weights: list[torch.Tensor],
                 sampler: Sampler, attention_p: float = 0.0,
                 edge_weights: EdgeWeights | None = None) -> None:
        self.kind, self.sampler, self.edge_weights = kind, sampler, edge_weights
        self.layers = len(widths) - 1
        self.weights = weights
        self.attention_p = attention_p
        self._slices = kind.weight_slices(self.layers, bias=True)  # each ends in its bias

    def _layer(self, layer: int, block: Block, h: Input, drop: AttentionDrop | None,
               state: dict[str, Any]) -> torch.Tensor:
        """Layer ``layer``'s forward on ``block`` (its output rows' values)."""
        *w, b = self.weights[self._slices[layer]]
        g = BlockPrimitives(block, layer, layer == self.layers - 1, b, drop, state)
        return self.kind.forward(g, h, w)

    def forward_batch(
        self, batch: SampledBatch, x: Input, p: float, keep: BatchMasks | None,
    ) -> torch.Tensor:
        """Logits of the batch's seeds from the features ``x`` of its input vertices.

        ``x`` dense, or sparse (:class:`~hpcgnn.kernels.sparse_input.SparseFeatures`):
        then dropout acts on its nonzeros, with the dense mask's decisions.
        """
        h: Input = x
        drop = None
        if keep is not None and self.attention_p > 0.0:
            drop = AttentionDrop(self.attention_p, keep.seed, keep.epoch, keep.batch,
                                 keep.heads)
        state: dict[str, Any] = {}
        for layer in range(self.layers):
            hop = batch.hops[self.layers - 1 - layer]
            if keep is not None and p > 0.0:
                h = _dropout(h, keep, layer, hop.cols, p)
            h = self._layer(layer, self.block(hop, h), h, drop, state)
        return as_dense(h)

    def block(self, hop: SampledHop, h: Input) -> Block:
        """The hop as the layer reads it: the matrix of its operator, its own rows, its edges.

        The sampler's own operator (mean, LADIES' or Cluster-GCN's normalised ``S``) is the
        hop's matrix; on a hop that holds ``S``'s ``+ I`` (Cluster-GCN's) the mean is its
        rows' in-edges alone (:meth:`~hpcgnn.sampling.sampled.SampledHop.in_edges`);
        ``"weighted"`` holds the file's weights of the sampled in-edges;
        ``"sum"`` counts every sampled edge 1 and a row's own vertex the
        operator's ``s``, and ``"pattern"`` is its ones, over which the attention runs.
        Each row's own vertex is among the input rows: the first ones (node-wise,
        Cluster-GCN), or at its place among LADIES' sorted vertices (kept there for a
        layer that reads it, :attr:`~hpcgnn.sampling.spec.SamplerSpec.self_rows`).
        """
        op, sampler = self.kind.operator, self.sampler
        dtype = np.float32 if h.dtype == torch.float32 else np.float64
        device = h.nz_rows.device if isinstance(h, SparseFeatures) else h.device
        rows_lead = not sampler.layer_wise
        rows = len(hop.rows)

        def summed() -> Any:
            return hop.sum_matrix(op.self_weight, dtype, sampler.self_loops,
                                  hop.own_columns(rows_lead))

        def edges() -> SampledHop:  # the sampled in-edges: S's + I is none of them
            return hop.in_edges(hop.own_columns(rows_lead)) if sampler.self_loops else hop

        def matrix() -> Any:
            if op.name in ("sum", "pattern"):
                return summed()
            if op.weighted:
                assert self.edge_weights is not None
                e = edges()
                return SampledHop(e.rows, e.cols, e.indptr, e.indices,
                                  self.edge_weights.of_hop(e)).matrix(dtype)
            return (edges() if self.kind.mean else hop).matrix(dtype)

        def aggregate(x: torch.Tensor) -> torch.Tensor:
            return sparse_matmul(matrix(), x)

        def own(x: Input) -> Input:
            if rows_lead:
                return x.head(rows) if isinstance(x, SparseFeatures) else x[:rows]
            at = torch.as_tensor(hop.own_columns(False), device=device)
            return as_dense(x)[at]

        def attend() -> tuple[Neighbourhood, torch.Tensor | None]:
            own_cols = hop.own_columns(rows_lead)
            nbh = LocalNeighbourhood(edge_pattern(summed(), hop.rows, hop.cols, device, h.dtype),
                                     torch.as_tensor(own_cols, device=device))
            return nbh, nbh.dst

        return Block(aggregate, own, attend, sampler.transform_first)

    def forward_full(self, x: Input, block: Block) -> torch.Tensor:
        """This process row's block of the full-graph logits (evaluation, no dropout).

        ``block``: the full graph's operator on this process row's rows (the forward of a
        :class:`~hpcgnn.spmm.block_row.BlockRowAggregation`) and the attention's
        neighbourhood of them; its own rows are its rows.
        """
        h: Input = x
        state: dict[str, Any] = {}
        for layer in range(self.layers):
            h = self._layer(layer, block, h, None, state)
        return as_dense(h)


def full_block(aggregate: Callable[[torch.Tensor], torch.Tensor] | None,
               neighbourhood: Neighbourhood | None, transform_first: bool) -> Block:
    """The full graph on this process row's rows as a :class:`Block` (evaluation).

    ``aggregate``: ``H -> E H`` with the operator the sampled one estimates;
    ``neighbourhood``: the attention's edges of its pattern (``None`` where the layer
    makes no such call). Its output rows are its input rows.
    """

    def missing(*_: Any) -> Any:
        raise ValueError("the evaluation holds no operator for this call")

    def attend() -> tuple[Neighbourhood, torch.Tensor | None]:
        if neighbourhood is None:
            return missing()
        dst = neighbourhood.dst if isinstance(neighbourhood, LocalNeighbourhood) else None
        return neighbourhood, dst

    return Block(aggregate or missing, lambda h: h, attend, transform_first)


def _dropout(
    h: Input, keep: BatchMasks, layer: int, ids: np.ndarray | torch.Tensor, p: float
) -> Input:
    """Dropout of a layer input whose rows are the vertices ``ids`` (dense or sparse).

    ``ids``: host ids, or a tensor on the device (a hop sampled there).
    """
    if not isinstance(h, SparseFeatures):
        return dropout(h, keep(layer, ids, h.shape[1]), p)
    t = ids if isinstance(ids, torch.Tensor) else torch.from_numpy(np.asarray(ids, np.int64))
    rows = t.to(h.nz_rows.device)[h.nz_rows]
    return h.dropout(keep.entries(layer, rows, h.col), p)
