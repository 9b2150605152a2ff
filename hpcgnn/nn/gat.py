"""The GAT layer (Veličković et al.) on a rank's rows: the one definition every mode uses.

Per layer and head ``k``: ``z = H W`` (``K`` heads of ``f'`` columns), the per-vertex
score terms ``s_src = z a_src``, ``s_dst = z a_dst``, and over the edges ``j -> i`` of
``A^T + I``::

    alpha_ij = softmax_j LeakyReLU(s_dst_i + s_src_j)      h'_i = sum_j alpha_ij z_j

the heads concatenated with ELU on hidden layers, averaged on the last (PyG's ``GATConv``
with ``concat`` and without bias, the paper's model). Dropout acts on each layer's input
(the masks of :mod:`hpcgnn.nn.gcn`) and on the coefficients (``--attention-dropout``,
one decision per global edge and head, from its own counter-based stream, so every layout
drops the serial run's coefficients).

A layout supplies a :class:`Neighbourhood`: the rows of ``[z | s_src]`` its edges read
(its own and the gathered ones: every row in 1D, the halo rows on a partition, the blocks
of its stage chunk in 1.5D) and the adjoint that returns their gradients to their owners.
The per-vertex score terms thus travel with the feature rows they belong to, ``K`` more
columns, both ways. The edge computation is local (:mod:`hpcgnn.kernels.attention`).
Where a row's sources are split over ranks (1.5D: the ``c`` replicas of a block row each
hold a chunk of the stages), ``split`` reduces along them: each row's score maximum and
exponential sum (so every rank computes the whole row's coefficients for its edges), the
partial outputs, and in the backward the score terms' gradient ``d s_dst``; the row term
``delta_i = sum_j alpha_ij d alpha_ij`` of the softmax backward is ``dout_i . out_i``,
which needs no reduction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from hpcgnn.comm.stats import CommStats, layer_span
from hpcgnn.kernels.attention import (
    NEGATIVE_SLOPE,
    AttentionDrop,
    EdgePattern,
    RowReduce,
    edge_dot,
    edge_softmax,
    edge_softmax_backward,
    head_scores,
    segment_sum,
)
from hpcgnn.kernels.rows import take_rows
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.kernels.spmm import spmm

#: ``dense(t, w)``: this rank's rows of ``T W`` (``T`` dense or the sparse input).
Dense = Callable[[torch.Tensor | SparseFeatures, torch.Tensor], torch.Tensor]


class Neighbourhood(Protocol):
    """The source rows a rank's GAT edges read, and the way back for their gradients.

    ``split``: the reductions over the ranks that share its rows' sources, or ``None``.
    """

    pattern: EdgePattern
    split: RowReduce | None

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """The rows of the pattern's columns given this rank's own rows of ``x``."""

    def scatter(self, g: torch.Tensor) -> torch.Tensor:
        """The gradient of this rank's own rows given that of the pattern's columns."""


class ColumnAttention(Protocol):
    """A GAT layer after ``z = H W`` on a layout whose ranks hold column blocks of ``z``.

    On a SUMMA grid (:class:`hpcgnn.spmm.summa_attention.SummaAttention`) a head's units
    can lie on several processes, so the score terms, the edge softmax and the last
    layer's mean of the heads follow the grid; the layer is one call.
    """

    def __call__(
        self,
        z: torch.Tensor,
        a_src: torch.Tensor,
        a_dst: torch.Tensor,
        layer: int,
        last: bool,
        drop: AttentionDrop | None,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The layer's output (ELU of the heads, or the logits on the scorers) given ``z``.

        ``bias``: the layer's (``--bias``), added before the ELU on this rank's columns,
        or after the heads' mean on the last layer.
        """


