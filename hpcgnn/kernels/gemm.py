"""Local dense products ``T W`` with their backward, timed as the ``gemm`` phase."""

from __future__ import annotations

import torch

from hpcgnn.comm.stats import CommStats
from hpcgnn.kernels.sparse_input import SparseFeatures


class _TimedMatmul(torch.autograd.Function):
    """``T W`` whose forward and backward GEMMs are timed as the ``gemm`` phase."""

    @staticmethod
    def forward(ctx, t: torch.Tensor, w: torch.Tensor, stats: CommStats) -> torch.Tensor:
        ctx.save_for_backward(t, w)
        ctx.stats = stats
        with stats.phase("gemm"):
            return t @ w

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        t, w = ctx.saved_tensors
        with ctx.stats.phase("gemm"):
            dt = g @ w.T if ctx.needs_input_grad[0] else None
            dw = t.T @ g if ctx.needs_input_grad[1] else None
        return dt, dw, None


def matmul(
    t: torch.Tensor | SparseFeatures, w: torch.Tensor, stats: CommStats | None = None
) -> torch.Tensor:
    """Differentiable ``T W``, timed into ``stats`` when given; sparse ``T``: an SpMM."""
    if isinstance(t, SparseFeatures):
        return t.matmul(w, stats)
    return t @ w if stats is None else _TimedMatmul.apply(t, w, stats)
