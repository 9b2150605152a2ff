"""1D distributed SpMM (CAGNET Algorithm 1): block rows, one broadcast stage per rank.

Rank ``i`` of ``P`` owns block row ``i`` of ``Â^T``, ``Â`` and ``H``. Forward,
``T_i = sum_j Â^T_ij H_j``: at stage ``j`` rank ``j`` broadcasts ``H_j`` and every rank
multiplies it by its column block ``j``. Backward, ``(Â G)_i = sum_j Â_ij G_j``, the same
with ``G``. Per layer each rank receives ``(n - n_i) f`` words in each direction.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.dist.local_blocks import split_columns
from hpcgnn.kernels.spmm import spmm, to_torch_csr

DENSE_BCAST = "dense_bcast"


class StagedBroadcastSpMM:
    """``Y_i = sum_j M_ij X_j`` with ``X_j`` broadcast from rank ``j`` of ``comm``.

    Parameters
    ----------
    comm
        Communicator over which the blocks ``X_j`` are distributed (rank ``j`` holds
        ``X_j``).
    local
        This rank's block row of ``M`` (all columns), as SciPy CSR.
    offsets
        Column offsets of the blocks ``X_j`` (``len(offsets) == comm.size + 1``).
    dtype
        Torch dtype of values and dense blocks.
    category
        Communication category of the broadcasts.

    """

    def __init__(
        self, comm: Comm, local: sp.csr_matrix, offsets: np.ndarray, dtype: torch.dtype,
        category: str = DENSE_BCAST,
    ) -> None:
        self.comm = comm
        self.offsets = offsets
        self.blocks = [to_torch_csr(b, dtype) for b in split_columns(local, offsets)]
        self.rows = local.shape[0]
        self.category = category

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Return this rank's block row of ``M X`` given its block ``X_i``."""
        f = x.shape[1]
        out = torch.zeros((self.rows, f), dtype=x.dtype)
        for j, block in enumerate(self.blocks):
            if j == self.comm.rank:
                xj = x.contiguous()
            else:
                xj = torch.empty((int(self.offsets[j + 1] - self.offsets[j]), f), dtype=x.dtype)
            self.comm.bcast(xj, j, self.category)
            out += spmm(block, xj)
        return out


class OneDAggregation:
    """``Â^T H`` forward and ``Â G`` backward on a 1D grid."""

    def __init__(
        self, comm: Comm, a_t_rows: sp.csr_matrix, a_rows: sp.csr_matrix, offsets: np.ndarray,
        dtype: torch.dtype,
    ) -> None:
        self._fwd = StagedBroadcastSpMM(comm, a_t_rows, offsets, dtype)
        self._bwd = StagedBroadcastSpMM(comm, a_rows, offsets, dtype)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """This rank's block row of ``Â^T H``."""
        return self._fwd(h)

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        """This rank's block row of ``Â G``."""
        return self._bwd(g)
