"""GIST's per-layer vectors: replicated on every rank, averaged where shared.

Two kinds of parameter are vectors of a layer's output width, not matrices of it: the
sampled models' biases (``--sampler``, :mod:`hpcgnn.models.minibatch`: ``b^l`` of width
``f_l``, which the full-batch models lack) and GAT's score vectors (``a_src^l, a_dst^l``,
``K x f'``: flattened, one entry per unit of the layer's ``K f'`` outputs, or ``K' x C``
on the output layer, whose ``K' C`` columns every sub-network keeps). Every rank holds all
of them and their Adam moments whole, and a sub-network takes its entries without any
message: the entries at its layer's output ids, the columns of the vector's link of the
weight chain (:meth:`SubnetBiases.select`; GIN's ``b^l`` follows ``W_2^l``, whose columns
are layer ``l``'s ids; a head's units being whole in a GAT sub-network, its entries are its
heads' rows). After the round, one
all-reduce over all ranks (category ``gist_bias``, or ``gist_attention`` for GAT's) brings
every group's trained entries to every rank (:meth:`SubnetBiases.write_back`): a hidden
layer's entries belong to one sub-network each; the output layer's vectors are the
parameters every sub-network trains, and their ``M`` trained copies (and moments) are
averaged, as independent subnetwork training averages shared parameters: a vector of the
chain's last link is taken whole (the output layer's bias has ``f_L`` entries, its link
``K' f_L`` for GAT). With ``M = 1`` the round trip is exact. A sampled GAT has both kinds,
``a_src^l, a_dst^l, b^l`` per layer (:func:`model_vectors`): each category is all-reduced
on its own, so its bytes are :func:`hpcgnn.cost.gist.bias_bytes` of its vectors' sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.kinds import Layer
from hpcgnn.layout.order import attention_shapes
from hpcgnn.layout.subnets import PARAM_KINDS, Subnet, vector_links

BIAS = "gist_bias"
ATTENTION = "gist_attention"
#: The name of each category's bytes in the metrics' ``gist.per_round`` records.
LABELS = {BIAS: "bias", ATTENTION: "attention"}


@dataclass(frozen=True)
class ModelVectors:
    """A model's replicated vectors in the model's order.

    Attributes
    ----------
    shapes
        Each vector's shape.
    links
        Each vector's link of the weight chain (:func:`~hpcgnn.layout.subnets.vector_links`).
    categories
        Each vector's category: :data:`ATTENTION` (GAT's ``a_src, a_dst``) or :data:`BIAS`.
    """

    shapes: list[tuple[int, ...]]
    links: list[int]
    categories: list[str]


def model_vectors(widths: Sequence[int], kind: Layer, sampled: bool) -> ModelVectors:
    """The vectors GIST replicates for a model of ``widths`` (``f_0 .. f_L``) and ``kind``.

    GAT's score vectors ``a_src^l, a_dst^l`` (``K x f'``, ``K' x C``) and, for a sampled
    model (``--sampler``), the biases ``b^l`` (``f_l``: ``K f'`` on a hidden GAT layer,
    ``C`` on the output layer, added after the heads' mean), each layer's in the model's
    order after its weights: ``W, a_src, a_dst, b`` (GAT), ``W_1, W_2, b`` (GIN).
    """
    layers, widths = len(widths) - 1, [int(f) for f in widths]
    found: list[tuple[int, tuple[int, ...], str]] = []
    if kind.attention:
        scores = attention_shapes(widths, kind)[1]
        found += [(link, s, ATTENTION)
                  for link, s in zip(vector_links(kind, layers, 2), scores, strict=True)]
    if sampled:
        found += [(link, (f,), BIAS)
                  for link, f in zip(vector_links(kind, layers), widths[1:], strict=True)]
    found.sort(key=lambda v: v[0])  # stable: a layer's score vectors, then its bias
    return ModelVectors([s for _, s, _ in found], [lk for lk, _, _ in found],
                        [c for _, _, c in found])


class SubnetBiases:
    """Every per-layer vector of the global model and its Adam moments, on every rank.

    Parameters
    ----------
    world
        All ranks.
    shapes
        The vectors' shapes in the model's order (the sampled biases: ``(f_l,)``; GAT:
        ``(K, f')`` twice per layer; :func:`model_vectors`).
    links
        Vector ``i``'s link of the weight chain
        (:func:`~hpcgnn.layout.subnets.vector_links`): its entries (row-major) are that
        link's output ids, and it follows that link's weights in the model's order.
    dtype
        Entry type.
    category
        Where the all-reduce's bytes are counted: one category for all vectors, or one per
        vector (each category's vectors are all-reduced on their own).
    initial
        The vectors' values (default zeros, as the sampled biases start); moments start at 0.

    Attributes
    ----------
    links
        ``links[i]``: vector ``i``'s link of the weight chain.
    vector_categories
        ``vector_categories[i]``: vector ``i``'s category.
    values
        ``values[k][i]``: kind ``PARAM_KINDS[k]`` of vector ``i``.
    """

    def __init__(
        self, world: Comm, shapes: Sequence[tuple[int, ...]], links: Sequence[int],
        dtype: np.dtype | type, category: str | Sequence[str] = BIAS,
        initial: Sequence[np.ndarray] | None = None,
    ) -> None:
        if len(links) != len(shapes):
            raise ValueError(f"{len(shapes)} vectors need as many chain links, got {len(links)}")
        cats = [category] * len(shapes) if isinstance(category, str) else list(category)
        if len(cats) != len(shapes):
            raise ValueError(f"{len(shapes)} vectors need as many categories, got {len(cats)}")
        self.world, self.links, self.vector_categories = world, list(links), cats
        self.values = [[np.zeros(s, dtype=dtype) for s in shapes] for _ in PARAM_KINDS]
        if initial is not None:
            for b, v in zip(self.values[0], initial, strict=True):
                b[...] = v

    @property
    def sizes(self) -> list[int]:
        """Entries of each vector."""
        return [b.size for b in self.values[0]]

    @property
    def categories(self) -> tuple[str, ...]:
        """The vectors' categories, each once, in the order of their first vector."""
        return tuple(dict.fromkeys(self.vector_categories))

    def sizes_of(self, category: str) -> list[int]:
        """Entries of each vector of ``category``."""
        return [n for n, c in zip(self.sizes, self.vector_categories, strict=True)
                if c == category]

    @staticmethod
    def entries(net: Subnet, link: int, size: int) -> np.ndarray:
        """The entries of a vector of ``size`` on chain link ``link`` that ``net`` takes.

        The link's output ids, or all of a vector of the chain's last link (the output,
        which every sub-network keeps whole: GAT's output bias has ``f_L`` entries, its
        link ``K' f_L`` columns).
        """
        return np.arange(size) if link == len(net.widths) - 2 else net.cols(link)

    def of(self, category: str) -> list[np.ndarray]:
        """The values of the vectors of ``category``, in the model's order."""
        return [b for b, c in zip(self.values[0], self.vector_categories, strict=True)
                if c == category]

    def by_link(self, links: int, category: str | None = None) -> list[np.ndarray | None]:
        """The vector of each of ``links`` chain links (``None``: it has none), at most one each.

        ``category``: only its vectors (``None``: all).
        """
        out: list[np.ndarray | None] = [None] * links
        for link, b, c in zip(self.links, self.values[0], self.vector_categories, strict=True):
            if category is not None and c != category:
                continue
            if out[link] is not None:
                raise ValueError(f"chain link {link} has several vectors")
            out[link] = b
        return out

    def select(self, net: Subnet) -> list[list[np.ndarray]]:
        """``out[k][i]``: the entries of ``net`` (copies, to train in place), no message.

        ``net`` along the weight chain (vector ``i``'s entries are its ``cols(links[i])``,
        :meth:`entries`); a vector of shape ``(K, f')`` gives the rows of ``net``'s heads,
        ``(K_m, f')``.
        """
        return [
            [b.reshape(-1)[self.entries(net, link, b.size)].reshape(-1, *b.shape[1:])
             for link, b in zip(self.links, kind, strict=True)]
            for kind in self.values
        ]

    def write_back(
        self, groups: int, net: Subnet, trained: list[list[np.ndarray]] | None
    ) -> None:
        """Every group's trained entries into every rank's vectors (collective).

        ``trained`` (as returned by :meth:`select` for ``net``, after training) is read on
        one rank per group (its root); the others pass ``None``. ``groups``: ``M``. The
        vectors of the chain's last link (the output, which every sub-network keeps) are
        averaged over the groups. One all-reduce per category.
        """
        last, dtype = len(net.widths) - 2, self.values[0][0].dtype
        for category in self.categories:
            mine = [i for i, c in enumerate(self.vector_categories) if c == category]
            offsets = np.cumsum([0, *(self.sizes[i] for i in mine)]).astype(np.int64)
            total = int(offsets[-1])
            buf = np.zeros(len(PARAM_KINDS) * total, dtype=dtype)
            views = [  # views[k][j]: kind k of this category's vector j, in buf
                [buf[k * total + int(a) : k * total + int(b)] for a, b in
                 zip(offsets[:-1], offsets[1:], strict=True)]
                for k in range(len(PARAM_KINDS))
            ]
            if trained is not None:
                for kind, into in zip(trained, views, strict=True):
                    for i, view in zip(mine, into, strict=True):
                        link, flat = self.links[i], kind[i].reshape(-1)
                        view[self.entries(net, link, view.size)] = (
                            flat / groups if link == last else flat
                        )
            self.world.allreduce(buf, category)
            for kind, into in zip(self.values, views, strict=True):
                for i, view in zip(mine, into, strict=True):
                    kind[i][...] = view.reshape(kind[i].shape)
