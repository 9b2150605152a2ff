"""The dense step ``Z = T W`` and the logits on a SUMMA grid, as differentiable collectives.

After the SpMM, P(i, j, l) holds ``T((i, l), j)``: the rows of fine block ``(i, l)`` and
feature-column block ``j`` of ``Pc`` (see :mod:`hpcgnn.layout.summa`). ``W`` is
replicated. The *process row* (the ``Pc`` processes sharing ``(i, l)``) holds whole rows
of ``T``, so every step below communicates along the process row only; each one is a
``torch.autograd.Function`` whose backward is the adjoint collective (categories in
brackets):

- ``allgather``: all-gather the column blocks of ``T`` [``allgather``], multiply by
  ``W(:, j)``; backward: reduce-scatter ``dT`` by columns [``reduce_scatter``];
- ``reduce_scatter``: multiply ``T((i,l), j)`` by ``W(j, :)``, reduce-scatter the
  partials by output columns [``reduce_scatter``]; backward: all-gather ``dZ``
  [``allgather``];
- ``gather`` (logits): gather the column blocks to column 0 [``gather``], which
  multiplies by ``W``; backward: scatter ``dT`` from column 0 [``scatter``];
- ``reduce`` (logits): reduce the ``T W(j, :)`` partials to column 0
  [``reduce_scatter``, as a reduce-scatter whose blocks all go to column 0]; backward:
  broadcast ``dZ`` from column 0 [``dense_bcast``].

:func:`hpcgnn.layout.summa.dense_variant` picks the cheaper step per layer. When a
layer runs in the order ``Â^T (H W)`` the SpMM comes last and :func:`gather_rows` brings
the logits to column 0 [``gather``; backward ``scatter``]. Weight gradients come out as
local partial sums (only this process's column or row block of ``W`` nonzero) that the
model all-reduces over all ranks. Column blocks travel as transposed (``width x rows``)
arrays so that every collective concatenates along axis 0.
"""

from __future__ import annotations

import numpy as np
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.kernels.gemm import matmul
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.layout.summa import ALLGATHER, GATHER, REDUCE, REDUCE_SCATTER

CAT_ALLGATHER = "allgather"
CAT_REDUCE_SCATTER = "reduce_scatter"
CAT_GATHER = "gather"
CAT_SCATTER = "scatter"
CAT_BCAST = "dense_bcast"
ROOT = 0


def _allgather_cols(comm: Comm, t: torch.Tensor, widths: list[int]) -> torch.Tensor:
    send = t.t().contiguous()
    full = comm.allgatherv(send, CAT_ALLGATHER, counts=widths)
    return full.t().contiguous()


def _reduce_scatter_cols(comm: Comm, z: torch.Tensor, widths: list[int]) -> torch.Tensor:
    send = z.t().contiguous()
    mine = comm.reduce_scatter(send, widths, CAT_REDUCE_SCATTER)
    return mine.t().contiguous()


class RowAllGather(torch.autograd.Function):
    """``T((i,l), j) -> T((i,l), :)`` on every process of the row; adjoint: reduce-scatter."""

    @staticmethod
    def forward(ctx, t: torch.Tensor, comm: Comm, widths: list[int]) -> torch.Tensor:
        """Forward collective (see the class docstring)."""
        ctx.comm, ctx.widths = comm, widths
        return _allgather_cols(comm, t.detach(), widths)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        """Adjoint collective (see the class docstring)."""
        return _reduce_scatter_cols(ctx.comm, g, ctx.widths), None, None


class RowReduceScatter(torch.autograd.Function):
    """Sum row partials ``Z_j((i,l), :)`` and keep column block ``j``; adjoint: all-gather."""

    @staticmethod
    def forward(ctx, z: torch.Tensor, comm: Comm, widths: list[int]) -> torch.Tensor:
        """Forward collective (see the class docstring)."""
        ctx.comm, ctx.widths = comm, widths
        return _reduce_scatter_cols(comm, z.detach(), widths)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        """Adjoint collective (see the class docstring)."""
        return _allgather_cols(ctx.comm, g, ctx.widths), None, None


class GatherToRoot(torch.autograd.Function):
    """Column blocks -> whole rows on column 0 (others get ``0 x f``); adjoint: scatter."""

    @staticmethod
    def forward(ctx, t: torch.Tensor, comm: Comm, widths: list[int]) -> torch.Tensor:
        """Forward collective (see the class docstring)."""
        ctx.comm, ctx.widths, ctx.rows = comm, widths, t.shape[0]
        p, me = comm.size, comm.rank
        send = t.detach().t().contiguous()
        sendcounts = np.zeros(p, dtype=np.int64)
        sendcounts[ROOT] = widths[me]
        recvcounts = np.asarray(widths if me == ROOT else [0] * p, dtype=np.int64)
        full, _ = comm.alltoallv(send, sendcounts, CAT_GATHER, recvcounts)
        if me != ROOT:
            return comm.device.zeros((0, sum(widths)), t.dtype)
        return full.t().contiguous()

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        """Adjoint collective (see the class docstring)."""
        return _scatter_cols(ctx.comm, g, ctx.widths, ctx.rows), None, None


