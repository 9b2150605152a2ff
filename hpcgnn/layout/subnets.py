"""GIST's sub-networks: random disjoint groups of every hidden dimension (pure).

Each round, every hidden width ``H`` of the global model is split at random into ``M``
disjoint groups; the input features and the output classes are never split. Sub-network
``m`` keeps, of each weight ``W^l`` (``f_{l-1} x f_l``), the rows its group of layer
``l - 1`` selects and the columns its group of layer ``l`` selects. Group ``m`` has
``H // M`` ids, plus one for ``m < H % M``, so a sub-network has the same width in every
hidden layer; its ids are sorted, so rows of ``W^l`` keep their order.

GAT (an attention kind) splits whole heads: the ``H = K f'`` units of a hidden layer are
``K`` blocks of ``f'`` consecutive ids (one head each), and the ``K`` heads are split into
``M`` groups as above (``block=f'`` in :func:`subnets`, :func:`split_block`), so a
sub-network keeps every unit of its heads and none of the others'. The output layer's
``W`` (``f_{L-1} x K' C``, its ``K'`` heads averaged) is kept whole by every sub-network
(:func:`weight_chain`, :func:`chain_subnet`).

The draws come from the counter-based stream of ``(seed, round, layer)``
(:func:`hpcgnn.rng.stream_key`), so every rank computes the same groups without
communication.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from hpcgnn.kinds import Layer
from hpcgnn.rng import TAG_GIST, stream_key

T = TypeVar("T")


def group_sizes(width: int, groups: int) -> list[int]:
    """Sizes of ``groups`` groups of ``width`` ids, differing by at most one."""
    base, extra = divmod(width, groups)
    return [base + (1 if m < extra else 0) for m in range(groups)]


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

    def rows(self, layer: int) -> np.ndarray:
        """Rows of ``W^layer`` (0-based layer) the sub-network keeps."""
        return self.ids[layer]

    def cols(self, layer: int) -> np.ndarray:
        """Columns of ``W^layer`` (0-based layer) the sub-network keeps."""
        return self.ids[layer + 1]

    def sizes(self) -> list[tuple[int, int]]:
        """Shape of each sub-weight."""
        return [(len(self.rows(i)), len(self.cols(i))) for i in range(len(self.widths) - 1)]

    def numel(self) -> int:
        """Entries of all sub-weights."""
        return sum(r * c for r, c in self.sizes())

    def blocks(self, index: int, size: int) -> tuple[int, np.ndarray]:
        """Blocks of ``size`` ids of width ``index``: how many the global model has, and ours.

        GAT's heads (``size = f'``): the global heads of a hidden layer's output and the
        global ids of the sub-network's heads (its units being whole blocks).
        """
        return self.widths[index] // size, self.ids[index][::size] // size

    def owned_rows(self, layer: int, lo: int, hi: int) -> np.ndarray:
        """The rows of ``W^layer`` kept by the sub-network that lie in ``[lo, hi)``."""
        rows = self.rows(layer)
        return rows[np.searchsorted(rows, lo) : np.searchsorted(rows, hi)]

    def owned_numel(self, offsets: list[np.ndarray], owner: int) -> int:
        """Entries of the sub-weights in the row shards of ``owner`` (``offsets[l]`` per weight)."""
        return sum(
            len(self.owned_rows(i, int(off[owner]), int(off[owner + 1]))) * len(self.cols(i))
            for i, off in enumerate(offsets)
        )


def subnet_heads(
    net: Subnet | None, kind: Layer, hidden: int, heads: int
) -> Callable[[int], tuple[int, np.ndarray] | None] | None:
    """A GIST sub-GAT's global heads per layer, its attention dropout keys; else ``None``.

    ``net``: the sub-network (``None``: the whole model); ``hidden``, ``heads``: the
    sub-GAT's. ``heads(layer)`` (:data:`~hpcgnn.kernels.attention.HeadIds`):
    :meth:`Subnet.blocks` of ``f'`` ids of a hidden layer's output; ``None`` on the output
    layer, whose heads are every sub-network's (its own ids).
    """
    if net is None or not kind.attention:
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
    """Hidden ids GIST keeps together: a head's ``f' = hidden / K`` units (GAT), else 1."""
    return hidden // kind.heads if kind.attention else 1


def weight_chain(widths: Sequence[int], kind: Layer) -> tuple[list[int], int]:
    """The widths whose consecutive pairs are the model's weight shapes, and weights per pair.

    GIST shards, splits and exchanges the weights along this chain. GCN: ``widths`` and
    one; GraphSAGE: ``widths`` and two (``W_self``, ``W_neigh``, of one shape); GIN (an MLP
    kind): ``f_0, f_1, f_1, f_2, f_2, .., f_L, f_L`` and one, the pairs ``W_1^l`` (``f_{l-1}
    x f_l``) and ``W_2^l`` (``f_l x f_l``) in the model's order, so both MLP layers split by
    the layer's groups (:func:`chain_subnet`); GAT (an attention kind): ``f_0 .. f_{L-1},
    K' f_L`` and one, the ``W^l`` (the output layer's ``K'`` heads of ``f_L`` classes each);
    its score vectors ``a_src, a_dst`` are not on the chain (GIST replicates them).
    """
    chain = along_chain([int(f) for f in widths], kind)
    if kind.attention:
        return [*chain[:-1], kind.output_heads * chain[-1]], 1
    return chain, 1 if kind.mlp else kind.weights_per_layer


def along_chain(per_width: Sequence[T], kind: Layer) -> list[T]:
    """One value per width ``f_0 .. f_L`` as one per width of :func:`weight_chain`.

    GIN (an MLP kind) repeats each ``f_l`` (``l >= 1``): ``W_1^l`` and ``W_2^l`` both
    write it; other kinds keep the widths as they are.
    """
    if not kind.mlp:
        return list(per_width)
    return [per_width[0], *(v for v in per_width[1:] for _ in range(2))]


def chain_subnet(net: Subnet, kind: Layer) -> Subnet:
    """``net`` along :func:`weight_chain`: GIN's ``W_2^l`` keeps layer ``l``'s group twice.

    GAT: the last width is the output layer's ``K' f_L`` columns, all kept.
    """
    if kind.attention:
        chain, _ = weight_chain(net.widths, kind)
        return Subnet(tuple(chain), (*net.ids[:-1], np.arange(chain[-1])))
    if not kind.mlp:
        return net
    chain, _ = weight_chain(net.widths, kind)
    return Subnet(tuple(chain), tuple(along_chain(net.ids, kind)))


def reads_split(widths: Sequence[int], kind: Layer) -> list[bool]:
    """Whether each weight of :func:`weight_chain` reads a hidden dimension GIST splits.

    Weight ``i`` of the chain reads chain width ``i``: the input features (never split)
    for the first, a hidden width (split across the sub-networks) or, for GIN's last
    ``W_2``, the classes (never split) for the others.
    """
    hidden = [0 < i < len(widths) - 1 for i in range(len(widths))]
    return along_chain(hidden, kind)[:-1]


#: What GIST keeps per weight entry: the weight and Adam's two moments.
PARAM_KINDS = ("weight", "exp_avg", "exp_avg_sq")


@dataclass(frozen=True)
class ParamOrder:
    """The two orders of a GIST model's parameters and the way between them.

    The shards' order (:class:`~hpcgnn.exchange.subnets.SubnetShards`, checkpoints):
    ``shards[k * per_layer + j][l]`` is kind ``k`` of :data:`PARAM_KINDS` of weight ``j``
    of layer ``l`` (GraphSAGE: ``j = 0`` ``W_self``, ``j = 1`` ``W_neigh``). The model's
    order (a model's ``weights``): layer by layer, the layer's weights in turn, then its
    bias when the model has biases (the sampled models'), or GAT's ``a_src, a_dst`` (the
    shards hold its ``W`` alone).

    Attributes
    ----------
    per_layer
        Weights per layer.
    """

    per_layer: int

    def by_weight(self, shards: Sequence[Sequence[T]]) -> list[list[T]]:
        """``out[k]``: kind ``k`` of every weight in the model's order (no biases)."""
        per, layers = self.per_layer, len(shards[0])
        return [
            [shards[k * per + j][i] for i in range(layers) for j in range(per)]
            for k in range(len(PARAM_KINDS))
        ]

    def by_shard(self, by_weight: Sequence[Sequence[T]]) -> list[list[T]]:
        """The inverse of :meth:`by_weight`."""
        per = self.per_layer
        return [list(w[j::per]) for w in by_weight for j in range(per)]

    def with_biases(
        self, weights: Sequence[T], biases: Sequence[T] | None, links: Sequence[int] = ()
    ) -> list[T]:
        """``weights`` (the model's order) with each vector after its chain link's weights.

        ``biases``: the replicated vectors in the model's order (the sampled models' bias
        ``b^l``; GAT's ``a_src^l, a_dst^l``); vector ``i`` follows the weights of chain link
        ``links[i]`` (:func:`vector_links`).
        """
        per, out = self.per_layer, list[T]()
        for i in range(len(weights) // per):
            out += weights[per * i : per * (i + 1)]
            if biases is not None:
                out += self.vectors_after(biases, links, i)
        return out

    @staticmethod
    def vectors_after(biases: Sequence[T], links: Sequence[int], link: int) -> list[T]:
        """The vectors that follow chain link ``link``'s weights (``links[i]``: vector ``i``'s)."""
        return [b for b, at in zip(biases, links, strict=True) if at == link]


def vector_links(kind: Layer, layers: int, per_layer: int = 1) -> list[int]:
    """The link of :func:`weight_chain` each of ``per_layer`` vectors per layer belongs to.

    A layer's vectors (the sampled models' bias ``b^l``; GAT's ``a_src^l, a_dst^l``) read
    the layer's output ids, the columns of its last weight on the chain and follow it in
    the model's order: link ``l`` for most kinds, GIN's ``W_2^l`` (link ``2 l + 1``).
    """
    step = 2 if kind.mlp else 1
    return [step * (layer + 1) - 1 for layer in range(layers) for _ in range(per_layer)]
