"""GIST's sub-networks: random disjoint groups of every hidden dimension (pure).

Each round, every hidden width ``H`` of the global model is split at random into ``M``
disjoint groups; the input features and the output classes are never split. Group ``m``
has ``H // M`` ids, plus one for ``m < H % M``, so a sub-network has the same width in every
hidden layer; its ids are sorted, so the rows of a weight keep their order.

What a sub-network keeps of each weight comes from the shapes the layer declares
(:meth:`~hpcgnn.kinds.Layer.weights`), never from its name: :func:`model_params` probes a
layer's weights at doubled widths to see which axis follows its input width ``f_in`` or
its output width ``f_out`` (a layer's own width that equals one of them, as GIN's ``W_2``
or GCNII's convolution, follows it; a width that follows neither is not cut). A weight
whose rows follow a width is row-sharded over the ranks (:class:`Param`, ``sharded``) and
a sub-network keeps its rows and columns at its ids of the widths they follow
(:func:`cut`); any other parameter is a small replicated one (GAT's score vectors
``a_src, a_dst``, whose ``K x f'`` entries follow the layer's output; a sampled model's
bias), whose entries at its ids a sub-network takes (:func:`entries`), averaged over the
sub-networks when no axis follows a split width.

A layer may keep groups of a hidden width's columns together
(:meth:`~hpcgnn.kinds.Layer.width_groups`): GAT's ``H = K f'`` units are ``K`` blocks of
``f'`` consecutive ids (one head each), split into ``M`` groups of whole heads (``block=f'``
in :func:`subnets`, :func:`split_block`), so a sub-network keeps every unit of its heads
and none of the others'.

The draws come from the counter-based stream of ``(seed, round, layer)``
(:func:`hpcgnn.rng.stream_key`), so every rank computes the same groups without
communication.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod
from typing import TypeVar

import numpy as np

from hpcgnn.kinds import Layer
from hpcgnn.rng import TAG_GIST, stream_key

T = TypeVar("T")


def group_sizes(width: int, groups: int) -> list[int]:
    """Sizes of ``groups`` groups of ``width`` ids, differing by at most one."""
    base, extra = divmod(width, groups)
    return [base + (1 if m < extra else 0) for m in range(groups)]


@dataclass(frozen=True)
class Placement:
    """Where the ``M`` sub-networks of a GIST run train on ``P`` ranks.

    With ``M <= P`` the ranks form ``M`` groups of consecutive ranks, ``P / M`` each (sizes
    differing by one where ``M`` does not divide ``P``, the larger first), each training one
    sub-network. With ``M > P`` every group is one rank and a rank hosts several
    consecutive sub-networks (``M / P`` each, differing by one, the more first), which it
    trains one after the other in the round: the sub-networks are independent, so the
    result is the one of ``M`` ranks.

    Attributes
    ----------
    sizes
        Ranks of each sub-network's group.
    roots
        World rank of each group's first rank (non-decreasing).
    """

    sizes: tuple[int, ...]
    roots: tuple[int, ...]

    @classmethod
    def of(cls, ranks: int, groups: int) -> Placement:
        """The placement of ``groups`` sub-networks on ``ranks`` ranks."""
        if groups <= ranks:
            sizes = group_sizes(ranks, groups)
            return cls(tuple(sizes), tuple(int(b) for b in np.cumsum([0, *sizes[:-1]])))
        hosted = group_sizes(groups, ranks)
        return cls((1,) * groups, tuple(int(r) for r in np.repeat(np.arange(ranks), hosted)))

    def hosted(self, rank: int) -> list[int]:
        """The sub-networks whose group ``rank`` belongs to, in order (one when ``M <= P``)."""
        return [m for m, (root, size) in enumerate(zip(self.roots, self.sizes, strict=True))
                if root <= rank < root + size]


def split_ids(seed: int, round_: int, layer: int, width: int, groups: int) -> list[np.ndarray]:
    """Split ``0 .. width - 1`` at random into ``groups`` disjoint sorted id arrays.

    Parameters
    ----------
    seed, round_, layer
        Select the stream: a new split for every round and hidden layer.
    width
        The hidden width ``H`` (at least ``groups``).
    groups
        ``M``.
    """
    if not 1 <= groups <= width:
        raise ValueError(f"cannot split {width} ids into {groups} non-empty groups")
    key = int(stream_key(seed, TAG_GIST, round_, layer))
    perm = np.random.Generator(np.random.PCG64(key)).permutation(width)
    bounds = np.cumsum([0, *group_sizes(width, groups)])
    return [np.sort(perm[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@dataclass(frozen=True)
class Subnet:
    """The ids of one sub-network in every layer input/output of the global model.

    Attributes
    ----------
    widths
        The global model's widths ``f_0 .. f_L``.
    ids
        ``ids[l]``: the global ids of width ``f_l`` this sub-network keeps (all of them for
        ``l = 0`` and ``l = L``).
    """

    widths: tuple[int, ...]
    ids: tuple[np.ndarray, ...]

    @property
    def sub_widths(self) -> list[int]:
        """The sub-network's widths."""
        return [len(i) for i in self.ids]

    def blocks(self, index: int, size: int) -> tuple[int, np.ndarray]:
        """Blocks of ``size`` ids of width ``index``: how many the global model has, and ours.

        GAT's heads (``size = f'``): the global heads of a hidden layer's output and the
        global ids of the sub-network's heads (its units being whole blocks).
        """
        return self.widths[index] // size, self.ids[index][::size] // size


