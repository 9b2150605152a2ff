"""Parameter initialisation, identical on every rank for a given seed."""

from __future__ import annotations

import numpy as np
import torch


def glorot_weights(
    sizes: list[int], seed: int, dtype: np.dtype | type = np.float32
) -> list[np.ndarray]:
    """Glorot-uniform weight matrices ``W^l`` of shape ``(sizes[l-1], sizes[l])``.

    Drawn in layer order from one PCG64 stream seeded by ``seed``, so every rank (and the
    serial reference) gets bit-identical weights.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    out = []
    for fin, fout in zip(sizes[:-1], sizes[1:], strict=True):
        bound = np.sqrt(6.0 / (fin + fout))
        out.append(rng.uniform(-bound, bound, size=(fin, fout)).astype(dtype))
    return out


def init_weights(
    widths: list[int], seed: int, dtype: np.dtype | type = np.float32
) -> list[torch.Tensor]:
    """Glorot weights ``W^1..W^L`` as leaf tensors, identical on every rank for ``seed``."""
    return [torch.from_numpy(w).requires_grad_(True) for w in glorot_weights(widths, seed, dtype)]
