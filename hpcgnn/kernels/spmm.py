"""Local sparse x dense products, the one place that picks the SpMM implementation.

Every local SpMM of the distributed algorithms calls :func:`spmm`, and every sparse block
becomes a tensor through :func:`to_torch_csr` (int32 indices on a GPU where they fit);
results are allocated on the device of their input: ``torch.sparse.mm`` on
``torch.sparse_csr`` tensors, which is cuSPARSE on a GPU and MKL on the host.
:func:`sparse_matmul` multiplies a sampled hop matrix (SciPy CSR, minibatch mode) with
dense rows, differentiably, through the same :func:`spmm` on every device.

On the host, with one torch thread, a wide dense operand is multiplied in column blocks
(:func:`column_block`, :func:`default_block`): MKL's CSR SpMM gathers whole rows of ``H``
per nonzero and falls to a third of its per-column rate once ``H`` outgrows the cache
(width >= 64 on a 20k-vertex graph), while a block of ``H`` that stays cache-resident keeps
the narrow rate. Each output element is the same sum in the same order either way where
MKL runs one kernel for both widths; where its kernels for the block's width and the whole
width round differently (an AVX-512 Xeon: widths 4 to 24), :func:`exact_block` widens the
block until they agree, so the blocked product equals the unblocked one bit for bit.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.backend.csr import index_dtype, to_torch_csr

__all__ = [
    "column_block",
    "default_block",
    "exact_block",
    "index_dtype",
    "sparse_matmul",
    "spmm",
    "to_torch_csr",
    "transposed_csr",
]

#: Bytes of a column block of ``H`` the host SpMM aims to keep cache-resident (half of one
#: core's 1 MiB L2 here: the rows a block gathers stay there between nonzeros).
BLOCK_BYTES = 512 * 1024
#: Narrowest column block, in bytes per row: one 64-byte cache line (16 float32 columns),
#: what one gathered row brings in anyway.
LINE_BYTES = 64


def column_block(rows: int, width: int, itemsize: int) -> int:
    """Columns per block of a ``rows x width`` dense operand in the host SpMM.

    The widest multiple of a cache line (:data:`LINE_BYTES`) whose block of ``H`` fits
    :data:`BLOCK_BYTES`, at least one line and at most ``width`` (``width``: no blocking).
    """
    line = max(1, LINE_BYTES // itemsize)
    fit = BLOCK_BYTES // max(1, rows * itemsize) // line * line
    return max(1, min(width, max(line, fit)))


#: Widest dense row, in bytes, that torch's one call takes whole when it runs several
#: threads: on a quiet 2-core machine (SBM-20k) the whole product and column blocks were
#: even up to 128 float32 columns, and blocks 1.2-3x faster at 256 and 1.5x at 512.
WHOLE_ROW_BYTES = 512


def default_block(rows: int, width: int, itemsize: int) -> int:
    """The host SpMM's column block: :func:`column_block` at one torch thread, or wide rows.

    At one thread blocks win from 64 columns up. With more threads each block's product is
    a parallel region of its own, so rows up to :data:`WHOLE_ROW_BYTES` go whole (blocks
    lost up to 1.5x at 64 columns there, and at a load of 25-33 on 2 cores they took 4-8x
    the single call); wider ones are blocked.
    """
    if torch.get_num_threads() != 1 and width * itemsize <= WHOLE_ROW_BYTES:
        return width
    return column_block(rows, width, itemsize)


def spmm(a: torch.Tensor, h: torch.Tensor, block: int | None = None) -> torch.Tensor:
    """Return ``a @ h`` for a ``torch.sparse_csr`` matrix ``a`` and dense ``h``.

    Handles empty blocks (zero rows, columns or nonzeros) that appear on uneven grids. The
    result lives on ``h``'s device.

    Parameters
    ----------
    a
        The sparse matrix, on ``h``'s device.
    h
        The dense operand, ``a.shape[1]`` rows.
    block
        Columns of ``h`` per product on the host; ``None``: :func:`default_block` of
        ``h``'s shape. A device operand is multiplied whole (cuSPARSE does its own
        tiling), and so is a product autograd records (an operand requiring a gradient:
        its backward stays torch's own). Any block gives the same result bit for bit.
    """
    rows, width = a.shape[0], h.shape[1]
    if rows == 0 or width == 0 or a.shape[1] == 0 or a.values().numel() == 0:
        return torch.zeros((rows, width), dtype=h.dtype, device=h.device)
    recorded = torch.is_grad_enabled() and (h.requires_grad or a.requires_grad)
    if h.device.type != "cpu" or recorded:
        return torch.sparse.mm(a, h)
    if block is None:
        block = default_block(h.shape[0], width, h.element_size())
    block = exact_block(block, width, h.dtype)
    if block >= width:
        return torch.sparse.mm(a, h)
    return _column_blocks(a, h, block)


@functools.cache
def exact_block(block: int, width: int, dtype: torch.dtype) -> int:
    """The narrowest column block from ``block`` up (doubling) summed as the whole product.

    ``width`` (no blocking) where none is. MKL picks its CSR SpMM kernel by the dense
    operand's width, and on some CPUs the kernels sum differently: on an AVX-512 Xeon
    widths 4, 8, ..., 24 (float32 and float64) gave other bits than a column alone or 25
    and more columns, so 16-column blocks of a 64-wide product changed its last bits.
    Probed once per ``(block, width, dtype)`` on a matrix of long rows of values over eight
    decades (a different order or fused multiply-add shows), as
    :func:`hpcgnn.kernels.attention.sums_in_order` probes ``sum``. On a CPU whose kernels
    agree the block is ``block`` itself.
    """
    if block >= width:
        return width
    rng = np.random.default_rng(width)
    a = sp.random(48, 96, density=0.3, random_state=block, format="csr", dtype=np.float64)
    a.data = rng.standard_normal(a.nnz) * 10.0 ** rng.integers(-4, 4, a.nnz)
    t = to_torch_csr(a, dtype)
    h = torch.from_numpy(rng.standard_normal((96, width))).to(dtype)
    whole = torch.sparse.mm(t, h)
    while block < width:
        if torch.equal(_column_blocks(t, h, block), whole):
            return block
        block *= 2
    return width


def _column_blocks(a: torch.Tensor, h: torch.Tensor, block: int) -> torch.Tensor:
    """``a @ h`` on the host as one product per ``block`` columns of ``h`` (the last narrower).

    Each block of ``h`` is copied out contiguous, multiplied and copied into its columns of
    the output. (Laying all blocks out by one permuting copy and multiplying into one
    buffer measured 2-3x slower: torch's permuting copies are slow here.)
    """
    rows, width = a.shape[0], h.shape[1]
    out = torch.empty((rows, width), dtype=torch.promote_types(a.dtype, h.dtype))
    for lo in range(0, width, block):
        out[:, lo : lo + block] = torch.sparse.mm(a, h[:, lo : lo + block].contiguous())
    return out


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
    the same order whichever way the matrix came; with ``a``'s index dtype.
    """
    rows, cols = a.shape
    idx = a.crow_indices().dtype
    row, perm, crow_t = transpose_index(a.crow_indices(), a.col_indices(), cols)
    return torch.sparse_csr_tensor(crow_t.to(idx), row[perm].to(idx), a.values()[perm],
                                   size=(cols, rows), check_invariants=False)
