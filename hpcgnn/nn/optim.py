"""The optimiser every mode trains with: Adam, L2 weight decay on the first layer or on all."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from hpcgnn.config import TrainConfig


def load_optimizer_libraries() -> None:
    """Import what torch's optimisers import when the first one is made (``torch._dynamo``).

    ``torch.optim.Optimizer`` imports ``torch._dynamo`` and sympy with the first optimiser
    of a process: about 70 MiB on the CPU, the same in every run. A run imports them before
    its start mark (:func:`hpcgnn.training.run.train`), so that the peak it measures above
    the start (the metrics' ``memory``) is the model's, not a library's.
    """
    import torch._dynamo  # noqa: F401


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