def subnet_heads(
    net: Subnet | None, kind: Layer, hidden: int, heads: int
) -> Callable[[int], tuple[int, np.ndarray] | None] | None:
    """A GIST sub-network's global heads per layer, its attention dropout keys; else ``None``.

    ``net``: the sub-network (``None``: the whole model); ``hidden``, ``heads``: the
    sub-model's (``kind`` is unused: a layer without attention never reads them).
    ``heads(layer)`` (:data:`~hpcgnn.kernels.attention.HeadIds`): :meth:`Subnet.blocks` of
    ``hidden / heads`` ids of a hidden layer's output; ``None`` on the output layer, whose
    heads are every sub-network's (its own ids).
    """
    if net is None:
        return None
    last, size = len(net.widths) - 2, hidden // heads
    return lambda layer: None if layer == last else net.blocks(layer + 1, size)


def subnets(
    seed: int, round_: int, widths: list[int] | tuple[int, ...], groups: int, block: int = 1
) -> list[Subnet]:
    """The ``groups`` sub-networks of round ``round_`` of a model of ``widths``.

    Hidden widths ``widths[1:-1]`` are split (:func:`split_ids`); the input and output are
    kept whole by every sub-network. ``block``: the hidden ids are split in blocks of that
    many consecutive ids, kept whole (GAT: a head's ``f'`` units; :func:`split_block`);
    the blocks are drawn as :func:`split_ids` draws ids, so ``block = 1`` is the plain split.
    """
    last = len(widths) - 1

    def split(i: int, w: int) -> list[np.ndarray]:
        blocks = split_ids(seed, round_, i, w // block, groups)
        if block == 1:
            return blocks
        return [(b[:, None] * block + np.arange(block)).reshape(-1) for b in blocks]

    per_layer = [
        [np.arange(w)] * groups if i in (0, last) else split(i, w) for i, w in enumerate(widths)
    ]
    return [
        Subnet(tuple(widths), tuple(per_layer[i][m] for i in range(len(widths))))
        for m in range(groups)
    ]


def split_block(kind: Layer, hidden: int) -> int:
    """Hidden ids GIST keeps together: ``hidden / groups`` (:meth:`Layer.width_groups`)."""
    return hidden // kind.width_groups(hidden)


def subnet_widths(kind: Layer, hidden: int, groups: int) -> list[int]:
    """Each of ``groups`` sub-networks' hidden width, the wider first.

    Whole blocks of :func:`split_block` ids (GAT: heads), the counts differing by at most
    one block.
    """
    block = split_block(kind, hidden)
    return [g * block for g in group_sizes(hidden // block, groups)]


#: What GIST keeps per weight entry: the weight and Adam's two moments.
PARAM_KINDS = ("weight", "exp_avg", "exp_avg_sq")


@dataclass(frozen=True)
class Param:
    """One parameter of a GIST model, in the model's order, and the widths it follows.

    Attributes
    ----------
    shape
        Its shape in the global model.
    layer
        Its layer.
    rows, cols
        The width (index ``l`` of ``f_0 .. f_L``) its rows, its columns follow; ``None``:
        neither the layer's input nor output width (never cut).
    flat
        The width its entries follow, row-major (GAT's ``K x f'`` score vectors follow
        the layer's output), when its axes do not; else ``None``.
    stream, index
        Its Glorot stream (``seed + stream``) and its place among the stream's matrices
        (:func:`hpcgnn.nn.init.init_weights`); ``stream`` ``None``: a sampled model's bias,
        not a declared weight (zeros).
    """

    shape: tuple[int, ...]
    layer: int
    rows: int | None = None
    cols: int | None = None
    flat: int | None = None
    stream: int | None = None
    index: int = 0

    @property
    def sharded(self) -> bool:
        """Whether its rows follow a width: row-sharded over the ranks (else replicated)."""
        return self.rows is not None and len(self.shape) == 2

    @property
    def bias(self) -> bool:
        """Whether it is a sampled model's bias (not a declared weight)."""
        return self.stream is None


def _follows(kind: Layer, f_in: int, f_out: int, layer: int, last: bool
             ) -> list[tuple[int | None, int | None, int | None]]:
    """For each weight of the layer: what its rows, columns and entries follow.

    ``0``: ``f_in``, ``1``: ``f_out``, ``None``: neither; probed at doubled widths.
    """
    probes = [kind.weights(a, b, layer, last) for a, b in
              ((f_in, f_out), (2 * f_in, f_out), (f_in, 2 * f_out))]
    if len({len(p) for p in probes}) != 1:
        raise ValueError(f"{kind}: layer {layer}'s weight count depends on its widths")

    def which(v: int, v_in: int, v_out: int) -> int | None:
        """``v`` at the widths, at ``2 f_in``, at ``2 f_out``: what it follows."""
        if v == f_in and (v_in, v_out) == (2 * f_in, v):
            return 0
        if v == f_out and (v_in, v_out) == (v, 2 * f_out):
            return 1
        return None

    out = []
    for base, w_in, w_out in zip(*probes, strict=True):
        axes = [which(base.shape[k], w_in.shape[k], w_out.shape[k]) for k in (0, 1)]
        flat = which(prod(base.shape), prod(w_in.shape), prod(w_out.shape))
        out.append((axes[0], axes[1], flat))
    return out


def model_params(widths: Sequence[int], kind: Layer, biased: bool = False) -> list[Param]:
    """The parameters of a model of ``kind`` layers of ``widths`` (``f_0 .. f_L``), in order.

    Each layer's declared weights (:meth:`~hpcgnn.kinds.Layer.weights`) with the widths
    their axes follow (:class:`Param`), then, for a model with biases (a sampled model,
    ``--sampler``, or ``--bias``), its bias ``b^l`` (``f_l`` entries, following the layer's
    output).
    """
    widths = [int(f) for f in widths]
    last, count = len(widths) - 2, dict[int, int]()
    out: list[Param] = []
    for layer, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        declared = kind.weights(a, b, layer, layer == last)
        for w, dims in zip(declared, _follows(kind, a, b, layer, layer == last), strict=True):
            rows, cols, flat = (None if d is None else layer + d for d in dims)
            if rows is not None or cols is not None:
                flat = None
            out.append(Param(tuple(w.shape), layer, rows, cols, flat, w.stream,
                             count.get(w.stream, 0)))
            count[w.stream] = count.get(w.stream, 0) + 1
        if biased:
            out.append(Param((b,), layer, flat=layer + 1))
    return out


def stream_shapes(params: Sequence[Param]) -> dict[int, list[tuple[int, int]]]:
    """The shapes of each Glorot stream's matrices, in its order (the declared weights')."""
    out: dict[int, list[tuple[int, int]]] = {}
    for p in params:
        if p.stream is not None:
            out.setdefault(p.stream, []).append((int(p.shape[0]), int(p.shape[1])))
    return out


def _ids(net: Subnet, dim: int | None, size: int) -> np.ndarray:
    return np.arange(size) if dim is None else net.ids[dim]


def shared(param: Param, widths: Sequence[int]) -> bool:
    """Whether every sub-network keeps all of a replicated ``param`` (then averaged)."""
    hidden = range(1, len(widths) - 1)
    return not any(d in hidden for d in (param.rows, param.cols, param.flat))


def entries(param: Param, net: Subnet) -> tuple[np.ndarray, tuple[int, ...]]:
    """The flat (row-major) entries of a replicated ``param`` that ``net`` keeps, and their shape.

    Its entries at ``net``'s ids of the width they follow (GAT's ``K x f'`` scores: the
    rows of its heads, ``K_m x f'``), or at its ids of the widths its rows and columns
    follow; all of them where they follow no split width.
    """
    shape = param.shape
    if param.flat is not None:
        ids = net.ids[param.flat]
        return ids, (-1, *shape[1:]) if len(shape) > 1 else (len(ids),)
    if len(shape) == 1:
        return np.arange(shape[0]), shape
    r, c = _ids(net, param.rows, shape[0]), _ids(net, param.cols, shape[1])
    return (r[:, None] * shape[1] + c[None, :]).reshape(-1), (len(r), len(c))


@dataclass(frozen=True)
class SubWeights:
    """One sub-network's rows and columns of every row-sharded weight (:func:`cut`).

    Attributes
    ----------
    shapes
        The global weights' shapes.
    row_ids, col_ids
        ``row_ids[i]``, ``col_ids[i]``: the global rows and columns of weight ``i`` it keeps.
    """

    shapes: tuple[tuple[int, ...], ...]
    row_ids: tuple[np.ndarray, ...]
    col_ids: tuple[np.ndarray, ...]

    def rows(self, i: int) -> np.ndarray:
        """Rows of weight ``i`` the sub-network keeps."""
        return self.row_ids[i]

    def cols(self, i: int) -> np.ndarray:
        """Columns of weight ``i`` the sub-network keeps."""
        return self.col_ids[i]

    def sizes(self) -> list[tuple[int, int]]:
        """Shape of each sub-weight."""
        return [(len(r), len(c)) for r, c in zip(self.row_ids, self.col_ids, strict=True)]

    def numel(self) -> int:
        """Entries of all sub-weights."""
        return sum(r * c for r, c in self.sizes())

    def owned_rows(self, i: int, lo: int, hi: int) -> np.ndarray:
        """The rows of weight ``i`` kept by the sub-network that lie in ``[lo, hi)``."""
        rows = self.rows(i)
        return rows[np.searchsorted(rows, lo) : np.searchsorted(rows, hi)]

    def owned_numel(self, offsets: list[np.ndarray], owner: int) -> int:
        """Entries of the sub-weights in the row shards of ``owner`` (``offsets[i]`` per weight)."""
        return sum(
            len(self.owned_rows(i, int(off[owner]), int(off[owner + 1]))) * len(self.cols(i))
            for i, off in enumerate(offsets)
        )


def cut(params: Sequence[Param], net: Subnet) -> SubWeights:
    """``net``'s rows and columns of the row-sharded ``params`` (at its ids of their widths)."""
    mine = [p for p in params if p.sharded]
    return SubWeights(
        tuple(p.shape for p in mine),
        tuple(_ids(net, p.rows, p.shape[0]) for p in mine),
        tuple(_ids(net, p.cols, p.shape[1]) for p in mine),
    )


def reads_split(params: Sequence[Param], widths: Sequence[int]) -> list[bool]:
    """Whether each row-sharded weight's rows follow a hidden width GIST splits."""
    hidden = range(1, len(widths) - 1)
    return [p.rows in hidden for p in params if p.sharded]


def merge(params: Sequence[Param], weights: Sequence[T], vectors: Sequence[T] | None
          ) -> list[T]:
    """The model's order of the row-sharded ``weights`` and the replicated ``vectors``.

    ``vectors`` ``None``: the model has none (``weights`` alone).
    """
    if vectors is None:
        return list(weights)
    w, v = iter(weights), iter(vectors)
    return [next(w) if p.sharded else next(v) for p in params]


def vector_places(params: Sequence[Param]) -> list[int]:
    """How many row-sharded weights precede each replicated parameter in the model's order."""
    out, seen = [], 0
    for p in params:
        if p.sharded:
            seen += 1
        else:
            out.append(seen)
    return out
