"""Sparse input features: a rank's block of ``X`` as CSR, its dropout and its product ``X W``.

Bag-of-words features (Cora, CiteSeer, PubMed) are 1-10% nonzero. Held dense, the first
layer's dropout draws and applies a mask over every entry and ``X W`` multiplies the
zeros too; held as CSR (:class:`SparseFeatures`), dropout acts on the nonzeros only
(Kipf & Welling's sparse dropout) and ``X W`` is an SpMM (:func:`spmm`, cuSPARSE on a
GPU). The keep decisions are the dense mask's at the nonzeros
(:func:`hpcgnn.kernels.dropout.keep_pairs`), so both paths train the same model, to the
rounding of the two products.

The structure is fixed; only the values change (dropout), so the CSR of ``X^T`` that the
backward's ``dW = X^T G`` multiplies by is built once: its values are the current values
permuted (``t_order``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.backend import Device
from hpcgnn.comm.stats import CommStats
from hpcgnn.kernels.spmm import spmm


def _csr(crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor,
         shape: tuple[int, int]) -> torch.Tensor:
    return torch.sparse_csr_tensor(crow, col, values, size=shape, check_invariants=False)


@dataclass(frozen=True)
class SparseFeatures:
    """This rank's block of the input features as CSR (rows x columns of the block).

    Attributes
    ----------
    shape
        ``(rows, columns)`` of the block.
    crow, col, values
        The CSR arrays on the block's device (``int64`` indices).
    nz_rows
        The block row of each nonzero (``int64``), with ``col`` its block column.
    t_crow, t_col, t_order
        The CSR of the block's transpose; its values are ``values[t_order]``.
    """

    shape: tuple[int, int]
    crow: torch.Tensor
    col: torch.Tensor
    values: torch.Tensor
    nz_rows: torch.Tensor
    t_crow: torch.Tensor
    t_col: torch.Tensor
    t_order: torch.Tensor

    @classmethod
    def from_matrix(cls, x: np.ndarray | sp.spmatrix | sp.sparray, device: Device
                    ) -> SparseFeatures:
        """The nonzeros of a dense or SciPy sparse block ``x`` (its dtype kept) on ``device``."""
        a = sp.csr_matrix(x, copy=True)
        a.eliminate_zeros()
        a.sum_duplicates()
        nnz = a.nnz
        order = sp.csr_matrix((np.arange(nnz, dtype=np.int64), a.indices, a.indptr),
                              shape=a.shape).T.tocsr()
        order.sort_indices()
        rows = np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(a.indptr))

        def put(v: np.ndarray) -> torch.Tensor:
            return device.from_numpy(np.ascontiguousarray(v))

        return cls(
            shape=(int(a.shape[0]), int(a.shape[1])),
            crow=put(a.indptr.astype(np.int64)), col=put(a.indices.astype(np.int64)),
            values=put(a.data), nz_rows=put(rows),
            t_crow=put(order.indptr.astype(np.int64)),
            t_col=put(order.indices.astype(np.int64)),
            t_order=put(order.data.astype(np.int64)),
        )

    @property
    def dtype(self) -> torch.dtype:
        """The values' dtype."""
        return self.values.dtype

    @property
    def nnz(self) -> int:
        """Number of stored nonzeros."""
        return int(self.values.numel())

    def matrix(self) -> torch.Tensor:
        """The block as a ``torch.sparse_csr`` tensor."""
        return _csr(self.crow, self.col, self.values, self.shape)

    def transposed(self) -> torch.Tensor:
        """The block's transpose as a ``torch.sparse_csr`` tensor."""
        return _csr(self.t_crow, self.t_col, self.values[self.t_order],
                    (self.shape[1], self.shape[0]))

    def dropout(self, keep: torch.Tensor, p: float) -> SparseFeatures:
        """Inverted dropout of the nonzeros: ``values * keep / (1 - p)`` (a new block)."""
        return replace(self, values=torch.mul(self.values, keep).mul_(1.0 / (1.0 - p)))

    def head(self, n: int) -> SparseFeatures:
        """The block's first ``n`` rows (a sampled batch's seeds), values as they are now.

        The nonzeros of rows ``< n`` are the first ``crow[n]``; the transpose keeps those of
        its entries (``t_order < crow[n]``), its row pointers recounted on the device.
        """
        end = int(self.crow[n])
        kept = self.t_order < end
        starts = torch.cat([kept.new_zeros(1, dtype=torch.int64), kept.cumsum(0)])
        return SparseFeatures(
            shape=(n, self.shape[1]), crow=self.crow[: n + 1], col=self.col[:end],
            values=self.values[:end], nz_rows=self.nz_rows[:end], t_crow=starts[self.t_crow],
            t_col=self.t_col[kept], t_order=self.t_order[kept],
        )

    def to_dense(self) -> torch.Tensor:
        """The block as a dense tensor."""
        return self.matrix().to_dense()

    def matmul(self, w: torch.Tensor, stats: CommStats | None = None) -> torch.Tensor:
        """Differentiable (in ``w``) ``X W``, timed as ``gemm`` into ``stats`` when given."""
        return _SparseInputMatmul.apply(w, self, stats)


def dense(x: np.ndarray | sp.spmatrix) -> np.ndarray:
    """A feature block as read (dense, or SciPy CSR) as a C-contiguous dense array."""
    return np.ascontiguousarray(x if isinstance(x, np.ndarray) else x.toarray())


def nonzeros(x: np.ndarray | sp.spmatrix) -> int:
    """Nonzero entries of a feature block as read (dense, or SciPy CSR)."""
    return int(np.count_nonzero(x)) if isinstance(x, np.ndarray) else int(x.nnz)


def held_features(x: np.ndarray | sp.spmatrix, sparse: bool, device: Device
                  ) -> torch.Tensor | SparseFeatures:
    """A feature block as read, held on ``device`` as CSR (``sparse``) or dense."""
    return SparseFeatures.from_matrix(x, device) if sparse else device.from_numpy(dense(x))


def as_dense(x: torch.Tensor | SparseFeatures) -> torch.Tensor:
    """``x`` as a dense tensor (sparse features made dense, a dense tensor unchanged)."""
    return x.to_dense() if isinstance(x, SparseFeatures) else x


class _SparseInputMatmul(torch.autograd.Function):
    """``X W`` for constant sparse ``X``; backward ``dW = X^T G`` (no gradient for ``X``)."""

    @staticmethod
    def forward(ctx, w: torch.Tensor, x: SparseFeatures, stats: CommStats | None
                ) -> torch.Tensor:
        ctx.x, ctx.stats = x, stats
        with gemm_phase(stats):
            return spmm(x.matrix(), w.detach())

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        with gemm_phase(ctx.stats):
            return spmm(ctx.x.transposed(), g.contiguous()), None, None


def gemm_phase(stats: CommStats | None) -> AbstractContextManager:
    """Time what runs inside as the ``gemm`` phase of ``stats`` (nothing without it)."""
    return nullcontext() if stats is None else stats.phase("gemm")
