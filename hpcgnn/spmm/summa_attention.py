"""GAT on a SUMMA (2D) or Split-3D grid: the edge computation between CAGNET's broadcasts.

The layout is that of :mod:`hpcgnn.spmm.summa`: P(i, j, l) holds the rows of fine block
``(i, l)`` and column block ``j`` of every layer input, and owns pieces of the pattern of
``A^T + I`` (values unused). A GAT layer (:mod:`hpcgnn.nn.gat`) there is

1. ``z = H W`` by the grid's dense step (:class:`hpcgnn.spmm.dense_step.DenseStep`),
   ``z`` in the layout of ``H``: column block ``j`` of the ``K f'`` columns, so a head's
   units may lie on two processes of a row (:func:`hpcgnn.layout.summa.head_slices`);
2. the score terms ``s_src = z a_src``, ``s_dst = z a_dst`` as partial sums over the
   block's columns, all-reduced along the process row (``K`` columns each, category
   ``allreduce``); in 3D ``s_dst`` of the process's heads is all-gathered along the fiber
   (``allgather``), since grid layer ``l`` computes the partial output of the whole row
   block ``i``;
3. SUMMA's stage loop: each stage's rows of ``[z | s_src]`` (column block ``j``, the
   score terms of the process's heads) broadcast down the process column
   (``dense_bcast``: the score terms travel with the feature rows they belong to) and the
   stage's pattern block along the process row (``sparse_bcast``); every process scores
   the block's edges of its heads and accumulates the output with an online softmax (the
   running row maximum rescales what was summed before, so one pass suffices and no
   score is kept but the raw ``t`` per edge);
4. in 3D the rows' maximum and sum are all-reduced along the fiber (``allreduce``) and
   the normalised partial outputs reduce-scattered there (``reduce_scatter``), as the
   SpMM's;
5. ELU on hidden layers; the last layer's heads are gathered to process column 0
   (``gather``), which averages them into the logits.

In 2D every process of row ``i`` receives every pattern block of row block ``i``, so each
row's softmax is local; the ``Pc`` processes of a row differ only in their heads' columns.

The backward is the literal adjoint: in 3D the output's gradient all-gathered along the
fiber (``allgather``) and the rows' ``delta_i = dout_i . out_i`` (partial over the
columns, summed over the fiber: ``allreduce``); per stage the rows of ``z`` broadcast
again (``dense_bcast``) and ``[d z | d s_src]`` of the stage's rows reduced onto their
owner in the column (``dense_reduce``, the words of the broadcast); ``d s_dst`` reduce-
scattered along the fiber and both score gradients all-reduced along the process row (the
adjoint of step 2). The coefficients' gradient ``d alpha_ij = dout_i . z_j`` is a sum
over the columns, which are split along the row; it enters ``dt = alpha (d alpha -
delta) LeakyReLU'(t)`` linearly, so each process forms ``dt``'s share of its columns and
the reductions of step 2's adjoint add them. The pattern blocks and ``t`` are kept from
the forward (the patterns are not broadcast again).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from mpi4py import MPI

from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.stats import layer_span
from hpcgnn.kernels.attention import (
    NEGATIVE_SLOPE,
    AttentionDrop,
    EdgePattern,
    edge_dot,
    edge_pattern,
    edge_softmax_backward,
    leaky_relu,
    row_max,
    segment_sum,
)
from hpcgnn.kernels.spmm import spmm
from hpcgnn.layout.summa import HeadSlice, Segment, SummaLayout, head_slices
from hpcgnn.spmm.dense_step import gather_rows
from hpcgnn.spmm.summa import DENSE_BCAST, REDUCE_SCATTER, SummaSpMM

ALLREDUCE = "allreduce"
ALLGATHER = "allgather"
DENSE_REDUCE = "dense_reduce"


class _Sum(torch.autograd.Function):
    """The sum over ``comm`` of every rank's ``x``; the adjoint is the same sum."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, comm: Comm) -> torch.Tensor:
        ctx.comm = comm
        return comm.allreduce(x.detach().clone().contiguous(), ALLREDUCE)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        return ctx.comm.allreduce(g.clone().contiguous(), ALLREDUCE), None


class _FiberGather(torch.autograd.Function):
    """The fine blocks' rows of the row block, all-gathered; adjoint: reduce-scatter."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, fiber: Comm, counts: list[int]) -> torch.Tensor:
        ctx.fiber, ctx.counts = fiber, counts
        return fiber.allgatherv(x.detach().contiguous(), ALLGATHER, counts)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return ctx.fiber.reduce_scatter(g.contiguous(), ctx.counts, REDUCE_SCATTER), None, None


@dataclass(frozen=True)
class _Heads:
    """One layer's heads on this process: their column slices, count, dropout."""

    slices: list[HeadSlice]
    heads: int
    layer: int
    drop: AttentionDrop | None
    col_head: torch.Tensor  # the slice index of every local column of z

    def keep(self, pattern: EdgePattern) -> torch.Tensor | None:
        if self.drop is None:
            return None
        return self.drop.keep(self.layer, pattern, self.heads, [s.head for s in self.slices])

    @property
    def p(self) -> float:
        return 0.0 if self.drop is None else self.drop.p


