"""The GCN layer of Kipf & Welling in CAGNET's matrix form: the one definition every model uses.

Forward, per layer ``l``: ``Z^l = Â^T H^{l-1} W^l`` and ``H^l = ReLU(Z^l)`` (no
activation on the last layer, whose ``Z^L`` are the logits); dropout with probability
``p`` on each layer's input ``H^{l-1}`` during training. The product is evaluated as
``(Â^T H) W`` or ``Â^T (H W)``, whichever makes the SpMM narrower
(:func:`hpcgnn.layout.order.transform_first`): a layer from 128 features to 16 then
moves 16-wide rows.

Layers own no parameters: the weights are passed in (a model holds the list it was given,
so GIST can hand a model sub-weights), and so are the two operators a data layout
supplies (:class:`LayerOps`):

- the *aggregation* ``Â^T H`` on this rank's block of ``H`` and its adjoint ``Â G``: a
  local SpMM for the serial reference, a distributed SpMM (1D, 1.5D, 2D, 3D, halo)
  otherwise;
- the *dense step* ``T W``: a local GEMM, or the row collectives of a SUMMA grid.

Dropout masks come from the counter-based entry streams of :mod:`hpcgnn.rng`, drawn on
the model's device (:func:`hpcgnn.kernels.dropout.block_keep`), so every layout draws
exactly the serial run's mask for the block it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from hpcgnn.backend import Device
from hpcgnn.comm.stats import CommStats, layer_span
from hpcgnn.kernels.attention import AttentionDrop, HeadIds
from hpcgnn.kernels.dropout import block_keep, global_columns, keep_pairs
from hpcgnn.kernels.gemm import matmul
from hpcgnn.kernels.sparse_input import SparseFeatures, as_dense, gemm_phase
from hpcgnn.kernels.spmm import spmm
from hpcgnn.kinds import GCN, Layer, split_bias
from hpcgnn.layout.order import AUTO, input_gradient, propagate, transform_first
from hpcgnn.nn.gat import ColumnAttention, Neighbourhood, gat_layer
from hpcgnn.rng import Columns, dropout_key

#: A layer input: dense, or the sparse input features.
Input = torch.Tensor | SparseFeatures

#: ``dense(t, w)``: this rank's block of ``T W``.
Dense = Callable[[Input, torch.Tensor], torch.Tensor]


class ColumnDense(Protocol):
    """A dense step where a rank holds a column block of ``T`` (a SUMMA grid's).

    Attributes
    ----------
    in_range
        The columns ``[c0, c1)`` of ``T`` this rank holds (so the rows of ``W`` it uses).
    """

    in_range: tuple[int, int]

    def __call__(self, t: Input, w: torch.Tensor) -> torch.Tensor:
        """This rank's block of ``T W``."""

    def output_gradient(self, g: torch.Tensor, rows: int) -> torch.Tensor:
        """``G = dZ`` in the layout of ``T`` (``rows`` rows)."""

    def whole_rows(self, u: torch.Tensor) -> torch.Tensor:
        """This rank's rows of ``U`` (``T``'s layout), every column."""


class Aggregation(Protocol):
    """``Â^T H`` on this rank's block of ``H`` and its adjoint ``Â G``."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Return this rank's block of ``Â^T H`` given its block of ``H``."""

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        """Return this rank's block of ``Â G`` given its block of ``G``."""


class LocalAggregation:
    """``Â^T H`` and ``Â G`` with both matrices held locally."""

    def __init__(self, a_t: torch.Tensor, a: torch.Tensor) -> None:
        self.a_t = a_t
        self.a = a

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Return ``Â^T h``."""
        return spmm(self.a_t, h)

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        """Return ``Â g``."""
        return spmm(self.a, g)


class _Aggregate(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, h: torch.Tensor, op: Aggregation, stats: CommStats | None, layer: int | None
    ) -> torch.Tensor:
        ctx.op, ctx.stats, ctx.layer = op, stats, layer
        with layer_span(stats, layer, "forward"):
            return op.forward(h.detach())

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        with layer_span(ctx.stats, ctx.layer, "backward"):
            return ctx.op.backward(g.contiguous()), None, None, None


def aggregate(
    h: torch.Tensor, op: Aggregation, stats: CommStats | None = None, layer: int | None = None
) -> torch.Tensor:
    """Differentiable ``Â^T H`` through ``op``.

    With ``stats`` and ``layer``, the trace spans of both directions carry the layer and
    ``forward`` / ``backward``.
    """
    return _Aggregate.apply(h, op, stats, layer)


class _AggregateTransform(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, h: torch.Tensor, w: torch.Tensor, op: Aggregation, stats: CommStats | None,
        layer: int | None, step: ColumnDense | None,
    ) -> torch.Tensor:
        ctx.op, ctx.stats, ctx.layer, ctx.step = op, stats, layer, step
        ctx.save_for_backward(h, w)
        with layer_span(stats, layer, "forward"):
            t = op.forward(h.detach())
        if step is not None:
            return step(t, w.detach())
        with gemm_phase(stats):
            return t @ w

    @staticmethod
    def backward(
        ctx, g: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, None, None, None, None]:
        h, w = ctx.saved_tensors
        step = ctx.step
        g = g.contiguous() if step is None else step.output_gradient(g, h.shape[0])
        with layer_span(ctx.stats, ctx.layer, "backward"):
            u = ctx.op.backward(g.contiguous())  # Â G^l, reused by both gradients
        r0, r1 = (0, w.shape[0]) if step is None else step.in_range
        if step is not None:
            u = step.whole_rows(u)
        with gemm_phase(ctx.stats):
            dh = u @ w[r0:r1].T if ctx.needs_input_grad[0] else None
            dw = None
            if ctx.needs_input_grad[1]:
                dw = h.T @ u if step is None else _rows_of(w, r0, h.T @ u)
        return dh, dw, None, None, None, None


def _rows_of(w: torch.Tensor, r0: int, part: torch.Tensor) -> torch.Tensor:
    """A gradient of ``w``'s shape: ``part`` on its rows from ``r0``, zero elsewhere."""
    out = torch.zeros_like(w)
    out[r0 : r0 + part.shape[0]] = part
    return out


def aggregate_transform(
    h: torch.Tensor, w: torch.Tensor, op: Aggregation, stats: CommStats | None = None,
    layer: int | None = None, step: ColumnDense | None = None,
) -> torch.Tensor:
    """Differentiable ``(Â^T H) W`` through ``op`` with CAGNET's backward.

    The backward runs ``op``'s adjoint once on ``G`` (``W``'s output width): ``U = Â G``,
    then ``W``'s gradient ``H^T U`` (this rank's rows' part, which the layout reduces as
    every weight gradient) and ``H``'s ``U W^T`` (local GEMMs, timed as ``gemm``). Where a
    rank holds whole rows of ``H`` (1D, 1.5D, halo, serial) that is all; on a SUMMA grid
    ``step`` is the layer's planned dense step (``T W`` forward): ``G`` is brought to the
    layout of ``T`` (scattered from column 0 after a final step), ``U``'s column blocks
    all-gathered along the process row, and ``H((i,l), j)`` multiplies them, giving rows
    ``j`` of ``W``'s gradient (a partial sum) and ``U W(j, :)^T``. With ``stats`` and
    ``layer`` the SpMMs' trace spans carry the layer and ``forward`` / ``backward``, as
    :func:`aggregate`'s.
    """
    return _AggregateTransform.apply(h, w, op, stats, layer, step)


@dataclass(frozen=True)
class LayerOps:
    """What a data layout supplies for one layer.

    Attributes
    ----------
    aggregation
        ``Â^T H`` and its adjoint on this rank's block.
    dense
        The layer's dense steps ``T W`` on this rank's block, one per dense product its
        forward makes, in order (a SUMMA grid's, planned from the layer's trace); empty:
        local GEMMs (timed as ``gemm``).
    finish
        Applied to the layer's output, e.g. gathering the logit rows of a SUMMA grid to
        their scorers when no step delivered them; ``None``: nothing.
    neighbourhood
        An attention kind's (GAT's) source rows of this rank's edges
        (:class:`hpcgnn.nn.gat.Neighbourhood`), which the layer reads instead of
        ``aggregation``.
    attention
        An attention kind's whole layer after ``z = H W`` where a rank holds a column
        block of ``z`` (:class:`hpcgnn.nn.gat.ColumnAttention`: SUMMA grids); it replaces
        ``neighbourhood``.
    columns
        ``columns(f)``: this rank's columns ``[c0, c1)`` of a value of ``f`` columns where it
        holds a column block (SUMMA grids: column block ``j``); a value that holds all
        ``f`` columns (the logits delivered to column 0), and every value where this is
        ``None``, is whole rows. The layer's bias is added on these columns.
    """

    aggregation: Aggregation
    dense: tuple[ColumnDense, ...] = ()
    finish: Callable[[torch.Tensor], torch.Tensor] | None = None
    neighbourhood: Neighbourhood | None = None
    attention: ColumnAttention | None = None
    columns: Callable[[int], tuple[int, int]] | None = None


def dropout(h: torch.Tensor, keep: torch.Tensor | np.ndarray, p: float) -> torch.Tensor:
    """Inverted dropout: ``h * keep / (1 - p)`` with a boolean keep-mask of ``h``'s shape.

    Two passes over ``h`` and none over a converted mask: the boolean mask multiplies
    directly (torch promotes it), then the scale in place.
    """
    return torch.mul(h, torch.as_tensor(keep, device=h.device)).mul_(1.0 / (1.0 - p))


def activate(z: torch.Tensor, last: bool) -> torch.Tensor:
    """ReLU on hidden layers; the last layer's ``Z`` are the logits."""
    return z if last else torch.relu(z)


class BlockMasks:
    """The dropout keep-masks of this rank's block of every layer input in one step.

    ``masks(layer)`` is the block's mask; :meth:`entries` the mask at chosen entries of the
    block (a sparse input's nonzeros), the same decisions. See :func:`block_dropout`.
    """

    def __init__(
        self, seed: int, p: float, epoch: int, rows: tuple[int, int], widths: Sequence[int],
        columns: Callable[[int], Columns] | None = None, device: Device | None = None,
    ) -> None:
        self.seed, self.p, self.epoch, self.rows = seed, p, epoch, rows
        self.widths, self.columns, self.device = widths, columns, device

    def _cols(self, layer: int) -> Columns:
        return (0, self.widths[layer]) if self.columns is None else self.columns(layer)

    def __call__(self, layer: int) -> torch.Tensor:
        """The boolean keep-mask of the block of layer ``layer``'s input."""
        return block_keep(self.seed, self.epoch, layer, self.rows, self._cols(layer), self.p,
                          self.device)

    def entries(self, layer: int, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """The keep decisions of the block's entries ``(rows[k], cols[k])`` (block indices)."""
        key = dropout_key(self.seed, self.epoch, layer)
        return keep_pairs(key, rows + self.rows[0], global_columns(self._cols(layer), cols),
                          self.p)


def block_dropout(
    seed: int, p: float, epoch: int, rows: tuple[int, int], widths: Sequence[int],
    columns: Callable[[int], Columns] | None = None, device: Device | None = None,
) -> BlockMasks:
    """Keep-masks of the block ``rows x columns(layer)`` of every layer input in ``epoch``.

    Parameters
    ----------
    seed, p
        Seed and drop probability.
    epoch
        The training step (each draws new masks).
    rows
        Global rows ``[r0, r1)`` of this rank's block.
    widths
        Widths ``f_0 .. f_L`` of the layer inputs (all their columns when ``columns`` is
        ``None``).
    columns
        ``columns(layer)``: this rank's global columns of the layer's input (a range or an
        index array; a GIST sub-network's are global model's ids, so its masks are the
        global masks' columns it keeps); ``None``: all columns.
    device
        Where the masks are drawn and live (default: CPU).
    """
    return BlockMasks(seed, p, epoch, rows, widths, columns, device)


def select_columns(ids: np.ndarray, local: Columns | None) -> np.ndarray:
    """Global column ids of the ``local`` columns (range or indices) of a sub-matrix ``ids``."""
    if local is None:
        return ids
    if isinstance(local, tuple):
        return ids[local[0] : local[1]]
    return ids[np.asarray(local)]


def _dense(step: Dense | None, stats: CommStats | None) -> Dense:
    """The layout's dense step, or a local GEMM (timed as ``gemm``)."""
    if step is not None:
        return step

    def dense(t: Input, wt: torch.Tensor) -> torch.Tensor:
        return matmul(t, wt, stats)

    return dense


class LayoutPrimitives:
    """The graph primitives (:class:`~hpcgnn.kinds.Primitives`) of a layer on this rank's block.

    Built from the :class:`LayerOps` a full-batch layout supplies for the layer. On a
    SUMMA grid the layout plans the layer's dense steps from its trace (``ops.dense``):
    each dense product takes the next, in the order the trace recorded them; the row
    layouts multiply locally.

    Parameters
    ----------
    ops
        The layer's operations.
    layer, last
        The layer's index and whether it is the output layer.
    stats
        Where local products are timed and trace spans tagged, if given.
    drop
        The step's attention dropout, or ``None`` (evaluation, or probability 0).
    state
        What the layers keep for the later ones in this forward pass (``g.state``).
    bias
        The layer's bias (``--bias``), or ``None``: ``g.bias`` is then the identity.
    order
        How ``g.propagate`` orders its product (the layer's
        :attr:`~hpcgnn.kinds.Layer.product_order`).
    """

    def __init__(
        self, ops: LayerOps, layer: int, last: bool, stats: CommStats | None = None,
        drop: AttentionDrop | None = None, state: dict[str, Any] | None = None,
        bias: torch.Tensor | None = None, order: str = AUTO,
    ) -> None:
        self.ops, self.layer, self.last, self.stats, self.drop = ops, layer, last, stats, drop
        self.state: dict[str, Any] = {} if state is None else state
        self.b = bias
        self.order = order
        self._used = 0

    def _planned(self) -> Dense:
        """The next of the layer's planned dense steps (a local GEMM in row layouts)."""
        return _dense(self._next_step(), self.stats)

    def _next_step(self) -> ColumnDense | None:
        """The next of the layer's planned dense steps; ``None``: the layout plans none."""
        i, self._used = self._used, self._used + 1
        if not self.ops.dense:
            return None
        if i < len(self.ops.dense):
            return self.ops.dense[i]
        raise ValueError(f"layer {self.layer}: the layout planned {len(self.ops.dense)} dense"
                         " step(s) for it")

    def aggregate(self, h: Input) -> torch.Tensor:
        """This rank's rows of ``Â^T H`` (the layout's SpMM); adjoint ``Â G``."""
        return aggregate(as_dense(h), self.ops.aggregation, self.stats, self.layer)

    def dense(self, h: Input, w: torch.Tensor) -> torch.Tensor:
        """``H W`` on this rank's block."""
        return self._planned()(h, w)

    def aggregate_transform(self, h: Input, w: torch.Tensor) -> torch.Tensor:
        """CAGNET's ``(Â^T H) W``: its backward SpMM acts on ``G^l`` (:func:`aggregate_transform`).

        The row layouts multiply locally; a SUMMA grid runs the layer's planned dense step
        forward and CAGNET's backward around it.
        """
        return aggregate_transform(as_dense(h), w, self.ops.aggregation, self.stats,
                                   self.layer, self._next_step())

    def own(self, h: Input) -> Input:
        """``h`` itself: a rank's input and output rows are the same in full-batch layouts."""
        return h

    def bias(self, z: torch.Tensor) -> torch.Tensor:
        """``z`` plus this rank's columns of the layer's bias (``z`` itself without one).

        Its gradient is ``z``'s summed over this rank's rows, on those columns: a partial
        sum the model reduces over the ranks that hold the layer's rows.
        """
        return z if self.b is None else z + self._bias_columns(self.b, z.shape[1])

    def _bias_columns(self, b: torch.Tensor, width: int) -> torch.Tensor:
        """The entries of ``b`` on the columns a value of ``width`` of them holds here."""
        if width == b.shape[0] or self.ops.columns is None:
            return b
        c0, c1 = self.ops.columns(b.shape[0])
        return b[c0:c1]

    def propagate(
        self, h: Input, w: torch.Tensor, self_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``Â^T H W`` (plus ``H W_self``) on this rank's block (:func:`propagate`)."""
        return propagate(self, h, w, self_weight, self.order)

    def attention(
        self, h: Input, w: torch.Tensor, a_src: torch.Tensor, a_dst: torch.Tensor
    ) -> torch.Tensor:
        """GAT's attention (:func:`hpcgnn.nn.gat.gat_layer`, or the SUMMA grid's)."""
        dense = self._planned()
        if self.ops.attention is not None:
            return self.ops.attention(dense(h, w), a_src, a_dst, self.layer, self.last,
                                      self.drop, self.b)
        if self.ops.neighbourhood is None:
            raise ValueError(f"layer {self.layer}: the layout gives no neighbourhood to attend")
        return gat_layer(h, w, a_src, a_dst, self.layer, self.last, self.ops.neighbourhood,
                         dense, self.drop, self.stats, bias=self.b)


def run_layers(
    h0: Input,
    weights: Sequence[torch.Tensor],
    layers: Sequence[LayerOps],
    p: float,
    keep: BlockMasks | None,
    stats: CommStats | None = None,
    kind: Layer = GCN,
    attention_p: float = 0.0,
    heads: HeadIds | None = None,
    bias: bool = False,
) -> torch.Tensor:
    """Run a model of ``kind`` layers forward on this rank's block; its logits.

    Per layer: dropout on its input, the layer's forward on the layout's primitives
    (:class:`LayoutPrimitives`), and the layout's ``finish`` (a SUMMA grid's delivery of the
    logit rows), if any.

    Parameters
    ----------
    h0
        This rank's block of the input features, dense or sparse (see
        :func:`sparse_input`).
    weights
        Every layer's weights, in the model's order (injected: replicated, or sub-weights).
    layers
        One :class:`LayerOps` per layer.
    p
        Drop probability; applied when ``keep`` is given.
    keep
        ``keep(layer)``: keep-mask of this rank's block of the layer's input, or ``None``
        for evaluation (no dropout).
    stats
        Where to time local dense products (phase ``gemm``), if given.
    kind
        The layer (:class:`~hpcgnn.kinds.Layer`).
    attention_p
        Drop probability of the attention coefficients, applied when ``keep`` is given.
    heads
        A GIST sub-GAT's global head ids per layer (its attention dropout is the global
        model's at its heads), else ``None``.
    bias
        ``weights`` hold a bias per layer after the layer's last weight (``--bias``),
        added by ``g.bias``.
    """
    h = h0
    last = len(layers) - 1
    slices = kind.weight_slices(len(layers), bias)
    if len(weights) != (slices[-1].stop if slices else 0):
        raise ValueError(f"{kind}: {len(weights)} weights for {len(layers)} layers")
    drop = None
    if keep is not None and attention_p > 0.0:
        drop = AttentionDrop(attention_p, keep.seed, keep.epoch, heads=heads)
    state: dict[str, Any] = {}
    for layer, ops in enumerate(layers):
        w, b = split_bias(weights[slices[layer]], bias)
        if isinstance(h, SparseFeatures):  # the order follows the aggregated weight's shape
            h = sparse_input(h, w[kind.input_weight], p, keep, kind.product_order)
        elif keep is not None and p > 0.0:
            h = dropout(h, keep(layer), p)
        if layer == 0 and input_gradient(kind.product_order):  # CAGNET's first backward SpMM
            h = as_dense(h).detach().requires_grad_()
        g = LayoutPrimitives(ops, layer, layer == last, stats, drop, state, b,
                             kind.product_order)
        h = kind.forward(g, h, w)
        if ops.finish is not None:
            h = ops.finish(h)
    return as_dense(h)  # a layer's output is dense (only the input can be sparse)


def sparse_input(
    x: SparseFeatures, w: torch.Tensor, p: float, keep: BlockMasks | None, order: str = AUTO
) -> Input:
    """The input layer's view of sparse features: dropout on the nonzeros, then the order.

    The nonzeros keep the dense mask's decisions (:meth:`BlockMasks.entries`). In the
    order ``Â^T (X W)`` (wide features, :func:`~hpcgnn.layout.order.transform_first` on
    ``w``, the whole ``W^1``, and ``order``) ``X W`` is an SpMM; in the order ``(Â^T X) W``
    (features narrower than the hidden layer, where a sparse ``X`` saves little, or
    ``--product-order paper``) the block is made dense for the aggregation.
    """
    if keep is not None and p > 0.0:
        x = x.dropout(keep.entries(0, x.nz_rows, x.col), p)
    return x if transform_first(0, w.shape[0], w.shape[1], order) else x.to_dense()


def cross_entropy_sum(
    logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Sum (not mean) of the cross-entropy over the rows selected by ``mask`` (``None``: all).

    Class ids (``labels`` 1-D, ``--loss ce``): the softmax cross-entropy of each row.
    Multi-label targets (``labels`` a 0/1 matrix, ``--loss bce``): the binary
    cross-entropy with logits of every (row, class) entry. Distributed callers all-reduce
    the sum and divide by the *global* number of terms (:func:`loss_terms`), so the loss
    equals the serial mean exactly (PyG's ``CrossEntropyLoss`` or ``BCEWithLogitsLoss``).
    """
    if mask is not None:
        if not bool(mask.any()):
            return logits.sum() * 0.0
        logits, labels = logits[mask], labels[mask]
    if labels.ndim == 2:
        return torch.nn.functional.binary_cross_entropy_with_logits(
            logits, labels.to(logits.dtype), reduction="sum")
    return torch.nn.functional.cross_entropy(logits, labels, reduction="sum")


def loss_terms(rows: int, labels: torch.Tensor) -> int:
    """The terms :func:`cross_entropy_sum` adds over ``rows`` rows: one each, or one per class.

    ``labels``: any rows of the labels (a 0/1 matrix's columns are the classes).
    """
    return rows * (int(labels.shape[1]) if labels.ndim == 2 else 1)


def mean_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The mean of :func:`cross_entropy_sum` over every row's terms (:func:`loss_terms`).

    A sampled batch's loss: PyG's ``CrossEntropyLoss()`` of its rows' class ids, or
    ``BCEWithLogitsLoss()`` of their (row, class) entries (``--loss bce``).
    """
    return cross_entropy_sum(logits, labels) / max(1, loss_terms(len(logits), labels))
