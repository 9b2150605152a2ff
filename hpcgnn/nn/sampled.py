"""Layers of the sampled (minibatch) models, with injected parameters.

- GraphSAGE with the mean aggregator:
  ``h_v' = act(W_self^T h_v + W_neigh^T mean_{u in N_s(v)} h_u + b)``;
- LADIES' GCN layer: ``H' = act(Â_s H W + b)`` with ``Â_s`` the sampled, rescaled block.

``act`` is ReLU except on the last layer (:func:`hpcgnn.nn.gcn.activate`); ``agg`` is the
layer's aggregation (a sampled hop matrix, or the full-graph operator in evaluation).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from hpcgnn.kernels.gemm import matmul
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.nn.gcn import Input, activate

Agg = Callable[[torch.Tensor], torch.Tensor]


def sage_layer(
    h_self: Input, h: Input, agg: Agg, params: list[torch.Tensor], last: bool
) -> torch.Tensor:
    """GraphSAGE-mean ``act(h_self W_self + agg(h) W_neigh + b)``; params ``W_self, W_neigh, b``.

    Sparse input features (the first layer's): ``agg(h W_neigh)``, the same product
    associated the other way, so the wide rows are multiplied by an SpMM before the mean.
    """
    w_self, w_neigh, b = params
    neigh = agg(matmul(h, w_neigh)) if isinstance(h, SparseFeatures) else agg(h) @ w_neigh
    return activate(matmul(h_self, w_self) + neigh + b, last)


def ladies_layer(h: Input, agg: Agg, params: list[torch.Tensor], last: bool) -> torch.Tensor:
    """LADIES GCN layer: ``act(agg(h W) + b)``; ``params = [W, b]``."""
    w, b = params
    return activate(agg(matmul(h, w)) + b, last)