def _rescale(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """``exp(old - new)``, 1 where both are ``-inf`` (rows without edges yet)."""
    return torch.where(old == new, torch.ones_like(old), torch.exp(old - new))


class SummaAttention:
    """GAT's layer after ``z = H W`` on a SUMMA / Split-3D grid (see the module docstring).

    Implements :class:`hpcgnn.nn.gat.ColumnAttention`.

    Parameters
    ----------
    pattern
        The pattern of ``A^T + I`` as the grid's forward SpMM holds it (its owned blocks
        and every block's nonzeros); its blocks are broadcast by stage.
    layout
        The block layout.
    """

    def __init__(self, pattern: SummaSpMM, layout: SummaLayout) -> None:
        self.spmm, self.layout, self.grid = pattern, layout, pattern.grid
        i, _, layer = self.grid.coords
        row_lo, row_hi = layout.row_block(i)
        self.rows = row_hi - row_lo
        self.row_ids = np.arange(row_lo, row_hi)  # the edges' destinations, global ids
        self.fine_counts = [layout.fine_rows(i, sub) for sub in range(layout.pl)]
        self.segments = layout.segments(layer)
        fiber = self.grid.fiber
        self.fiber = fiber if fiber is not None and fiber.size > 1 else None

    def __call__(self, z: torch.Tensor, a_src: torch.Tensor, a_dst: torch.Tensor, layer: int,
                 last: bool, drop: AttentionDrop | None, bias: torch.Tensor | None = None
                 ) -> torch.Tensor:
        """ELU of this process's block of the heads, or on column 0 the logits.

        ``bias``: the layer's, on this process's columns before the ELU, or on column 0
        after the heads' mean.
        """
        heads, width = a_src.shape
        j = self.grid.coords[1]
        cols = self.layout.cols(heads * width)
        c0, c1 = int(cols[j]), int(cols[j + 1])
        slices = head_slices((c0, c1), width)
        dev = z.device
        head_of = torch.arange(c0, c1, device=dev) // width
        idx = torch.cat([head_of, head_of + heads])
        prod = torch.cat([z * a_src.reshape(-1)[c0:c1], z * a_dst.reshape(-1)[c0:c1]], dim=1)
        s = z.new_zeros((z.shape[0], 2 * heads)).index_add(1, idx, prod)
        if self.grid.row.size > 1:  # the columns' shares of every head's score terms
            s = _Sum.apply(s, self.grid.row)
        mine = torch.tensor([h.head for h in slices], dtype=torch.int64, device=dev)
        s_src, s_dst = s[:, :heads].index_select(1, mine), s[:, heads:].index_select(1, mine)
        if self.fiber is not None and slices:
            s_dst = _FiberGather.apply(s_dst, self.fiber, self.fine_counts)
        col_head = head_of - (c0 // width) if slices else head_of
        spec = _Heads(slices, heads, layer, drop, col_head)
        out = _Attend.apply(torch.cat([z, s_src], dim=1), s_dst, self, spec)
        if not last:
            return torch.nn.functional.elu(out if bias is None else out + bias[c0:c1])
        out = gather_rows(out, self.grid.row, cols)
        out = out.view(out.shape[0], heads, width).mean(dim=1)
        return out if bias is None else out + bias

    # -- the stage loop ------------------------------------------------------------------
    def _rows(self, x: torch.Tensor, seg: Segment) -> torch.Tensor:
        """The stage's rows of ``x``, broadcast down the process column by their owner."""
        col, w = self.grid.col, x.shape[1]
        if seg.k == self.grid.coords[0]:
            xs = x[seg.r0 : seg.r0 + seg.size].contiguous()
        else:
            xs = col.device.empty((seg.size, w), x.dtype)
        if col.size > 1 and w > 0:
            col.bcast(xs, seg.k, DENSE_BCAST)
        return xs

    def _pattern(self, seg: Segment, dtype: torch.dtype) -> EdgePattern | None:
        """The stage's pattern block (broadcast along the row), ``None`` when empty."""
        if self.spmm.nnz[seg.index] == 0:
            return None
        block = self.spmm.sparse_block(seg.index)
        return edge_pattern(block, self.row_ids, np.arange(seg.g0, seg.g0 + seg.size),
                            block.device, dtype)

    def forward(
        self, x: torch.Tensor, s_dst: torch.Tensor, spec: _Heads
    ) -> tuple[torch.Tensor, tuple]:
        """This process's rows of the output and what :meth:`backward` needs.

        ``x``: its rows of ``[z | s_src]`` (its columns and heads), ``s_dst``: the row
        block's destination terms of its heads.
        """
        col, nh = self.grid.col, len(spec.slices)
        wz = x.shape[1] - nh
        top = torch.full((self.rows, nh), -torch.inf, dtype=x.dtype, device=x.device)
        total = x.new_zeros((self.rows, nh))
        acc = x.new_zeros((self.rows, wz))
        stages: list[tuple[EdgePattern, torch.Tensor, torch.Tensor | None] | None] = []
        for step, seg in enumerate(self.segments):
            with col.stats.tagged(step=step):
                xs = self._rows(x, seg)
                pattern = self._pattern(seg, x.dtype)
            if pattern is None or nh == 0:
                stages.append(None)
                continue
            with col.stats.phase("local_spmm"):
                t = pattern.at_rows(s_dst) + pattern.at_cols(xs[:, wz:])
                e = leaky_relu(t, NEGATIVE_SLOPE)
                new = torch.maximum(top, row_max(pattern, e))
                scale = _rescale(top, new)
                acc *= scale[:, spec.col_head]
                total *= scale
                p = torch.exp(e - pattern.at_rows(new))
                total += segment_sum(pattern, p)
                keep = spec.keep(pattern)
                used = p if keep is None else p * keep / (1.0 - spec.p)
                for k, h in enumerate(spec.slices):
                    acc[:, h.lo : h.hi] += spmm(pattern.matrix(used[:, k].contiguous()),
                                                xs[:, h.lo : h.hi].contiguous())
                top = new
            stages.append((pattern, t, keep))
        if self.fiber is not None and nh:  # the grid layers' shares of each row
            whole = self.fiber.allreduce(top.clone(), ALLREDUCE, MPI.MAX)
            scale = _rescale(top, whole)
            acc *= scale[:, spec.col_head]
            total = self.fiber.allreduce((total * scale).contiguous(), ALLREDUCE)
            top = whole
        out = acc / total.clamp_min(torch.finfo(x.dtype).tiny)[:, spec.col_head]
        own = out
        if self.fiber is not None and wz:
            own = self.fiber.reduce_scatter(out.contiguous(), self.fine_counts, REDUCE_SCATTER)
        return own, (stages, top, total, out)

    def backward(
        self, x: torch.Tensor, g: torch.Tensor, spec: _Heads, saved: tuple
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradients of :meth:`forward`'s ``x`` and ``s_dst`` given its output's ``g``."""
        stages, top, total, out = saved
        col, nh = self.grid.col, len(spec.slices)
        wz = x.shape[1] - nh
        g = g.contiguous()
        if self.fiber is not None and wz:
            g = self.fiber.allgatherv(g, ALLGATHER, self.fine_counts)
        delta = g.new_zeros((self.rows, nh)).index_add(1, spec.col_head, g * out)
        if self.fiber is not None and nh:
            delta = self.fiber.allreduce(delta, ALLREDUCE)
        dx = torch.zeros_like(x)
        ds_dst = g.new_zeros((self.rows, nh))
        i = self.grid.coords[0]
        for step, seg in enumerate(self.segments):
            with col.stats.tagged(step=step):
                zs = self._rows(x[:, :wz], seg)
            msg = x.new_zeros((seg.size, wz + nh))
            if stages[step] is not None:
                pattern, t, keep = stages[step]
                with col.stats.phase("local_spmm"):
                    alpha = torch.exp(leaky_relu(t, NEGATIVE_SLOPE) - pattern.at_rows(top))
                    alpha = alpha / pattern.at_rows(total)
                    used = alpha if keep is None else alpha * keep / (1.0 - spec.p)
                    d_alpha = x.new_empty((pattern.edges, nh))
                    for k, h in enumerate(spec.slices):
                        gk = g[:, h.lo : h.hi].contiguous()
                        msg[:, h.lo : h.hi] = spmm(pattern.transposed(used[:, k].contiguous()),
                                                   gk)
                        zk = zs[:, h.lo : h.hi].contiguous()
                        d_alpha[:, k] = edge_dot(pattern, gk.unsqueeze(1), zk.unsqueeze(1))[:, 0]
                    if keep is not None:
                        d_alpha = d_alpha * keep / (1.0 - spec.p)
                    dt = edge_softmax_backward(pattern, alpha, t, d_alpha, delta, NEGATIVE_SLOPE)
                    ds_dst += segment_sum(pattern, dt)
                    msg[:, wz:] = segment_sum(pattern, dt, transposed=True)
            with col.stats.tagged(step=step):
                if col.size > 1 and msg.shape[1] > 0:
                    col.reduce(msg, seg.k, DENSE_REDUCE)
            if seg.k == i:
                dx[seg.r0 : seg.r0 + seg.size] += msg
        return dx, ds_dst


class _Attend(torch.autograd.Function):
    """:meth:`SummaAttention.forward` with :meth:`SummaAttention.backward` as its backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, s_dst: torch.Tensor, op: SummaAttention,
                spec: _Heads) -> torch.Tensor:
        x = x.detach()
        with layer_span(op.grid.col.stats, spec.layer, "forward"):
            out, saved = op.forward(x, s_dst.detach().contiguous(), spec)
        ctx.save_for_backward(x)
        ctx.op, ctx.spec, ctx.saved = op, spec, saved
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (x,) = ctx.saved_tensors
        op = ctx.op
        with layer_span(op.grid.col.stats, ctx.spec.layer, "backward"):
            dx, ds_dst = op.backward(x, g, ctx.spec, ctx.saved)
        ctx.saved = None
        return dx, ds_dst, None, None