class LocalNeighbourhood:
    """Every source row is local (the serial reference): gather is the identity.

    ``dst``: the positions of the pattern's rows among the source rows (a LADIES block's,
    whose rows are not its first columns); ``None``: its first rows.
    """

    def __init__(self, pattern: EdgePattern, dst: torch.Tensor | None = None) -> None:
        self.pattern = pattern
        self.split: RowReduce | None = None
        self.dst = dst

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` itself."""
        return x

    def scatter(self, g: torch.Tensor) -> torch.Tensor:
        """``g`` itself."""
        return g


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, x: torch.Tensor, nbh: Neighbourhood, stats: CommStats | None, layer: int
    ) -> torch.Tensor:
        ctx.nbh, ctx.stats, ctx.layer = nbh, stats, layer
        with layer_span(stats, layer, "forward"):
            return nbh.gather(x.detach().contiguous())

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        with layer_span(ctx.stats, ctx.layer, "backward"):
            return ctx.nbh.scatter(g.contiguous()), None, None, None


def attend(
    pattern: EdgePattern,
    z: torch.Tensor,
    s_dst: torch.Tensor,
    s_src: torch.Tensor,
    keep: torch.Tensor | None,
    p: float,
    split: RowReduce | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``out[i, k] = sum_j alpha_ijk z[j, k]`` and what :func:`attend_backward` needs.

    ``z`` (source rows ``x K x f'``), the score terms ``s_dst`` (the pattern's rows) and
    ``s_src`` (its columns), the coefficients' keep decisions (``E x K``) and drop
    probability (``keep`` booleans, or ones and zeros of ``z``'s dtype: the same values,
    faster), and the reductions of a split row. Returns ``out`` and ``(alpha, t,
    used)``: the coefficients, the scores before the LeakyReLU and the coefficients used.
    """
    alpha, t = edge_softmax(pattern, s_dst, s_src, NEGATIVE_SLOPE, split)
    heads, width = z.shape[1], z.shape[2]
    by_head = alpha.new_empty((heads, pattern.edges))  # each head's SpMM values, contiguous
    used = by_head.t()  # E x K, written in place of a copy per head
    if keep is None:
        used.copy_(alpha)
    else:
        torch.mul(alpha, keep, out=used).div_(1.0 - p)
    out = z.new_empty((pattern.shape[0], heads, width))
    for k in range(heads):
        out[:, k] = spmm(pattern.matrix(by_head[k]), z[:, k].contiguous())
    if split is not None:  # the partial sums of the row's sources
        out = split.sum(out)
    return out, (alpha, t, used)


def attend_backward(
    pattern: EdgePattern,
    z: torch.Tensor,
    saved: tuple[torch.Tensor, ...],
    out: torch.Tensor,
    g: torch.Tensor,
    keep: torch.Tensor | None,
    p: float,
    split: RowReduce | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients ``(dz, d s_dst, d s_src)`` of :func:`attend` given ``g = d out``.

    ``saved``: :func:`attend`'s ``(alpha, t, used)``; ``out`` its output.
    """
    alpha, t, used = saved
    g = g.contiguous()
    dz = torch.empty_like(z)
    by_head = used.t()  # K x E: attend's layout, each head's values contiguous
    for k in range(z.shape[1]):
        dz[:, k] = spmm(pattern.transposed(by_head[k]), g[:, k].contiguous())
    d_alpha = edge_dot(pattern, g, z)
    if keep is not None:
        d_alpha.mul_(keep).div_(1.0 - p)
    delta = (g * out).sum(dim=2)  # sum_j alpha_ij d alpha_ij, the whole row's
    dt = edge_softmax_backward(pattern, alpha, t, d_alpha, delta, NEGATIVE_SLOPE)
    ds_dst = segment_sum(pattern, dt)
    if split is not None:
        ds_dst = split.sum(ds_dst)
    return dz, ds_dst, segment_sum(pattern, dt, transposed=True)


class _Attend(torch.autograd.Function):
    """:func:`attend` with :func:`attend_backward` as its backward."""

    @staticmethod
    def forward(
        ctx,
        z: torch.Tensor,
        s_dst: torch.Tensor,
        s_src: torch.Tensor,
        nbh: Neighbourhood,
        keep: torch.Tensor | None,
        p: float,
    ) -> torch.Tensor:
        z = z.detach()
        out, (alpha, t, used) = attend(
            nbh.pattern, z, s_dst.detach(), s_src.detach(), keep, p, nbh.split
        )
        ctx.save_for_backward(z, alpha, t, used, out)
        ctx.nbh, ctx.keep, ctx.p = nbh, keep, p
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        z, alpha, t, used, out = ctx.saved_tensors
        nbh = ctx.nbh
        dz, ds_dst, ds_src = attend_backward(
            nbh.pattern, z, (alpha, t, used), out, g, ctx.keep, ctx.p, nbh.split
        )
        return dz, ds_dst, ds_src, None, None, None


def gat_layer(
    h: torch.Tensor | SparseFeatures,
    w: torch.Tensor,
    a_src: torch.Tensor,
    a_dst: torch.Tensor,
    layer: int,
    last: bool,
    nbh: Neighbourhood,
    dense: Dense,
    drop: AttentionDrop | None,
    stats: CommStats | None = None,
    bias: torch.Tensor | None = None,
    dst: torch.Tensor | None = None,
) -> torch.Tensor:
    """One GAT layer on this rank's rows (no input dropout; see :func:`hpcgnn.nn.gcn.dropout`).

    Parameters
    ----------
    h
        This rank's rows of the layer input. The edges' destinations are its first
        ``nbh.pattern.shape[0]`` rows (all of them in full-batch layouts; a node-wise
        block's seeds, which lead its input rows), or those at ``dst``.
    w, a_src, a_dst
        ``W`` (``f_in x K f'``) and the score vectors (``K x f'``).
    layer, last
        The layer's index and whether it is the output layer (mean of the heads, no
        activation).
    nbh
        The source rows of this rank's edges.
    dense
        ``T W`` on this rank's rows.
    drop
        The step's attention dropout, or ``None`` (evaluation, or probability 0).
    stats
        Where the gathers' trace spans are tagged with the layer.
    bias
        Added to the output before the activation (the sampled models' layers have one, the
        full-batch ones with ``--bias``).
    dst
        The positions of the edges' destinations among ``h``'s rows (a LADIES block's);
        ``None``: its first rows.
    """
    heads, width = a_src.shape
    z = dense(h, w).view(-1, heads, width)
    s_src = head_scores(z, a_src)
    z_dst = z[: nbh.pattern.shape[0]] if dst is None else take_rows(z, dst)
    s_dst = head_scores(z_dst, a_dst)
    rows = _Gather.apply(torch.cat([z.reshape(-1, heads * width), s_src], dim=1), nbh, stats, layer)
    z_all = rows[:, : heads * width].view(-1, heads, width)
    keep = None if drop is None else drop.keep(layer, nbh.pattern, heads, dtype=z.dtype)
    p = 0.0 if drop is None else drop.p
    out = _Attend.apply(z_all, s_dst, rows[:, heads * width :], nbh, keep, p)
    out = out.mean(dim=1) if last else out.reshape(-1, heads * width)
    if bias is not None:
        out = out + bias
    return out if last else torch.nn.functional.elu(out)
