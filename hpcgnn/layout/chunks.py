"""A layer's forward as HongTu's offload runs it, on shapes: its exchanges and what they read.

Offload (:mod:`hpcgnn.models.offload`) keeps every vertex value on the host and runs a
layer's forward on one chunk's own rows at a time (:class:`~hpcgnn.kinds.Primitives` of
:mod:`hpcgnn.nn.chunk`). Only an *exchange* (``g.aggregate``, ``g.attention``) reads other
rows: its input ``X_i`` goes to the host, and a sweep over the chunks loads each chunk's
neighbour rows of ``X_i`` through the deduplicated path and computes the exchange's output
``A_i`` on them. So a layer with ``K`` exchanges runs as ``K + 1`` sweeps (the first is
skipped when ``X_0`` is the layer input itself, :attr:`ChunkLayer.raw`): sweep ``s`` runs
the forward up to exchange ``s``'s input, with ``A_0 .. A_{s-1}`` given. The backward
sweeps the exchanges in reverse (:func:`stage_outputs`).

:func:`chunk_plan` traces a model's layers on :class:`Value` shapes: widths, positions
(the exchanges made before a value is kept) and which *leaves* (the layer input ``h``, the
exchange outputs ``a<i>``, values of earlier layers ``s:<key>``, products of sparse input
features ``p<weight>``) each output depends on. A run of the forward reads the own rows
of the leaves its outputs depend on, no others (:func:`leaves`). The model and the cost
model (:func:`hpcgnn.cost.offload.predict_offload`) both follow the plan, so every byte
is predicted. Pure: no torch, no MPI.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hpcgnn.kinds import Layer


class Value:
    """A value of the trace: its width and the leaves it depends on."""

    def __init__(self, width: int, deps: frozenset[str] = frozenset()) -> None:
        self.width, self.deps = int(width), deps

    def _join(self, other: object) -> Value:
        if isinstance(other, Value):
            return Value(max(self.width, other.width), self.deps | other.deps)
        return self._same()

    __add__ = __radd__ = __sub__ = __rsub__ = _join
    __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _join

    def _same(self, *args: Any, **kwargs: Any) -> Value:
        return Value(self.width, self.deps)

    __neg__ = relu = elu = sigmoid = tanh = exp = clamp = contiguous = _same


class Leaf(Value):
    """A leaf as it is: the layer input, or a product of sparse features."""


class SparseValue(Value):
    """Sparse input features: a dense product is an SpMM of the host tier's CSR."""


@dataclass(frozen=True)
class WeightRef:
    """A weight of the trace: its shape and index in the layer's weights."""

    shape: tuple[int, int]
    index: int


@dataclass(frozen=True)
class Exchange:
    """An exchange: ``aggregate`` or ``attention``, its loaded width, its output width."""

    primitive: str
    width: int
    out: int


@dataclass
class ChunkLayer:
    """One layer as offload runs it.

    Attributes
    ----------
    f_in, f_out
        Its widths.
    exchanges
        In call order.
    raw
        The leaf ``X_0`` is, when the first exchange reads the layer input (``"h"``) or a
        product of sparse features (``"p<weight>"``) as it is: its host rows are loaded.
    products
        Sparse features: per weight index, the product's width.
    reads, sets
        Values of earlier layers (``g.state``) read (per key its width), and values kept
        for later layers (per key its width and position: exchanges made before).
    deps
        The leaves each output depends on: ``"out"``, ``"x<i>"``, ``"s:<key>"``.
    """

    f_in: int
    f_out: int
    exchanges: list[Exchange] = field(default_factory=list)
    raw: str | None = None
    products: dict[int, int] = field(default_factory=dict)
    reads: dict[str, int] = field(default_factory=dict)
    sets: dict[str, tuple[int, int]] = field(default_factory=dict)
    deps: dict[str, frozenset[str]] = field(default_factory=dict)