def _scatter_cols(comm: Comm, g: torch.Tensor, widths: list[int], rows: int) -> torch.Tensor:
    """Whole rows ``g`` on column 0 -> column block ``j`` of them on every process."""
    p, me = comm.size, comm.rank
    if me == ROOT:
        send = g.t().contiguous()
        sendcounts = np.asarray(widths, dtype=np.int64)
    else:
        send = comm.device.zeros((0, rows), g.dtype)
        sendcounts = np.zeros(p, dtype=np.int64)
    recvcounts = np.zeros(p, dtype=np.int64)
    recvcounts[ROOT] = widths[me]
    mine, _ = comm.alltoallv(send, sendcounts, CAT_SCATTER, recvcounts)
    return mine.reshape(widths[me], rows).t().contiguous()


class ReduceToRoot(torch.autograd.Function):
    """Sum row partials ``Z_j((i,l), :)`` on column 0 (others: ``0 x f``); adjoint: bcast."""

    @staticmethod
    def forward(ctx, z: torch.Tensor, comm: Comm) -> torch.Tensor:
        """Forward collective (see the class docstring)."""
        ctx.comm, ctx.shape = comm, tuple(z.shape)
        counts = [z.shape[0] if r == ROOT else 0 for r in range(comm.size)]
        return comm.reduce_scatter(z.detach().contiguous(), counts, CAT_REDUCE_SCATTER)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Adjoint collective (see the class docstring)."""
        comm = ctx.comm
        buf = g.contiguous() if comm.rank == ROOT else comm.device.empty(ctx.shape, g.dtype)
        comm.bcast(buf, ROOT, CAT_BCAST)
        return buf, None


class DenseStep:
    """``Z = T W`` of one GCN layer on a process row.

    Parameters
    ----------
    row
        The process row (size ``Pc``, rank ``j``).
    in_cols, out_cols
        Column offsets (length ``Pc + 1``) of ``T`` (width ``f_in``) and ``Z``.
    variant
        ``"allgather"`` or ``"reduce_scatter"`` (result in the layout of ``H``), or
        ``"gather"`` or ``"reduce"`` (final layer: whole rows on column 0, ``0`` rows
        elsewhere); see :func:`hpcgnn.layout.summa.dense_variant`.

    """

    def __init__(
        self, row: Comm, in_cols: np.ndarray, out_cols: np.ndarray, variant: str
    ) -> None:
        if variant not in (ALLGATHER, REDUCE_SCATTER, GATHER, REDUCE):
            raise ValueError(f"unknown dense-step variant {variant!r}")
        self.row = row
        self.variant = variant
        j = row.rank
        self.in_range = (int(in_cols[j]), int(in_cols[j + 1]))
        self.out_range = (int(out_cols[j]), int(out_cols[j + 1]))
        self.in_widths = [int(w) for w in np.diff(in_cols)]
        self.out_widths = [int(w) for w in np.diff(out_cols)]

    @property
    def final(self) -> bool:
        """Whether this step delivers whole rows to column 0 (the logits)."""
        return self.variant in (GATHER, REDUCE)

    def __call__(self, t: torch.Tensor | SparseFeatures, w: torch.Tensor) -> torch.Tensor:
        """Return this process's block of ``T W`` given its block of ``T``.

        Sparse input features stay sparse where ``T`` is multiplied where it lies (one
        process column, ``reduce_scatter``, ``reduce``) and are made dense where ``T``
        travels (``allgather``, ``gather``: dense blocks on the wire, as the cost model
        counts them).
        """
        row = self.row
        stats = row.stats
        if row.size == 1:
            return matmul(t, w, stats)
        if isinstance(t, SparseFeatures) and self.variant in (ALLGATHER, GATHER):
            t = t.to_dense()
        if self.variant == ALLGATHER:
            c0, c1 = self.out_range
            return matmul(RowAllGather.apply(t, row, self.in_widths), w[:, c0:c1], stats)
        r0, r1 = self.in_range
        if self.variant == REDUCE_SCATTER:
            return RowReduceScatter.apply(matmul(t, w[r0:r1], stats), row, self.out_widths)
        if self.variant == GATHER:
            return matmul(GatherToRoot.apply(t, row, self.in_widths), w, stats)
        return ReduceToRoot.apply(matmul(t, w[r0:r1], stats), row)


    def output_gradient(self, g: torch.Tensor, rows: int) -> torch.Tensor:
        """``G = dZ`` in the layout of ``T`` (column block ``j``, ``rows`` rows).

        For CAGNET's backward (:func:`hpcgnn.nn.gcn.aggregate_transform`): a ``final``
        step's ``G`` (whole rows on column 0) is scattered by columns [``scatter``];
        otherwise ``Z`` already lies as ``T`` does.
        """
        if not self.final or self.row.size == 1:
            return g
        return _scatter_cols(self.row, g, self.out_widths, rows)

    def whole_rows(self, u: torch.Tensor) -> torch.Tensor:
        """Column block ``j`` of ``U = Â G`` -> whole rows ``U((i,l), :)`` [``allgather``].

        CAGNET's backward multiplies them by ``W(j, :)^T`` (``H``'s gradient) and by
        ``H((i,l), j)^T`` (rows ``j`` of ``W``'s gradient, a partial sum) locally.
        """
        if self.row.size == 1:
            return u
        return _allgather_cols(self.row, u, self.out_widths)


def gather_rows(z: torch.Tensor, row: Comm, cols: np.ndarray) -> torch.Tensor:
    """Whole rows of ``Z((i, l), :)`` on process column 0, ``0`` rows elsewhere.

    Differentiable (:class:`GatherToRoot`); the identity when the row has one process.
    """
    if row.size == 1:
        return z
    return GatherToRoot.apply(z, row, [int(w) for w in np.diff(cols)])
