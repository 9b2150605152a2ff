"""The GCN of Kipf & Welling in CAGNET's matrix form, independent of the data layout.

Forward, per layer ``l``: ``Z^l = Â^T H^{l-1} W^l`` and ``H^l = ReLU(Z^l)`` (no
activation on the last layer, whose ``Z^L`` are the logits); dropout with probability
``p`` on each layer's input ``H^{l-1}`` during training. The product is evaluated as
``(Â^T H) W`` or ``Â^T (H W)``, whichever makes the SpMM narrower (see
:func:`transform_first`): a layer from 128 features to 16 then moves 16-wide rows.
The product ``Â^T H`` is an *aggregation operator* supplied by the caller: a local
SpMM for the serial reference, a distributed SpMM (1D, 1.5D, 2D, 3D) otherwise. Its
backward is ``Â G``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import torch

from hpcgnn.comm.stats import CommStats
from hpcgnn.layout.order import transform_first


class Aggregation(Protocol):
    """``Â^T H`` on this rank's block of ``H`` and its adjoint ``Â G``."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Return this rank's block of ``Â^T H`` given its block of ``H``."""

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        """Return this rank's block of ``Â G`` given its block of ``G``."""


class _Aggregate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, op: Aggregation) -> torch.Tensor:  # type: ignore[override]
        ctx.op = op
        return op.forward(h.detach())

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return ctx.op.backward(g.contiguous()), None


def aggregate(h: torch.Tensor, op: Aggregation) -> torch.Tensor:
    """Differentiable ``Â^T H`` through ``op``."""
    return _Aggregate.apply(h, op)


class _TimedMatmul(torch.autograd.Function):
    """``T W`` whose forward and backward GEMMs are timed as the ``gemm`` phase."""

    @staticmethod
    def forward(ctx, t: torch.Tensor, w: torch.Tensor, stats: CommStats) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(t, w)
        ctx.stats = stats
        with stats.phase("gemm"):
            return t @ w

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:  # type: ignore[override]
        t, w = ctx.saved_tensors
        with ctx.stats.phase("gemm"):
            dt = g @ w.T if ctx.needs_input_grad[0] else None
            dw = t.T @ g if ctx.needs_input_grad[1] else None
        return dt, dw, None


def matmul(t: torch.Tensor, w: torch.Tensor, stats: CommStats | None = None) -> torch.Tensor:
    """Differentiable ``T W``, timed into ``stats`` when given."""
    return t @ w if stats is None else _TimedMatmul.apply(t, w, stats)


def gcn_forward(
    h0: torch.Tensor,
    weights: list[torch.Tensor],
    ops: list[Aggregation],
    dropout: float,
    keep_mask: Callable[[int], np.ndarray] | None,
    stats: CommStats | None = None,
) -> torch.Tensor:
    """Run the GCN forward on this rank's block and return its block of the logits.

    Parameters
    ----------
    h0
        This rank's block of the input features.
    weights
        ``W^1 .. W^L`` (replicated, or this rank's column block of them).
    ops
        One aggregation operator per layer.
    dropout
        Drop probability; applied when ``keep_mask`` is given.
    keep_mask
        ``keep_mask(layer)`` returns the boolean keep-mask of this rank's block of the
        layer's input, or ``None`` for evaluation (no dropout).
    stats
        Where to time the dense products (phase ``gemm``), if given.
    """
    h = h0
    last = len(weights) - 1
    for layer, (w, op) in enumerate(zip(weights, ops, strict=True)):
        if keep_mask is not None and dropout > 0.0:
            keep = torch.from_numpy(keep_mask(layer))
            h = h * keep.to(h.dtype) * (1.0 / (1.0 - dropout))
        if transform_first(layer, w.shape[0], w.shape[1]):
            z = aggregate(matmul(h, w, stats), op)
        else:
            z = matmul(aggregate(h, op), w, stats)
        h = z if layer == last else torch.relu(z)
    return h


def cross_entropy_sum(
    logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Sum (not mean) of the cross-entropy over the rows selected by ``mask``.

    Distributed callers all-reduce the sum and divide by the *global* number of training
    vertices, so the loss equals the serial mean exactly.
    """
    if not bool(mask.any()):
        return logits.sum() * 0.0
    return torch.nn.functional.cross_entropy(logits[mask], labels[mask], reduction="sum")


def correct_count(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> int:
    """Number of rows under ``mask`` whose arg-max equals the label."""
    if not bool(mask.any()):
        return 0
    return int((logits[mask].argmax(dim=1) == labels[mask]).sum())
