"""The optimiser every mode trains with: Adam, L2 weight decay on the first layer or on all."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from hpcgnn.config import TrainConfig


def make_optimizer(
    weights: Sequence[torch.Tensor], cfg: TrainConfig, first_layer: int
) -> torch.optim.Adam:
    """Adam with L2 weight decay on the first layer's parameters, or on all of them.

    ``weights`` are in layer order, the first layer's ``first_layer`` leading.
    ``cfg.weight_decay_layers``: ``first`` (Kipf & Welling's GCN: the decay on ``W^1``
    only) or ``all``. Parameter indices are ``weights``' order in both (the checkpoints'
    optimizer state is keyed by them).
    """
    if cfg.weight_decay_layers == "all":
        return torch.optim.Adam(weights, lr=cfg.lr, weight_decay=cfg.weight_decay)
    groups = [
        {"params": list(weights[:first_layer]), "weight_decay": cfg.weight_decay},
        {"params": list(weights[first_layer:]), "weight_decay": 0.0},
    ]
    return torch.optim.Adam([g for g in groups if g["params"]], lr=cfg.lr)