class _State(dict[str, Any]):
    """``g.state`` of a trace: records reads of earlier layers' values and sets."""

    def __init__(self, tracer: ChunkTracer, kept: dict[str, int]) -> None:
        super().__init__()
        self.tracer, self.kept = tracer, kept

    def __getitem__(self, key: str) -> Value:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        if key not in self.kept:
            raise KeyError(key)
        self.tracer.plan.reads[key] = self.kept[key]
        return Value(self.kept[key], frozenset({f"s:{key}"}))

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self or key in self.kept else default

    def __setitem__(self, key: str, value: Value) -> None:
        plan = self.tracer.plan
        plan.sets.setdefault(key, (value.width, len(plan.exchanges)))
        plan.deps[f"s:{key}"] = value.deps
        dict.__setitem__(self, key, value)


class ChunkTracer:
    """The primitives of a chunk trace (:class:`~hpcgnn.kinds.Primitives`)."""

    def __init__(self, layer: int, last: bool, plan: ChunkLayer, kept: dict[str, int],
                 h: Value) -> None:
        self.layer, self.last, self.plan, self.h = layer, last, plan, h
        self.state: dict[str, Any] = _State(self, kept)

    def _exchange(self, primitive: str, x: Value, out: int) -> Value:
        plan, i = self.plan, len(self.plan.exchanges)
        if i == 0 and isinstance(x, Leaf):
            plan.raw = next(iter(x.deps))
        plan.deps[f"x{i}"] = x.deps
        plan.exchanges.append(Exchange(primitive, x.width, out))
        return Value(out, frozenset({f"a{i}"}))

    def aggregate(self, x: Value) -> Value:
        """An exchange of ``x``'s rows (an SpMM with the chunk's block)."""
        if isinstance(x, SparseValue):
            raise ValueError("offload multiplies sparse input features before aggregating")
        return self._exchange("aggregate", x, x.width)

    def dense(self, x: Value, w: WeightRef) -> Value:
        """``X W`` on the chunk's rows; on sparse features a product on the host tier."""
        if isinstance(x, SparseValue):
            self.plan.products[w.index] = w.shape[1]
            return Leaf(w.shape[1], frozenset({f"p{w.index}"}))
        return Value(w.shape[1], x.deps)

    def own(self, x: Value) -> Value:
        """The chunk's own rows: ``x`` itself."""
        return x

    def bias(self, z: Value) -> Value:
        """``z`` (plus the layer's bias where the run has one: no leaf, no exchange)."""
        return z

    def propagate(self, h: Value, w: WeightRef, self_weight: WeightRef | None = None
                  ) -> Value:
        """Aggregate first (the layer input's rows are loaded), sparse features last."""
        if isinstance(h, SparseValue):
            z = self.aggregate(self.dense(h, w))
        else:
            z = self.dense(self.aggregate(h), w)
        return z if self_weight is None else z + self.dense(self.own(h), self_weight)

    def attention(self, h: Value, w: WeightRef, a_src: WeightRef, a_dst: WeightRef) -> Value:
        """``[z | s_src]`` of the own rows exchanged; the heads' output."""
        z = self.dense(h, w)
        heads, per_head = a_src.shape
        cols = w.shape[1]
        return self._exchange("attention", Value(cols + heads, z.deps),
                              per_head if self.last else cols)


