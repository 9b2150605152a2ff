"""Replicated model parameters, optimiser, and their fingerprint."""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from hpcgnn.config import TrainConfig
from hpcgnn.layout.order import layer_sizes
from hpcgnn.nn.init import glorot_weights


def init_weights(num_features: int, num_classes: int, cfg: TrainConfig) -> list[torch.Tensor]:
    """Glorot weights ``W^1..W^L`` as leaf tensors, identical on every rank for ``cfg.seed``."""
    sizes = layer_sizes(num_features, cfg.hidden, num_classes, cfg.layers)
    np_dtype = np.float64 if cfg.dtype == "float64" else np.float32
    return [
        torch.from_numpy(w).requires_grad_(True)
        for w in glorot_weights(sizes, cfg.seed, np_dtype)
    ]


def make_optimizer(weights: list[torch.Tensor], cfg: TrainConfig) -> torch.optim.Adam:
    """Adam with L2 weight decay on every weight matrix (Kipf & Welling's setting)."""
    return torch.optim.Adam(weights, lr=cfg.lr, weight_decay=cfg.weight_decay)


def params_sha256(weights: list[torch.Tensor]) -> str:
    """SHA-256 of ``W^1, ..., W^L`` as float32 bytes, each in row-major (C) order."""
    h = hashlib.sha256()
    for w in weights:
        h.update(np.ascontiguousarray(w.detach().cpu().numpy(), dtype=np.float32).tobytes())
    return h.hexdigest()
