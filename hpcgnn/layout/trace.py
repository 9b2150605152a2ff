"""A layer's forward run on shapes alone: which primitives it calls, on how many columns.

The cost models and the layouts' plans read a layer from this trace, never from its name:
:func:`trace_layer` runs :meth:`hpcgnn.kinds.Layer.forward` with a :class:`Tracer` for
primitives and :class:`Shape` values (a width, and whether the value needs a gradient) in
place of tensors, and records each call (:class:`Call`). A layer written with the
primitives and the values' arithmetic (``+``, ``-``, ``*``, ``/``, ``.relu()`` ...) is traced
as it runs; so a researcher's layer gets its bytes predicted with no code in
:mod:`hpcgnn.cost` for it. Pure: no torch, no MPI.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hpcgnn.errors import ConfigError
from hpcgnn.kinds import GCN, Layer
from hpcgnn.layout.order import input_gradient, propagate

AGGREGATE = "aggregate"
DENSE = "dense"
ATTENTION = "attention"


@dataclass(frozen=True)
class Call:
    """One primitive call of a layer's forward.

    Attributes
    ----------
    layer
        The layer's index.
    primitive
        ``"aggregate"`` (an SpMM with the operator), ``"dense"`` (``H W``) or
        ``"attention"`` (GAT's: the rows of ``[z | s_src]`` gathered, the edges scored).
    width
        Columns the neighbour exchange moves: the SpMM's ``f``; the attention's
        ``K f' + K``; a dense step's output columns.
    backward
        Whether its adjoint runs (its input needs a gradient; a weight's always does).
    f_in, f_out
        A dense step's (and an attention's ``W``'s) shape; the SpMM's width twice.
    heads
        An attention's heads (else 1).
    final
        On the last layer: its result reaches the layer's output through elementwise
        operations only, and so does every other part of the output (a SUMMA grid's dense
        step then delivers the logits to their scorers itself).
    adjoint
        An SpMM of CAGNET's ``(Â^T H) W`` (``g.propagate`` with ``--product-order
        paper``, :meth:`~hpcgnn.layout.order.Ordered.aggregate_transform`) and its dense
        step: the width of ``G`` the backward multiplies, ``W``'s output width (a SUMMA
        grid then all-gathers ``Â G`` along the process row instead of running the dense
        step's adjoint); 0: the adjoint of the forward, ``width``.
    """

    layer: int
    primitive: str
    width: int
    backward: bool
    f_in: int
    f_out: int
    heads: int = 1
    final: bool = False
    adjoint: int = 0

    @property
    def row_backward(self) -> int:
        """Columns the backward moves in the row layouts (1D, 1.5D, halo); 0 if it does not run."""
        return (self.adjoint or self.width) if self.backward else 0


#: Whose rows a value of the trace has: the layer input's (``IN``), the layer output's
#: (``OUT``: after an aggregation or ``g.own``), an earlier layer's (``KEPT``: from
#: ``g.state``), or several of them (``MIXED``). The same rows in every full-batch layout;
#: not in a sampled block or an offload chunk, whose output rows are some of its input rows.
IN, OUT, KEPT, MIXED = "input", "output", "kept", "mixed"


class Shape:
    """A value of the trace: its width, whether it needs a gradient, where it comes from.

    ``sources``: the calls whose results reach it through elementwise operations only
    (their indices in the trace); ``plain``: something else does too (the layer's input,
    a value an earlier layer kept); ``rows``: whose rows it has (:data:`IN` ...).
    """

    def __init__(self, width: int, grad: bool, sources: frozenset[int] = frozenset(),
                 plain: bool = True, rows: str = IN) -> None:
        self.width, self.grad = int(width), bool(grad)
        self.sources, self.plain, self.rows = sources, plain, rows

    def _join(self, other: object) -> Shape:
        if isinstance(other, Shape):
            if other.width != self.width and 1 not in (self.width, other.width):
                raise ValueError(f"a layer combines values of {self.width} and {other.width}"
                                 " columns")
            rows = self.rows if self.rows == other.rows else MIXED
            return Shape(max(self.width, other.width), self.grad or other.grad,
                         self.sources | other.sources, self.plain or other.plain, rows)
        return self._same()  # a number

    __add__ = __radd__ = __sub__ = __rsub__ = _join
    __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _join

    def _same(self, *args: Any, **kwargs: Any) -> Shape:
        return Shape(self.width, self.grad, self.sources, self.plain, self.rows)

    __neg__ = relu = elu = sigmoid = tanh = exp = clamp = contiguous = _same


class WeightShape:
    """A weight of the trace: its shape; it needs a gradient."""

    def __init__(self, shape: tuple[int, int]) -> None:
        self.shape = shape


class Tracer:
    """The primitives of a trace (:class:`~hpcgnn.kinds.Primitives`): each call recorded.

    ``first``: the index in the whole trace of this layer's first call; ``consumed``: the
    calls whose results another call took as its input.
    """

    def __init__(self, kind: Layer, layer: int, last: bool, state: dict[str, Any],
                 first: int = 0) -> None:
        self.kind, self.layer, self.last, self.state = kind, layer, last, state
        self.first = first
        self.calls: list[Call] = []
        self.consumed: set[int] = set()
        #: Why the layer needs a rank's input and output rows to be the same, if it does.
        self.hops: str | None = None

    def _reads_input_rows(self, h: Shape, what: str) -> None:
        """Note when ``what`` reads ``h`` whose rows are not the layer input's."""
        if h.rows != IN and self.hops is None:
            why = {OUT: "a value of its output rows (an aggregation's): two hops",
                   KEPT: "a value an earlier layer kept (g.state)",
                   MIXED: "a value that mixes the input's rows and the output's"}[h.rows]
            self.hops = f"layer {self.layer}'s {what} reads {why}"

    def _record(self, primitive: str, h: Shape, width: int, backward: bool, f_in: int,
                f_out: int, heads: int = 1, adjoint: int = 0) -> frozenset[int]:
        self.consumed |= h.sources
        self.calls.append(Call(self.layer, primitive, width, backward, f_in, f_out, heads,
                               adjoint=adjoint))
        return frozenset({self.first + len(self.calls) - 1})

    def aggregate(self, h: Shape, adjoint: int = 0) -> Shape:
        """The operator times ``h``: an SpMM of ``h``'s width.

        ``adjoint``: its backward multiplies ``G`` of that width, and runs (the weight it
        is transformed by needs ``Â G``: :meth:`aggregate_transform`).
        """
        self._reads_input_rows(h, "aggregation")
        made = self._record(AGGREGATE, h, h.width, h.grad or adjoint > 0, h.width, h.width,
                            adjoint=adjoint)
        return Shape(h.width, h.grad, made, plain=False, rows=OUT)

    def dense(self, h: Shape, w: WeightShape, adjoint: int = 0) -> Shape:
        """``H W`` (``adjoint``: CAGNET's backward, :meth:`aggregate_transform`)."""
        f_in, f_out = w.shape
        if h.width != f_in:
            raise ValueError(f"layer {self.layer}: a {h.width}-column value times a"
                             f" {f_in} x {f_out} weight")
        made = self._record(DENSE, h, f_out, h.grad, f_in, f_out, adjoint=adjoint)
        return Shape(f_out, True, made, plain=False, rows=h.rows)

    def aggregate_transform(self, h: Shape, w: WeightShape) -> Shape:
        """CAGNET's ``(Â^T H) W``: the SpMM's backward on ``G``, ``W``'s output width."""
        return self.dense(self.aggregate(h, w.shape[1]), w, w.shape[1])

    def own(self, h: Shape) -> Shape:
        """The rows the layer outputs of ``h`` (no communication)."""
        self._reads_input_rows(h, "g.own")
        out = h._same()
        out.rows = OUT
        return out

    def bias(self, h: Shape) -> Shape:
        """``h`` plus the layer's bias where the run has one (no communication)."""
        return h._same()

    def propagate(self, h: Shape, w: WeightShape, self_weight: WeightShape | None = None
                  ) -> Shape:
        """``Â^T H W`` in the layer's order (:func:`~hpcgnn.layout.order.propagate`)."""
        return propagate(self, h, w, self_weight, self.kind.product_order)

    def attention(self, h: Shape, w: WeightShape, a_src: WeightShape, a_dst: WeightShape
                  ) -> Shape:
        """GAT's attention: ``z = H W``, then ``[z | s_src]`` (``K f' + K`` columns) both ways."""
        cols = w.shape[1]
        heads, per_head = a_src.shape
        z = self.dense(h, w)
        self._reads_input_rows(z, "attention")
        made = self._record(ATTENTION, z, cols + heads, True, cols, cols, heads)
        return Shape(per_head if self.last else cols, True, made, plain=False, rows=OUT)

    def finish(self, out: Shape) -> list[Call]:
        """The calls, those that deliver the last layer's output marked ``final``."""
        mine = range(self.first, self.first + len(self.calls))
        delivered = (self.last and not out.plain and bool(out.sources)
                     and all(i in mine and i not in self.consumed
                             and self.calls[i - self.first].primitive != AGGREGATE
                             for i in out.sources))
        if not delivered:
            return self.calls
        return [replace(c, final=True) if self.first + k in out.sources else c
                for k, c in enumerate(self.calls)]


def trace_layer(kind: Layer, f_in: int, f_out: int, layer: int, last: bool,
                state: dict[str, Any] | None = None, first: int = 0,
                hops: list[str] | None = None) -> list[Call]:
    """The calls of one layer from ``f_in`` to ``f_out`` features (layer 0 reads ``X``).

    ``state``: what the layers before it kept (``g.state``) in this forward pass;
    ``first``: how many calls they made; ``hops``: gets why the layer needs a rank's input
    and output rows to be the same, if it does (:func:`one_hop`).
    """
    tracer = Tracer(kind, layer, last, {} if state is None else state, first)
    weights = [WeightShape(w.shape) for w in kind.weights(f_in, f_out, layer, last)]
    grad = layer > 0 or input_gradient(kind.product_order)  # the input's: CAGNET's order
    out = kind.forward(tracer, Shape(f_in, grad), weights)
    if not isinstance(out, Shape) or out.width != f_out:
        got = out.width if isinstance(out, Shape) else type(out).__name__
        raise ValueError(f"{kind}: layer {layer} gives {got} columns, not {f_out}")
    for key, value in tracer.state.items():  # a later layer reads it as it is
        if isinstance(value, Shape):
            tracer.state[key] = Shape(value.width, value.grad, rows=KEPT)
    if out.rows != OUT and tracer.hops is None:
        tracer.hops = f"layer {layer}'s output has {OUTPUT_ROWS[out.rows]}"
    if hops is not None and tracer.hops is not None:
        hops.append(tracer.hops)
    return tracer.finish(out)


#: What a layer's output has instead of its output rows (:func:`trace_layer`).
OUTPUT_ROWS = {IN: "its input's rows (neither an aggregation nor g.own made it)",
               KEPT: "an earlier layer's rows (g.state)", MIXED: "mixed rows"}


def trace(widths: Sequence[int], kind: Layer = GCN, hops: list[str] | None = None
          ) -> list[Call]:
    """Every call of a model of ``kind`` layers with widths ``f_0 .. f_L``, in order."""
    last = len(widths) - 2
    state: dict[str, Any] = {}
    calls: list[Call] = []
    for layer, (f_in, f_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        calls += trace_layer(kind, f_in, f_out, layer, layer == last, state, len(calls),
                             hops)
    return calls


def one_hop(widths: Sequence[int], kind: Layer) -> str | None:
    """Why ``kind``'s layers need a rank's input and output rows the same; ``None``: they don't.

    Where a layer's output rows are some of its input rows (a sampled block, an offload
    chunk), a layer aggregates only values of its input's rows (one hop), takes a self term
    through ``g.own``, outputs values of its output rows and keeps nothing across layers.
    Every full-batch layout runs any layer: there a rank's input and output rows are the
    same.
    """
    hops: list[str] = []
    trace(widths, kind, hops)
    return hops[0] if hops else None


def uses(widths: Sequence[int], kind: Layer, primitive: str) -> bool:
    """Whether a model of ``kind`` layers calls ``primitive`` (e.g. ``"attention"``)."""
    return any(c.primitive == primitive for c in trace(widths, kind))


def check_layer(widths: Sequence[int], kind: Layer) -> None:
    """Refuse, in one line, a layer whose forward cannot run on shapes of ``widths``.

    The trace runs the forward as training will (wrong widths, a weight of the wrong shape,
    an operation on values that are not the primitives' and their arithmetic's).
    """
    try:
        trace(widths, kind)
    except ConfigError:
        raise
    except Exception as err:
        why = " ".join(f"{type(err).__name__}: {err}".split())
        raise ConfigError(f"--model {kind}: its forward cannot run on widths"
                          f" {'-'.join(map(str, widths))} ({why})") from None


def exchanges(widths: Sequence[int], kind: Layer = GCN) -> list[Call]:
    """The calls that move neighbour rows: every aggregation and attention, in order."""
    return [c for c in trace(widths, kind) if c.primitive in (AGGREGATE, ATTENTION)]


def aggregation_widths(widths: Sequence[int], kind: Layer = GCN) -> list[tuple[int, bool]]:
    """The columns and whether the adjoint runs of each of :func:`exchanges`, in order.

    A GCN layer's SpMM is ``f_out`` wide in the order ``Â^T (H W)`` and ``f_in`` wide in
    ``(Â^T H) W`` (:func:`~hpcgnn.layout.order.transform_first`), whose input layer needs no
    backward (but with ``--product-order paper``,
    :func:`~hpcgnn.layout.order.input_gradient`); an attention exchanges the rows of
    ``[z | s_src]``, ``K f' + K`` wide, both ways (``W``'s gradient needs the gathered rows').
    """
    return [(c.width, c.backward) for c in exchanges(widths, kind)]


def row_exchange_widths(widths: Sequence[int], kind: Layer = GCN) -> list[tuple[int, int]]:
    """The columns each of :func:`exchanges` moves forward and backward in the row layouts.

    1D, 1.5D and halo: the backward of CAGNET's ``(Â^T H) W`` multiplies ``G^l``, the
    layer's output width (:attr:`Call.adjoint`); every other backward the forward's width;
    0 where no backward runs. A SUMMA grid's SpMMs read the same from their plans
    (:class:`hpcgnn.layout.summa.Step` ``adjoint``).
    """
    return [(c.width, c.row_backward) for c in exchanges(widths, kind)]
