"""Block-row distributed SpMM: CAGNET 1D (Algorithm 1) and 1.5D (Algorithm 2).

Grid ``(P/c) x c`` (1D is ``c = 1``). ``Â^T``, ``Â`` and ``H`` are split into ``P/c``
block rows; process row ``i`` holds block row ``i``, replicated on its ``c`` processes.
The ``P/c`` stages of ``T_i = sum_k Â^T_ik H_k`` are split into ``c`` chunks of
consecutive stages, chunk ``j`` done by process column ``j``: for each ``k`` in the chunk,
``P(k, j)`` broadcasts ``H_k`` down column ``j`` and every ``P(i, j)`` adds
``Â^T_ik H_k``. The ``c`` partial sums of a process row are then all-reduced along it.
Backward ``(Â G)_i`` is the same with ``Â`` and ``G``.

When ``c`` does not divide ``P/c`` the chunks differ by one stage (the first
``(P/c) mod c`` columns take one more), rather than the paper's "extra stages to the last
column", which leaves the last column up to ``c - 1`` stages behind.

Per layer and direction each rank receives ``sum_{k in chunk_j, k != i} n_k f`` words by
broadcast and ``2 n_i f (c - 1) / c`` by the all-reduce.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from mpi4py import MPI

from hpcgnn.comm.communicator import Comm
from hpcgnn.kernels.attention import RowReduce, edge_pattern
from hpcgnn.kernels.spmm import spmm, to_torch_csr
from hpcgnn.layout.blocks import split_columns, stage_chunks

DENSE_BCAST = "dense_bcast"
ROW_ALLREDUCE = "allreduce"


class StagedBroadcastSpMM:
    """``Y_i = sum_{k in stages} M_ik X_k`` with ``X_k`` broadcast from rank ``k`` of ``comm``.

    Parameters
    ----------
    comm
        Communicator over which the blocks ``X_k`` are distributed (rank ``k`` holds
        ``X_k``).
    local
        This rank's block row of ``M`` (all ``n`` columns), SciPy CSR.
    offsets
        Offsets of the blocks ``X_k`` (``len(offsets) == comm.size + 1``).
    stages
        The block ids ``k`` this communicator handles (all by default).
    dtype
        Torch dtype of values and dense blocks.
    """

    def __init__(
        self, comm: Comm, local: sp.csr_matrix, offsets: np.ndarray, dtype: torch.dtype,
        stages: range | None = None,
    ) -> None:
        self.comm = comm
        self.offsets = offsets
        self.stages = range(comm.size) if stages is None else stages
        blocks = split_columns(local, offsets)
        dev = comm.device.torch_device
        self.blocks = {k: to_torch_csr(blocks[k], dtype, dev) for k in self.stages}
        self.rows = local.shape[0]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Return this rank's partial block row of ``M X`` given its block ``X_i``."""
        f = x.shape[1]
        dev = self.comm.device
        out = dev.zeros((self.rows, f), x.dtype)
        for k in self.stages:
            if k == self.comm.rank:
                xk = x.contiguous()
            else:
                xk = dev.empty((int(self.offsets[k + 1] - self.offsets[k]), f), x.dtype)
            self.comm.bcast(xk, k, DENSE_BCAST)
            with self.comm.stats.phase("local_spmm"):
                out += spmm(self.blocks[k], xk)
        return out


class BlockRowAggregation:
    """``Â^T H`` forward and ``Â G`` backward on a ``(P/c) x c`` grid (1D when ``c = 1``).

    Parameters
    ----------
    col
        The process column: ``P/c`` ranks, rank ``i`` holding block row ``i``.
    row
        The process row: the ``c`` replicas of this block row.
    a_t_rows, a_rows
        This process row's block rows of ``Â^T`` and ``Â`` (all columns); ``a_rows=None``
        for a forward-only operator (minibatch evaluation's full-graph ``E H``).
    offsets
        Vertex offsets of the ``P/c`` block rows.
    dtype
        Torch dtype.
    """

    def __init__(
        self, col: Comm, row: Comm, a_t_rows: sp.csr_matrix, a_rows: sp.csr_matrix | None,
        offsets: np.ndarray, dtype: torch.dtype,
    ) -> None:
        chunks = stage_chunks(col.size, row.size)
        stages = range(int(chunks[row.rank]), int(chunks[row.rank + 1]))
        self.row = row
        self._fwd = StagedBroadcastSpMM(col, a_t_rows, offsets, dtype, stages)
        self._bwd = (
            None if a_rows is None else StagedBroadcastSpMM(col, a_rows, offsets, dtype, stages)
        )

    def _reduce(self, partial: torch.Tensor) -> torch.Tensor:
        if self.row.size > 1:
            self.row.allreduce(partial, ROW_ALLREDUCE)
        return partial

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """This process row's block of ``Â^T H``."""
        return self._reduce(self._fwd(h.contiguous()))

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        """This process row's block of ``Â G``."""
        if self._bwd is None:
            raise RuntimeError("a forward-only aggregation has no backward")
        return self._reduce(self._bwd(g))


DENSE_ALLGATHER = "dense_allgather"
GRAD_REDUCE_SCATTER = "reduce_scatter"


