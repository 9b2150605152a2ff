"""What a layer is: the shapes of its weights, the operator it aggregates over, its forward.

A layer is an object (:class:`Layer`): it declares its weights from ``(f_in, f_out)`` and
its own settings (:meth:`Layer.weights`), the graph operator its aggregations use
(:attr:`Layer.operator`), and writes its forward on graph primitives (:class:`Primitives`)
that every data layout supplies: ``g.aggregate(h)`` (the operator times ``h``),
``g.dense(h, w)`` (``H W``), ``g.propagate(h, w)`` (``Â^T H W`` in the order with the
narrower SpMM) and ``g.attention(...)`` (GAT's attention). Each primitive is one autograd
function with its adjoint in every layout, so a layer's backward comes from autograd and
nothing in the package names the layer. The built-in layers (``--model gcn, sage, gin,
gat``) are such layers, one module each beside this one, registered in
:mod:`hpcgnn.kinds`; a researcher's own is a subclass (``hpcgnn train --model
MODULE:CLASS``, ``hpcgnn.train(model=...)``; see ``docs/layers.md``).

Pure: a layer's forward calls the primitives and the methods of the values they return
(``+``, ``*``, ``.relu()``), so this module imports neither torch nor MPI.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: Every run label (``--algo`` of full-batch training, or the mode) of the package: each
#: runs any layer through the primitives.
ALL_MODES = frozenset({"1d", "1.5d", "2d", "3d", "halo", "offload", "minibatch", "gist"})

#: ``--product-order``: how ``g.propagate`` evaluates ``Â^T H W`` (:attr:`Layer.product_order`).
#: ``auto`` (the default): the order with the narrower SpMM, no backward SpMM in the first
#: layer when it aggregates first; ``paper``: CAGNET's ``(Â^T H) W`` in every layer, with
#: the first layer's backward SpMM (the input features' gradient, unused) and, in the row
#: layouts, CAGNET's backward ``Â G^l`` (:func:`hpcgnn.layout.order.propagate`).
PRODUCT_ORDERS = ("auto", "paper")

#: The run labels whose layers evaluate ``g.propagate`` through
#: :func:`hpcgnn.layout.order.propagate` (the full-batch layouts); offload, minibatch and
#: GIST choose their own order and refuse ``--product-order paper``.
ORDERED_MODES = frozenset({"1d", "1.5d", "2d", "3d", "halo"})


@dataclass(frozen=True)
class Weight:
    """One weight a layer declares.

    Attributes
    ----------
    shape
        Its shape.
    stream
        The random stream its Glorot-uniform values come from: ``seed + stream``. Each
        stream draws its weights in the model's order (layer by layer), one 64-bit draw
        per entry, so the weights of one stream chain like a plain GCN's.
    """

    shape: tuple[int, int]
    stream: int = 0


#: The operators' names (:class:`Operator`).
OPERATORS = ("normalized", "mean", "sum", "pattern", "weighted")


@dataclass(frozen=True)
class Operator:
    """The graph operator a layer's aggregations multiply by (``g.aggregate``).

    Attributes
    ----------
    name
        ``"normalized"``: GCN's ``Â^T`` with ``Â = D_r^-1/2 (A + I) D_c^-1/2``;
        ``"mean"``: ``D_in^-1 A^T`` (no self loops); ``"sum"``: ``A^T + s I``
        unnormalised; ``"pattern"``: the ones of ``A^T + I`` (attention's edges);
        ``"weighted"``: ``A_w^T``, the per-edge weights stored in the graph file (ones
        where it has none), unnormalised, no self loops.
    self_weight
        ``"sum"``'s diagonal ``s`` (GIN: ``1 + eps``).
    """

    name: str
    self_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.name not in OPERATORS:
            raise ValueError(f"operator {self.name!r} is none of {', '.join(OPERATORS)}")

    @property
    def self_loops(self) -> bool:
        """Whether the operator has ``A + I``'s pattern (every diagonal entry)."""
        return self.name not in ("mean", "weighted")

    @property
    def symmetric(self) -> bool:
        """Whether it is symmetric on an undirected graph (its adjoint is itself)."""
        return self.name != "mean"

    @property
    def weighted(self) -> bool:
        """Whether it reads the graph file's per-edge weights."""
        return self.name == "weighted"


NORMALIZED = Operator("normalized")
MEAN = Operator("mean")
PATTERN = Operator("pattern")
WEIGHTED = Operator("weighted")


class Primitives(Protocol):
    """What a data layout supplies to one call of a layer's forward.

    Attributes
    ----------
    layer
        The layer's index (0 reads the input features).
    last
        Whether it is the output layer (its output are the logits).
    state
        What a layer keeps for the layers after it in one forward pass (e.g. GCNII's
        initial representation), by name: this rank's rows, in the layout of the layer's
        values.
    """

    layer: int
    last: bool
    state: dict[str, Any]

    def aggregate(self, h: Any) -> Any:
        """The operator times ``h`` (this rank's rows of ``Â^T H``); adjoint ``Â G``."""

    def dense(self, h: Any, w: Any) -> Any:
        """``H W`` on this rank's rows (on a SUMMA grid, the row collectives)."""

    def own(self, h: Any) -> Any:
        """The rows of ``h`` the layer outputs (a self term's, no communication).

        ``h`` itself where a rank's input and output rows are the same (every full-batch
        layout); a sampled block's or a chunk's destination rows among its input rows.
        """

    def propagate(self, h: Any, w: Any, self_weight: Any | None = None) -> Any:
        """``Â^T H W`` (plus ``H W_self``) in the order whose SpMM is narrower."""

    def attention(self, h: Any, w: Any, a_src: Any, a_dst: Any) -> Any:
        """GAT's layer: heads of ``z = H W`` scored by ``a_src, a_dst`` over the pattern.

        The coefficients' softmax over each row with the attention dropout, the weighted
        sum of ``z``; the heads concatenated and ELU on a hidden layer, their mean on the
        last. Where the run has biases (minibatch mode, ``--bias``), the layer's is added
        before the ELU (after the heads' mean on the last layer).
        """

    def bias(self, z: Any) -> Any:
        """``z`` plus the layer's bias where the run has biases, else ``z`` itself.

        The sampled models of minibatch mode always have biases, the full-batch layouts and
        offload with ``--bias`` (one per layer, of the layer's output width, zero at
        first); everywhere else it is ``z``, at no cost.
        """


class Layer:
    """A GNN layer: its weights, its operator and its forward on graph primitives.

    Subclass it and define :meth:`weights` (default: one ``(f_in, f_out)`` matrix) and
    :meth:`forward`; set :attr:`operator` when the layer aggregates over another operator
    than GCN's. Settings are the instance's attributes (they take part in equality and in
    the description a checkpoint records).

    Attributes
    ----------
    name
        The ``--model`` name (``MODULE:CLASS`` for a layer from outside the package).
    title
        The layer as a formula, for help texts and reports.
    operator
        The operator ``g.aggregate`` multiplies by.
    modes
        The run labels (``--algo`` of full-batch training, or the mode) that train it
        (default: every one; a layer may narrow them).
    input_weight
        The weight whose shape sets the order of a sparse input's first product (the
        one its first aggregation multiplies).
    flags
        The command's settings the layer reads (``gin_eps``; ``heads``, ``output_heads``,
        ``attention_dropout``); another layer refuses them (:meth:`configured`).
    attention, heads, output_heads
        GAT's: whether the layer attends (the whole-graph module then builds the
        neighbourhoods, a directed graph's SUMMA backward keeps the forward's operator),
        its heads on hidden layers and on the last (memory estimates, GIST's head ids).
    product_order
        How ``g.propagate`` evaluates ``Â^T H W`` in the full-batch layouts, one of
        :data:`PRODUCT_ORDERS` (``--product-order``; the run's setting, which
        :attr:`hpcgnn.config.TrainConfig.kind` sets on the layer only when it is not
        ``"auto"``, so a default layer's settings and equality are unchanged).
    """

    name: str = ""
    title: str = ""
    operator: Operator = NORMALIZED
    modes: frozenset[str] = ALL_MODES
    input_weight: int = 0
    flags: frozenset[str] = frozenset()
    attention: bool = False
    heads: int = 1
    output_heads: int = 1
    product_order: str = PRODUCT_ORDERS[0]

    def weights(self, f_in: int, f_out: int, layer: int, last: bool) -> list[Weight]:
        """The weights of layer ``layer`` from ``f_in`` to ``f_out`` features.

        ``last``: it is the output layer. How many weights a layer has may depend on its
        position (``layer``, ``last``), not on its widths.
        """
        return [Weight((f_in, f_out))]

    def forward(self, g: Primitives, h: Any, w: Sequence[Any]) -> Any:
        """This rank's rows of the layer's output given those of its input ``h``.

        ``w``: the layer's weights in :meth:`weights`' order. The input dropout is applied
        before (by the model); the layer applies its own activation.
        """
        raise NotImplementedError(f"{type(self).__name__} defines no forward")

    def configured(self, **settings: Any) -> Layer:
        """The layer with the command's settings it reads (:attr:`flags`) applied.

        ``settings``: every such setting by name; the default implementation reads none.
        """
        return self

    def width_groups(self, width: int) -> int:
        """Groups of columns a hidden width of ``width`` has, each kept whole by GIST.

        GIST splits a hidden width among its sub-networks by whole groups of
        ``width / groups`` consecutive columns (``--mode gist``, ``docs/gist.md``). The
        default, ``width``, splits it column by column; GAT's are its heads.
        """
        return width

    # -- derived facts -------------------------------------------------------------------
    @property
    def mean(self) -> bool:
        """The operator is the mean ``D_in^-1 A^T``."""
        return self.operator.name == "mean"

    @property
    def summed(self) -> bool:
        """The operator is the unnormalised sum ``A^T + s I`` (GIN's)."""
        return self.operator.name == "sum"

    @property
    def self_loops(self) -> bool:
        """The operator has ``A + I``'s pattern (every diagonal entry), else ``A``'s."""
        return self.operator.self_loops

    def weight_count(self, layer: int, last: bool) -> int:
        """How many weights layer ``layer`` has."""
        return len(self.weights(1, 1, layer, last))

    def weight_slices(self, layers: int, bias: bool = False) -> list[slice]:
        """Where each layer's parameters lie in a model of ``layers`` layers (the model's order).

        ``bias``: the model has a bias per layer, each after its layer's last weight (the
        last entry of the layer's slice), as every mode with biases orders them.
        """
        out, start = [], 0
        for layer in range(layers):
            stop = start + self.weight_count(layer, layer == layers - 1) + int(bias)
            out.append(slice(start, stop))
            start = stop
        return out

    @property
    def weights_per_layer(self) -> int:
        """The most weights a layer has (every layer's count for the built-in layers)."""
        return max(self.weight_count(layer, last) for layer in (0, 1) for last in (False, True))

    def layer_heads(self, last: bool) -> int:
        """Attention heads of a layer (1 for a layer without attention)."""
        if not self.attention:
            return 1
        return self.output_heads if last else self.heads

    def layer_shapes(self, f_in: int, f_out: int, layer: int, last: bool
                     ) -> list[tuple[int, int]]:
        """Shapes of layer ``layer``'s weights, in the model's order."""
        return [w.shape for w in self.weights(f_in, f_out, layer, last)]

    def replace(self, **changes: Any) -> Layer:
        """A copy with ``changes`` to its settings."""
        out = copy.copy(self)
        for key, value in changes.items():
            setattr(out, key, value)
        return out

    def settings(self) -> dict[str, Any]:
        """The instance's settings (its attributes), by name."""
        return dict(sorted(vars(self).items()))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.settings() == other.settings()

    def __hash__(self) -> int:
        return hash((type(self), tuple(map(repr, self.settings().items()))))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.settings().items())
        return f"{type(self).__name__}({args})"

    def __str__(self) -> str:
        return self.name or f"{type(self).__module__}:{type(self).__qualname__}"


def split_bias(params: Sequence[Any], bias: bool) -> tuple[list[Any], Any | None]:
    """A layer's parameters (its slice of :meth:`Layer.weight_slices`) as ``(weights, bias)``.

    With ``bias`` the last one is the layer's bias (``None`` without), as every mode with
    biases orders them.
    """
    return (list(params[:-1]), params[-1]) if bias else (list(params), None)
