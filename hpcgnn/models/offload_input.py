"""Offload's sparse input tier: ``X`` as CSR on the host, a block per chunk, ``X W`` on the device.

Held dense, the first layer of an offloaded GCN loads ``f_0``-wide neighbour rows of ``X``
(Planetoid: 1,433-3,703 columns, 1-2% nonzero) into every chunk's device buffer. Held
sparse (``--sparse-features``), the first layer runs in the order ``Â^T (X W)``:

1. **transform** (before the first layer's sweep): per chunk, its rows of ``X`` (after
   dropout of the nonzeros, on the host) go to the device as CSR (row pointers, column
   indices, values), ``T = X W`` (GraphSAGE: ``X W_neigh``, and the self term
   ``S = X W_self``) is an SpMM there, and its rows go back to the host tier;
2. the first layer's sweep loads the ``f_1``-wide neighbour rows of ``T`` through the
   deduplicated exchange like any layer's input, and ``Z = Â^T T`` (``+ S``) needs no GEMM;
3. its backward pushes ``dT = Â dZ`` into the owners' host buffers like any layer's input
   gradient; then, per chunk, the transposed CSR block goes to the device and
   ``dW += X^T dT`` (``dW_self += X^T dZ``).

The checkpoint tier (``offload_ckpt``) carries the CSR blocks (both ways of the product)
and the rows of ``T``, ``S``, ``dT`` and ``dZ`` that go through the host;
:func:`hpcgnn.cost.offload.predict_offload` predicts them exactly.
"""

from __future__ import annotations

import scipy.sparse as sp
import torch

from hpcgnn.backend import cpu
from hpcgnn.comm.communicator import Comm
from hpcgnn.exchange.offload import CKPT, rows_to_device, rows_to_host
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.kernels.spmm import spmm
from hpcgnn.nn.gcn import BlockMasks


def _scipy(x: SparseFeatures) -> sp.csr_matrix:
    return sp.csr_matrix(
        (x.values.numpy(), x.col.numpy(), x.crow.numpy()), shape=x.shape
    )


class SparseInput:
    """This rank's ``X`` as one host CSR block per chunk (in schedule order).

    Parameters
    ----------
    x
        This rank's rows of ``X`` (host, CSR).
    chunk_rows
        The chunks' row ranges ``(a, b)`` in the rank's rows, in schedule order.
    comm
        Where the copies are counted (``offload_ckpt``).
    """

    def __init__(self, x: SparseFeatures, chunk_rows: list[tuple[int, int]], comm: Comm
                 ) -> None:
        csr = _scipy(x)
        self.comm = comm
        self.chunk_rows = chunk_rows
        self.blocks = [SparseFeatures.from_matrix(csr[a:b], cpu()) for a, b in chunk_rows]
        self._dropped = self.blocks

    @property
    def nnz(self) -> int:
        """Nonzeros of this rank's ``X``."""
        return sum(b.nnz for b in self.blocks)

    @property
    def chunks(self) -> int:
        """Chunks with rows (an empty chunk moves nothing)."""
        return sum(1 for a, b in self.chunk_rows if b > a)

    def _upload(self, crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor,
                shape: tuple[int, int]) -> torch.Tensor:
        t0 = self.comm.stats.mark()
        dev = self.comm.device
        d_crow, d_col, d_values = (dev.to_device(t) for t in (crow, col, values))
        nbytes = sum(t.numel() * t.element_size() for t in (crow, col, values))
        self.comm.stats.record(CKPT, nbytes, since=t0)
        return torch.sparse_csr_tensor(d_crow, d_col, d_values, size=shape,
                                       check_invariants=False)

    def transform(
        self, ws: list[torch.Tensor], keep: BlockMasks | None, p: float,
        host: list[torch.Tensor],
    ) -> None:
        """Dropout of the nonzeros, then ``host[k][a:b] = X[a:b] ws[k]`` chunk by chunk.

        ``host``: one ``rows x f_1`` host buffer per weight (``T``; GraphSAGE ``S, T``).
        The dropped blocks are kept for :meth:`weight_grads`.
        """
        if keep is not None and p > 0.0:
            self._dropped = [
                blk.dropout(keep.entries(0, blk.nz_rows + a, blk.col), p)
                for blk, (a, _) in zip(self.blocks, self.chunk_rows, strict=True)
            ]
        else:
            self._dropped = self.blocks
        for blk, (a, b) in zip(self._dropped, self.chunk_rows, strict=True):
            if b == a:
                continue
            x = self._upload(blk.crow, blk.col, blk.values, blk.shape)
            for w, out in zip(ws, host, strict=True):
                rows_to_host(self.comm, out, a, b, spmm(x, w))

    def weight_grads(self, grads: list[torch.Tensor], host: list[torch.Tensor]) -> None:
        """``grads[k] += X^T host[k]`` chunk by chunk, ``X`` as dropped in :meth:`transform`.

        ``host``: per weight the gradient of its product (``dT``; GraphSAGE ``dZ, dT``).
        """
        for blk, (a, b) in zip(self._dropped, self.chunk_rows, strict=True):
            if b == a:
                continue
            xt = self._upload(blk.t_crow, blk.t_col, blk.values[blk.t_order],
                              (blk.shape[1], blk.shape[0]))
            for g, buf in zip(grads, host, strict=True):
                g += spmm(xt, rows_to_device(self.comm, buf, a, b))
        self._dropped = self.blocks
