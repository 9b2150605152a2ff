"""Layers of the sampled (minibatch) models, with injected parameters.

- GraphSAGE with the mean aggregator:
  ``h_v' = act(W_self^T h_v + W_neigh^T mean_{u in N_s(v)} h_u + b)``;
- LADIES' GCN layer: ``H' = act(Â_s H W + b)`` with ``Â_s`` the sampled, rescaled block;
- GIN on a node-wise block: ``h_v' = act(ReLU(((1 + eps) h_v + sum_{u in N_s(v)} h_u) W_1)
  W_2 + b)``, the sum and the self term one operator (as full-batch GIN's);
- GAT on a node-wise block: :func:`hpcgnn.nn.gat.gat_layer` over the sampled in-edges and
  the self loop, with a bias.

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


def gin_layer(h: Input, agg: Agg, params: list[torch.Tensor], last: bool) -> torch.Tensor:
    """GIN ``act(ReLU(agg(h) W_1) W_2 + b)``; params ``W_1, W_2, b``.

    ``agg``: the sampled sum with ``1 + eps`` on the seeds' own columns. Sparse input
    features: ``agg(h W_1)``, the product associated the other way.
    """
    w_1, w_2, b = params
    u = agg(matmul(h, w_1)) if isinstance(h, SparseFeatures) else agg(h) @ w_1
    return activate(torch.relu(u) @ w_2 + b, last)


def ladies_layer(h: Input, agg: Agg, params: list[torch.Tensor], last: bool) -> torch.Tensor:
    """LADIES GCN layer: ``act(agg(h W) + b)``; ``params = [W, b]``."""
    w, b = params
    return activate(agg(matmul(h, w)) + b, last)