class AllGatherNeighbourhood:
    """GAT's source rows in 1D: every block row, all-gathered; the adjoint reduce-scatters.

    CAGNET 1D broadcasts every block row ``H_k`` to every rank at each layer; the
    attention needs each destination row's scores over all its sources before the sum, so
    the blocks of ``[z | s_src]`` are all-gathered at once (the same words per rank as the
    ``P`` broadcasts) and the gradients of the gathered rows reduce-scattered back to their
    owners (the same again). The rank's edges are its block row of ``A^T + I`` with global
    columns (:class:`hpcgnn.nn.gat.Neighbourhood`).

    Parameters
    ----------
    comm
        The process column: ``P`` ranks, rank ``i`` holding block row ``i``.
    a_t_rows
        This rank's rows of ``A^T + I`` (all ``n`` columns; values unused).
    offsets
        Vertex offsets of the block rows.
    dtype
        Torch dtype of the rows.
    """

    def __init__(
        self, comm: Comm, a_t_rows: sp.csr_matrix, offsets: np.ndarray, dtype: torch.dtype
    ) -> None:
        self.comm = comm
        self.split: RowReduce | None = None
        self.counts = [int(c) for c in np.diff(offsets)]
        lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
        self.pattern = edge_pattern(a_t_rows, np.arange(lo, hi), np.arange(int(offsets[-1])),
                                    comm.device.torch_device, dtype)

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """Every block row of ``x``, in order."""
        return self.comm.allgatherv(x, DENSE_ALLGATHER, self.counts)

    def scatter(self, g: torch.Tensor) -> torch.Tensor:
        """This rank's rows of the sum over ranks of ``g``."""
        return self.comm.reduce_scatter(g, self.counts, GRAD_REDUCE_SCATTER)


DENSE_REDUCE = "dense_reduce"


class RowSplit:
    """Reductions along the process row, in place: the replicas that split a row's sources."""

    def __init__(self, row: Comm) -> None:
        self.row = row

    def max(self, t: torch.Tensor) -> torch.Tensor:
        """The element-wise maximum over the process row."""
        return self.row.allreduce(t.contiguous(), ROW_ALLREDUCE, MPI.MAX)

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        """The element-wise sum over the process row."""
        return self.row.allreduce(t.contiguous(), ROW_ALLREDUCE)


class StagedNeighbourhood:
    """GAT's source rows in 1.5D: the blocks of this process column's stage chunk.

    On a ``(P/c) x c`` grid process column ``j`` handles the consecutive stages of chunk
    ``j`` (as CAGNET's Algorithm 2 and :class:`BlockRowAggregation`): for each, the
    block's owner ``P(k, j)`` broadcasts its rows of ``[z | s_src]`` down the column, so
    ``P(i, j)`` holds the sources of chunk ``j`` for its block row's edges, whose
    coefficients need the whole row's maximum and sum: ``split`` reduces them (and the
    partial outputs) along the process row. The adjoint reduces each block's gradient
    onto its owner in the column (``dense_reduce``, the broadcasts' words), then sums the
    owners' gradients along the process row, so every replica of a block row holds the
    whole gradient of its rows.

    Parameters
    ----------
    col, row
        The process column (``P/c`` ranks, rank ``i`` holding block row ``i``) and row
        (the ``c`` replicas).
    a_t_rows
        This process row's rows of ``A^T + I`` (all ``n`` columns; values unused).
    offsets
        Vertex offsets of the block rows.
    dtype
        Torch dtype of the rows.
    """

    def __init__(
        self, col: Comm, row: Comm, a_t_rows: sp.csr_matrix, offsets: np.ndarray,
        dtype: torch.dtype,
    ) -> None:
        chunks = stage_chunks(col.size, row.size)
        self.stages = range(int(chunks[row.rank]), int(chunks[row.rank + 1]))
        self.col, self.row, self.offsets = col, row, offsets
        self.split: RowReduce | None = RowSplit(row)
        c0 = int(offsets[self.stages.start])
        c1 = int(offsets[self.stages.stop])
        self.first = c0
        lo, hi = int(offsets[col.rank]), int(offsets[col.rank + 1])
        self.owned = hi - lo
        self.pattern = edge_pattern(a_t_rows.tocsc()[:, c0:c1].tocsr(), np.arange(lo, hi),
                                    np.arange(c0, c1), col.device.torch_device, dtype)

    def _block(self, x: torch.Tensor, k: int) -> torch.Tensor:
        """Block ``k``'s rows of the chunk's rows ``x`` (a view)."""
        lo = int(self.offsets[k]) - self.first
        return x[lo : lo + int(self.offsets[k + 1] - self.offsets[k])]

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """The rows of the chunk's blocks, each broadcast by its owner."""
        out = x.new_empty((self.pattern.shape[1], x.shape[1]))
        for k in self.stages:
            block = self._block(out, k)
            if k == self.col.rank:
                block.copy_(x)
            self.col.bcast(block, k, DENSE_BCAST)
        return out

    def scatter(self, g: torch.Tensor) -> torch.Tensor:
        """This block row's gradient: each block's reduced onto its owner, summed on the row."""
        own = g.new_zeros((self.owned, g.shape[1]))
        for k in self.stages:
            block = self._block(g, k).clone()
            self.col.reduce(block, k, DENSE_REDUCE)
            if k == self.col.rank:
                own += block
        if self.row.size > 1:
            self.row.allreduce(own, ROW_ALLREDUCE)
        return own


def block_row_neighbourhood(
    col: Comm, row: Comm, a_t_rows: sp.csr_matrix, offsets: np.ndarray, dtype: torch.dtype,
) -> AllGatherNeighbourhood | StagedNeighbourhood:
    """GAT's source rows on a ``(P/c) x c`` grid.

    All-gathered in 1D (``c = 1``), else the stage chunks of 1.5D, the rows' sources split
    along the process row.
    """
    if row.size > 1:
        return StagedNeighbourhood(col, row, a_t_rows, offsets, dtype)
    return AllGatherNeighbourhood(col, a_t_rows, offsets, dtype)