def chunk_plan(widths: Sequence[int], kind: Layer, sparse: bool = False) -> list[ChunkLayer]:
    """Every layer of a model of ``kind`` with widths ``f_0 .. f_L`` as offload runs it.

    ``sparse``: the input features are sparse (the first layer's products are SpMMs).
    """
    last = len(widths) - 2
    kept: dict[str, int] = {}
    out = []
    for layer, (f_in, f_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        plan = ChunkLayer(f_in, f_out)
        h = (SparseValue if sparse and layer == 0 else Leaf)(f_in, frozenset({"h"}))
        tracer = ChunkTracer(layer, layer == last, plan, kept, h)
        ws = [WeightRef(w.shape, i)
              for i, w in enumerate(kind.weights(f_in, f_out, layer, layer == last))]
        result = kind.forward(tracer, h, ws)
        plan.deps["out"] = result.deps
        kept.update({k: w for k, (w, _) in plan.sets.items()})
        out.append(plan)
    return out


def stored(plan: ChunkLayer, cached: bool) -> list[bool]:
    """Per exchange, whether its output rows stay on the host for the backward.

    A layer of several exchanges keeps them all (its forward reads them in later sweeps);
    a layer of one keeps an aggregate when ``cached`` (the cache budget allows it) and
    recomputes an attention from its reloaded rows.
    """
    many = len(plan.exchanges) > 1
    return [many or (e.primitive == "aggregate" and cached) for e in plan.exchanges]


def stage_outputs(plan: ChunkLayer, stage: int | None) -> list[str]:
    """The outputs whose gradients backward stage ``stage`` reads.

    Stage ``k`` (``K - 1`` down to ``0``) forms the gradient of ``A_k`` from the outputs
    that depend on it and pushes its neighbour rows' gradient to their owners; stage ``0``
    also forms the gradients of the weights and leaves of every output but ``X_0``
    (a layer without exchanges: of every output). Stage ``None`` (after stage ``0``,
    where ``X_0`` is not a leaf) forms those of ``X_0``.
    """
    k_all = len(plan.exchanges)
    if stage is None:
        return ["x0"]
    tags = ["out", *(f"x{i}" for i in range(stage + 1, k_all)), *(f"s:{k}" for k in plan.sets)]
    if stage == 0:
        return tags
    return [t for t in tags if f"a{stage}" in plan.deps[t]]


def stage_leaves(plan: ChunkLayer, stage: int | None, layer: int) -> list[str]:
    """The leaves whose own rows' gradients stage ``stage`` adds to the host.

    The layer input (below the first layer), earlier layers' values and the products of
    sparse features that its outputs depend on, in stages ``0`` and ``None``.
    """
    if stage not in (0, None):
        return []
    deps = frozenset().union(*(plan.deps[t] for t in stage_outputs(plan, stage)))
    leaves = (["h"] if layer > 0 else []) + [f"s:{k}" for k in plan.reads]
    leaves += [f"p{c}" for c in plan.products]
    return [leaf for leaf in leaves if leaf in deps]


def sweeps(plan: ChunkLayer) -> range:
    """The forward's sweeps: ``s`` runs up to exchange ``s`` (``K``: the output)."""
    k_all = len(plan.exchanges)
    return range(1 if plan.raw and k_all else 0, k_all + 1)


def kept_at(plan: ChunkLayer, sweep: int) -> list[str]:
    """The values kept for later layers that sweep ``sweep`` writes (each once)."""
    first = sweeps(plan).start
    return [key for key, (_, pos) in plan.sets.items() if max(pos, first) == sweep]


def stages(plan: ChunkLayer) -> list[int | None]:
    """The backward's stages in order (:func:`stage_outputs`)."""
    k_all = len(plan.exchanges)
    out: list[int | None] = list(range(max(k_all, 1) - 1, -1, -1))
    return [*out, None] if k_all and not plan.raw else out


def sweep_outputs(plan: ChunkLayer, sweep: int) -> list[str]:
    """What forward sweep ``sweep`` writes: ``X_s`` (or the output) and values kept."""
    tag = f"x{sweep}" if sweep < len(plan.exchanges) else "out"
    return [tag, *(f"s:{k}" for k in kept_at(plan, sweep))]


def leaves(plan: ChunkLayer, outputs: Sequence[str], live: int | None, sparse: bool
           ) -> list[str]:
    """The leaves whose own rows a run producing ``outputs`` reads from the host.

    Those its outputs depend on, but the exchange it computes from loaded rows (``live``)
    and sparse features themselves (only their products are rows).
    """
    deps = frozenset().union(*(plan.deps[t] for t in outputs))
    skip = {f"a{live}", *(["h"] if sparse else [])}
    return sorted(d for d in deps if d not in skip)


def leaf_width(plan: ChunkLayer, name: str) -> int:
    """The width of a leaf or an output (``"h"``, ``"a<i>"``, ``"x<i>"``, ``"out"`` ...)."""
    if name == "h":
        return plan.f_in
    if name == "out":
        return plan.f_out
    if name[0] in "ax":
        e = plan.exchanges[int(name[1:])]
        return e.out if name[0] == "a" else e.width
    if name[0] == "p":
        return plan.products[int(name[1:])]
    key = name[2:]
    return plan.sets[key][0] if key in plan.sets else plan.reads[key]
