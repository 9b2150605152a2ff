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

from hpcgnn.nn.gcn import activate

Agg = Callable[[torch.Tensor], torch.Tensor]


def sage_layer(
    h_self: torch.Tensor, h: torch.Tensor, agg: Agg, params: list[torch.Tensor], last: bool
) -> torch.Tensor:
    """GraphSAGE-mean ``act(h_self W_self + agg(h) W_neigh + b)``; params ``W_self, W_neigh, b``."""
    w_self, w_neigh, b = params
    return activate(h_self @ w_self + agg(h) @ w_neigh + b, last)


def ladies_layer(h: torch.Tensor, agg: Agg, params: list[torch.Tensor], last: bool) -> torch.Tensor:
    """LADIES GCN layer: ``act(agg(h W) + b)``; ``params = [W, b]``."""
    w, b = params
    return activate(agg(h @ w) + b, last)
