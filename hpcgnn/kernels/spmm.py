"""Local sparse x dense products, the one place that picks the SpMM implementation.

Every local SpMM of the distributed algorithms calls :func:`spmm`, and every sparse block
becomes a tensor through :func:`to_torch_csr`; results are allocated on the device of
their input: ``torch.sparse.mm`` on ``torch.sparse_csr`` tensors, which is cuSPARSE on a
GPU. :func:`sparse_matmul` multiplies a sampled hop matrix (SciPy CSR, minibatch mode)
with dense rows, differentiably, through the same :func:`spmm` on every device.
"""

from __future__ import annotations

import scipy.sparse as sp
import torch

from hpcgnn.backend.csr import to_torch_csr

__all__ = ["sparse_matmul", "spmm", "to_torch_csr", "transposed_csr"]


def spmm(a: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Return ``a @ h`` for a ``torch.sparse_csr`` matrix ``a`` and dense ``h``.

    Handles empty blocks (zero rows, columns or nonzeros) that appear on uneven grids. The
    result lives on ``h``'s device.
    """
    rows = a.shape[0]
    if rows == 0 or h.shape[1] == 0 or a.shape[1] == 0 or a.values().numel() == 0:
        return torch.zeros((rows, h.shape[1]), dtype=h.dtype, device=h.device)
    return torch.sparse.mm(a, h)


class _SparseMatmul(torch.autograd.Function):
    """``A H`` for a constant SciPy CSR ``A`` (or CSR tensor on ``H``'s device); backward ``A^T G``.

    One code path on every device: ``A`` becomes a CSR tensor on ``H``'s device for the
    forward, ``A^T`` (transposed on the host, or by :func:`transposed_csr` for a tensor)
    once more for the backward, and both products
    are :func:`spmm` (``torch.sparse.mm``; cuSPARSE on a GPU), so the host run and the GPU
    run (or the emulated one, bit for bit) compute the same sums.
    """

    @staticmethod
    def forward(ctx, h: torch.Tensor, a: sp.csr_matrix | torch.Tensor) -> torch.Tensor:
        ctx.a = a
        if isinstance(a, torch.Tensor):
            return spmm(a.to(h.dtype), h.detach())
        return spmm(to_torch_csr(a, h.dtype, h.device), h.detach())

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        a = ctx.a
        if isinstance(a, torch.Tensor):
            return spmm(transposed_csr(a).to(g.dtype), g.contiguous()), None
        return spmm(to_torch_csr(a.T.tocsr(), g.dtype, g.device), g.contiguous()), None


def sparse_matmul(a: sp.csr_matrix | torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Differentiable (in ``h``) product of a sampled hop matrix with dense rows.

    ``a``: a SciPy CSR matrix (copied to ``h``'s device), or a ``torch.sparse_csr`` tensor
    already on it (a hop sampled on the GPU). The result lives on ``h``'s device.
    """
    return _SparseMatmul.apply(h, a)


def transpose_index(
    crow: torch.Tensor, col: torch.Tensor, cols: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The transpose of a CSR pattern ``(crow, col)`` with ``cols`` columns, on its device.

    Returns each entry's row, the entries in the transpose's order (a stable sort by
    column: the rows of a column ascending, the order SciPy's ``A.T.tocsr()`` gives) and
    the transpose's row pointer.
    """
    row = torch.repeat_interleave(torch.arange(len(crow) - 1, device=col.device),
                                  torch.diff(crow))
    perm = torch.argsort(col, stable=True)
    crow_t = torch.zeros(cols + 1, dtype=torch.int64, device=col.device)
    torch.cumsum(torch.bincount(col, minlength=cols), 0, out=crow_t[1:])
    return row, perm, crow_t


def transposed_csr(a: torch.Tensor) -> torch.Tensor:
    """``A^T`` of a ``torch.sparse_csr`` tensor, on its device, as SciPy's ``A.T.tocsr()``.

    In SciPy's entry order (:func:`transpose_index`), so the SpMM of the backward sums in
    the same order whichever way the matrix came.
    """
    rows, cols = a.shape
    row, perm, crow_t = transpose_index(a.crow_indices(), a.col_indices(), cols)
    return torch.sparse_csr_tensor(crow_t, row[perm], a.values()[perm], size=(cols, rows),
                                   check_invariants=False)
