"""Layer widths and the per-layer evaluation order of the GCN (pure; every model obeys it).

A layer ``Z = Â^T H W`` runs as ``(Â^T H) W`` or ``Â^T (H W)``, whichever makes the SpMM
narrower (``--product-order auto``), or always as CAGNET's ``(Â^T H) W`` with the first
layer's backward SpMM (``--product-order paper``, :attr:`hpcgnn.kinds.Layer.product_order`),
whose backward in every full-batch layout is CAGNET's too: ``Â G^l`` first, on the layer's
output width, reused for ``W``'s gradient and ``H``'s (:meth:`Ordered.aggregate_transform`);
the models (:mod:`hpcgnn.nn.gcn`), the layer traces (:mod:`hpcgnn.layout.trace`), the SUMMA
layer plans (:mod:`hpcgnn.layout.summa`) and so the cost models (:mod:`hpcgnn.cost`) all
follow :func:`transform_first` and :func:`input_gradient`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from hpcgnn.kinds import GCN, PRODUCT_ORDERS, Layer, Primitives

AUTO, PAPER = PRODUCT_ORDERS


def layer_sizes(num_features: int, hidden: int, num_classes: int, layers: int) -> list[int]:
    """Feature widths ``[f_0, ..., f_L]`` of an ``layers``-layer GCN."""
    if layers < 1:
        raise ValueError("a GCN needs at least one layer")
    return [num_features] + [hidden] * (layers - 1) + [num_classes]


def weight_shapes(
    widths: list[int] | tuple[int, ...], kind: Layer = GCN
) -> list[tuple[int, int]]:
    """Shapes of the weights in the model's order, each layer's by :meth:`Layer.layer_shapes`.

    GCN's ``W^l`` ``(f_{l-1}, f_l)``; GraphSAGE's ``W_self^l, W_neigh^l`` both of that shape;
    GIN's ``W_1^l`` of that shape and ``W_2^l`` ``(f_l, f_l)``; GAT's ``W^l`` (``f_{l-1} x
    heads * f'``) and ``a_src^l, a_dst^l`` (``heads x f'``).
    """
    last = len(widths) - 2
    return [
        shape for layer, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True))
        for shape in kind.layer_shapes(a, b, layer, layer == last)
    ]


def param_shapes(
    widths: list[int] | tuple[int, ...] | Sequence[int], kind: Layer = GCN, bias: bool = False
) -> list[tuple[int, ...]]:
    """Shapes of every parameter in the model's order: each layer's weights, then its bias.

    Without ``bias`` these are :func:`weight_shapes`; with it each layer's weights are
    followed by its bias ``(f_l,)`` (the layer's output width): ``W, b`` (GCN),
    ``W_self, W_neigh, b`` (GraphSAGE), ``W_1, W_2, b`` (GIN), ``W, a_src, a_dst, b``
    (GAT: ``b`` of ``K f'``, or ``C`` after the output heads' mean). Minibatch mode's
    sampled models and the full-batch ones with ``--bias`` hold these, so a checkpoint's
    ``w<i>`` and ``params_sha256`` agree across them.
    """
    last = len(widths) - 2
    out: list[tuple[int, ...]] = []
    for layer, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        out += kind.layer_shapes(a, b, layer, layer == last)
        if bias:
            out.append((b,))
    return out


def transform_first(layer: int, f_in: int, f_out: int, order: str = AUTO) -> bool:
    """Whether layer ``layer`` computes ``Â^T (H W)`` rather than CAGNET's ``(Â^T H) W``.

    Both are the same product; the SpMM (and its communication) runs on ``f_out``
    instead of ``f_in`` columns. The input layer's features need no gradient, so the
    CAGNET order skips its backward SpMM, while ``Â^T (X W)`` needs one (``Â G`` gives
    ``W``'s gradient): there the narrow order pays off only when ``2 f_out < f_in``.
    ``order`` ``"paper"`` (:data:`~hpcgnn.kinds.PRODUCT_ORDERS`): never, CAGNET's order.
    """
    if order == PAPER:
        return False
    return 2 * f_out < f_in if layer == 0 else f_out < f_in


def input_gradient(order: str) -> bool:
    """Whether the first layer's backward SpMM runs: the input features get a gradient.

    ``"auto"``: no, nothing needs ``Â dT`` of the input; ``"paper"``: yes, as CAGNET, whose
    backward computes ``Â G^1`` in every layer (:func:`transform_first`): it gives ``W^1``'s
    gradient (:meth:`Ordered.aggregate_transform`). The input's gradient itself is not used.
    """
    return order == PAPER


class Ordered(Primitives, Protocol):
    """The primitives :func:`propagate` runs on: a full-batch layout's, or the trace's."""

    def aggregate_transform(self, h: Any, w: Any) -> Any:
        """``(Â^T H) W`` with CAGNET's backward.

        The backward SpMM runs once on ``G`` (``w``'s output width): ``U = Â G``, then
        ``W``'s gradient ``H^T U`` and ``H``'s ``U W^T``; where the dense step is a
        layout's own (a SUMMA grid's), ``U``'s column blocks are all-gathered along the
        process row for them (:func:`hpcgnn.nn.gcn.aggregate_transform`).
        """


def propagate(
    g: Ordered, h: Any, w: Any, self_weight: Any | None = None, order: str = AUTO
) -> Any:
    """``Â^T H W`` (plus ``H W_self``) through ``g``'s primitives, before the activation.

    The one definition of ``g.propagate`` for every layout and for the trace: the order
    follows :func:`transform_first` on the shape of ``w`` (the whole ``W^l``) and the run's
    ``order`` (the layer's :attr:`~hpcgnn.kinds.Layer.product_order`), ``Â^T (H W)``
    when it makes the SpMM narrower, else ``(Â^T H) W``, with ``order`` ``"paper"``
    CAGNET's (:meth:`Ordered.aggregate_transform`: its backward SpMM on ``G^l``); the self
    term is one more dense step on the layer's own rows (``g.own``).
    """
    if transform_first(g.layer, w.shape[0], w.shape[1], order):
        z = g.aggregate(g.dense(h, w))
    elif order == PAPER:
        z = g.aggregate_transform(h, w)
    else:
        z = g.dense(g.aggregate(h), w)
    return z if self_weight is None else z + g.dense(g.own(h), self_weight)
