"""The sampled models of ``--mode minibatch``: GraphSAGE (mean), LADIES, GIN and GAT.

Parameters are replicated. Hop ``L-1`` of a sampled batch is applied first. Evaluation is
full-graph, layer by layer, with the operator the sampled one estimates (the
full-neighbourhood mean ``D^{-1} A^T`` for sage, ``D^{-1}(A^T + I)`` for ladies, GIN's sum
``A^T + (1 + eps) I``) distributed 1.5D by CAGNET's staged broadcast SpMM
(:class:`~hpcgnn.spmm.block_row.BlockRowAggregation`, forward only), or for GAT over all
of every vertex's in-edges (the 1D / 1.5D neighbourhoods of :mod:`hpcgnn.spmm.block_row`).
GIN and GAT read the node-wise or LADIES sampler's blocks: the sum, or the attention, over
a row's sampled in-neighbours and itself (every row's vertex is among the block's input
rows: the seeds lead them node-wise, LADIES keeps them in its next vertex set).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from hpcgnn.backend import Device
from hpcgnn.kernels.attention import HeadIds, edge_pattern
from hpcgnn.kernels.dropout import global_columns, keep_pairs, rows_keep
from hpcgnn.kernels.gemm import matmul
from hpcgnn.kernels.sparse_input import SparseFeatures, as_dense
from hpcgnn.kernels.spmm import sparse_matmul
from hpcgnn.kinds import Layer
from hpcgnn.nn.gat import AttentionDrop, LocalNeighbourhood, Neighbourhood, gat_layer
from hpcgnn.nn.gcn import Input, dropout
from hpcgnn.nn.init import init_weights
from hpcgnn.nn.sampled import Agg, gin_layer, ladies_layer, sage_layer
from hpcgnn.rng import dropout_key
from hpcgnn.sampling.sampled import SampledBatch, SampledHop


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
    layer's output width ``f_l``: ``W_self, W_neigh, b`` (GraphSAGE), ``W_1, W_2, b``
    (GIN), ``W, a_src, a_dst, b`` (GAT: ``b`` of ``K f'``, or ``C`` after the output
    heads' mean), else ``W, b``.
    """
    per = kind.weights_per_layer
    mats = init_weights(widths, seed, dtype, kind, device)
    out: list[torch.Tensor] = []
    for layer in range(len(widths) - 1):
        out.extend(mats[per * layer : per * (layer + 1)])
        out.append(device.from_numpy(np.zeros(widths[layer + 1], dtype=dtype)).requires_grad_(True))
    return out


#: What a layer reads its input rows through: an aggregation ``H -> S H`` or GAT's edges.
Reader = Agg | Neighbourhood


class MinibatchModel:
    """GraphSAGE (mean), LADIES GCN, GIN or GAT layers on sampled batches.

    Parameters
    ----------
    kind
        The layers (``cfg.kind``): GraphSAGE's with a self weight, GIN's (an MLP kind),
        GAT's (attention), else LADIES' GCN layers.
    widths
        Layer widths ``f_0 .. f_L``.
    weights
        Per layer the kind's weights and a bias: ``W_self, W_neigh, b`` (sage), ``W, b``
        (ladies), ``W_1, W_2, b`` (gin), ``W, a_src, a_dst, b`` (gat); see
        :func:`sampled_weights`.
    attention_p
        GAT's drop probability of the attention coefficients while training.
    self_loops
        The sampled matrix ``S`` has ``A^T + I``'s pattern (LADIES, Cluster-GCN): GIN's sum
        counts a row's own entry ``1 + eps`` alone.
    rows_lead
        A hop's rows are its first columns (node-wise, Cluster-GCN), else its columns are
        sorted (LADIES); see :meth:`~hpcgnn.sampling.sampled.SampledHop.own_columns`.
    """

    def __init__(self, kind: Layer, widths: list[int], weights: list[torch.Tensor],
                 attention_p: float = 0.0, self_loops: bool = False,
                 rows_lead: bool = True) -> None:
        self.kind = kind
        self.layers = len(widths) - 1
        self.weights = weights
        self.attention_p = attention_p
        self.self_loops = self_loops
        self.rows_lead = rows_lead

    def _layer(
        self, layer: int, read: Reader, h: Input, seeds: int | None = None,
        drop: AttentionDrop | None = None,
    ) -> torch.Tensor:
        """Layer ``layer`` on the input rows ``h``: the first ``seeds`` rows' outputs.

        ``seeds`` ``None``: every row's (evaluation). A self weight multiplies those rows.
        """
        per = self.kind.weights_per_layer + 1  # and a bias
        params = self.weights[per * layer : per * (layer + 1)]
        last = layer == self.layers - 1
        if self.kind.attention:  # the reader is its edges (:meth:`_reader`)
            assert not callable(read)
            w, a_src, a_dst, b = params
            dst = read.dst if isinstance(read, LocalNeighbourhood) else None
            return gat_layer(h, w, a_src, a_dst, layer, last, read, matmul, drop, bias=b,
                             dst=dst)
        assert callable(read)
        if self.kind.mlp:
            return gin_layer(h, read, params, last)
        if self.kind.self_weight:
            h_self = h if seeds is None else (
                h.head(seeds) if isinstance(h, SparseFeatures) else h[:seeds]
            )
            return sage_layer(h_self, h, read, params, last)
        return ladies_layer(h, read, params, last)

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
        for layer in range(self.layers):
            hop = batch.hops[self.layers - 1 - layer]
            if keep is not None and p > 0.0:
                h = _dropout(h, keep, layer, hop.cols, p)
            h = self._layer(layer, self._reader(hop, h), h, len(hop.rows), drop)
        return as_dense(h)

    def _reader(self, hop: SampledHop, h: Input) -> Reader:
        """How the layer reads the hop's block: its matrix, GIN's sum, GAT's edges."""
        dtype = np.float32 if h.dtype == torch.float32 else np.float64
        if not (self.kind.mlp or self.kind.attention):  # where the hop was sampled
            return partial(sparse_matmul, hop.matrix(dtype))
        # every sampled edge counts 1, the row's own vertex 1 + eps
        own = hop.own_columns(self.rows_lead)
        block = hop.sum_matrix(1.0 + self.kind.eps, dtype, self.self_loops, own)
        if self.kind.mlp:
            return partial(sparse_matmul, block)
        device = h.nz_rows.device if isinstance(h, SparseFeatures) else h.device
        return LocalNeighbourhood(edge_pattern(block, hop.rows, hop.cols, device, h.dtype),
                                  torch.as_tensor(own, device=device))

    def forward_full(self, x: Input, op: Reader) -> torch.Tensor:
        """This process row's block of the full-graph logits (evaluation, no dropout).

        ``op``: ``H -> E H`` on this process row's block (the forward of a
        :class:`~hpcgnn.spmm.block_row.BlockRowAggregation`), or GAT's neighbourhood of it.
        """
        h: Input = x
        for layer in range(self.layers):
            h = self._layer(layer, op, h)
        return as_dense(h)


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
