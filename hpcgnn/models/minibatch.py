"""The sampled models of ``--mode minibatch``: GraphSAGE (mean) and LADIES, parameters replicated.

Hop ``L-1`` of a sampled batch is applied first. Evaluation is full-graph, layer by
layer, with the operator the sampled one estimates (the full-neighbourhood mean
``D^{-1} A^T`` for sage, ``D^{-1}(A^T + I)`` for ladies) distributed 1.5D by CAGNET's
staged broadcast SpMM (:class:`~hpcgnn.spmm.block_row.BlockRowAggregation`, forward only).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import torch

from hpcgnn.backend import Device
from hpcgnn.kernels.spmm import sparse_matmul
from hpcgnn.kinds import LayerKind
from hpcgnn.nn.gcn import dropout
from hpcgnn.nn.init import init_weights
from hpcgnn.nn.sampled import Agg, ladies_layer, sage_layer
from hpcgnn.sampling.sampled import SampledBatch

#: ``keep(layer, vertex_ids, width)``: dropout keep-mask of a layer's input rows.
RowKeep = Callable[[int, np.ndarray, int], torch.Tensor]


def sampled_weights(
    kind: LayerKind, widths: list[int], seed: int, dtype: np.dtype | type, device: Device
) -> list[torch.Tensor]:
    """Glorot weights and zero biases of ``kind``'s layers, on ``device``.

    Per layer ``W_self, W_neigh, b`` (a self weight, GraphSAGE) or ``W, b``.
    """
    per = kind.weights_per_layer
    mats = init_weights(widths, seed, dtype, kind, device)
    out: list[torch.Tensor] = []
    for layer in range(len(widths) - 1):
        out.extend(mats[per * layer : per * (layer + 1)])
        out.append(device.from_numpy(np.zeros(widths[layer + 1], dtype=dtype)).requires_grad_(True))
    return out


class MinibatchModel:
    """GraphSAGE (mean) or LADIES GCN on sampled batches.

    Parameters
    ----------
    kind
        The layers the sampler trains (:attr:`hpcgnn.sampling.samplers.Sampler.kind`):
        GraphSAGE's with a self weight, else LADIES' GCN layers.
    widths
        Layer widths ``f_0 .. f_L``.
    weights
        Per layer ``W_self, W_neigh, b`` (sage) or ``W, b`` (ladies); see
        :func:`sampled_weights`.
    """

    def __init__(self, kind: LayerKind, widths: list[int], weights: list[torch.Tensor]) -> None:
        self.kind = kind
        self.layers = len(widths) - 1
        self.weights = weights

    def _layer(self, layer: int, h_self: torch.Tensor, agg: Agg, h: torch.Tensor) -> torch.Tensor:
        per = self.kind.weights_per_layer + 1  # and a bias
        params = self.weights[per * layer : per * (layer + 1)]
        last = layer == self.layers - 1
        if self.kind.self_weight:
            return sage_layer(h_self, h, agg, params, last)
        return ladies_layer(h, agg, params, last)

    def forward_batch(
        self, batch: SampledBatch, x: torch.Tensor, p: float, keep: RowKeep | None,
    ) -> torch.Tensor:
        """Logits of the batch's seeds from the features ``x`` of its input vertices."""
        h = x
        for layer in range(self.layers):
            hop = batch.hops[self.layers - 1 - layer]
            if keep is not None and p > 0.0:
                h = dropout(h, keep(layer, hop.cols, h.shape[1]), p)
            a = hop.matrix(np.float32 if h.dtype == torch.float32 else np.float64)
            h = self._layer(layer, h[: len(hop.rows)], partial(sparse_matmul, a), h)
        return h

    def forward_full(self, x: torch.Tensor, op: Agg) -> torch.Tensor:
        """This process row's block of the full-graph logits (evaluation, no dropout).

        ``op``: ``H -> E H`` on this process row's block (the forward of a
        :class:`~hpcgnn.spmm.block_row.BlockRowAggregation`).
        """
        h = x
        for layer in range(self.layers):
            h = self._layer(layer, h, op, h)
        return h
