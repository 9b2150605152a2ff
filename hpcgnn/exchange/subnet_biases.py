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
averaged, as independent subnetwork training averages shared parameters. With ``M = 1``
the round trip is exact. The bytes are :func:`hpcgnn.cost.gist.bias_bytes`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.layout.subnets import PARAM_KINDS, Subnet

BIAS = "gist_bias"
ATTENTION = "gist_attention"
#: The name of each category's bytes in the metrics' ``gist.per_round`` records.
LABELS = {BIAS: "bias", ATTENTION: "attention"}


class SubnetBiases:
    """Every per-layer vector of the global model and its Adam moments, on every rank.

    Parameters
    ----------
    world
        All ranks.
    shapes
        The vectors' shapes in the model's order (the sampled biases: ``(f_l,)``; GAT:
        ``(K, f')`` twice per layer).
    links
        Vector ``i``'s link of the weight chain
        (:func:`~hpcgnn.layout.subnets.vector_links`): its entries (row-major) are that
        link's output ids, and it follows that link's weights in the model's order.
    dtype
        Entry type.
    category
        Where the all-reduce's bytes are counted.
    initial
        The vectors' values (default zeros, as the sampled biases start); moments start at 0.

    Attributes
    ----------
    links
        ``links[i]``: vector ``i``'s link of the weight chain.
    values
        ``values[k][i]``: kind ``PARAM_KINDS[k]`` of vector ``i``.
    """

    def __init__(
        self, world: Comm, shapes: Sequence[tuple[int, ...]], links: Sequence[int],
        dtype: np.dtype | type, category: str = BIAS,
        initial: Sequence[np.ndarray] | None = None,
    ) -> None:
        if len(links) != len(shapes):
            raise ValueError(f"{len(shapes)} vectors need as many chain links, got {len(links)}")
        self.world, self.links, self.category = world, list(links), category
        self.values = [[np.zeros(s, dtype=dtype) for s in shapes] for _ in PARAM_KINDS]
        if initial is not None:
            for b, v in zip(self.values[0], initial, strict=True):
                b[...] = v

    @property
    def sizes(self) -> list[int]:
        """Entries of each vector."""
        return [b.size for b in self.values[0]]

    def by_link(self, links: int) -> list[np.ndarray | None]:
        """The vector of each of ``links`` chain links (``None``: it has none), at most one each."""
        out: list[np.ndarray | None] = [None] * links
        for link, b in zip(self.links, self.values[0], strict=True):
            if out[link] is not None:
                raise ValueError(f"chain link {link} has several vectors")
            out[link] = b
        return out

    def select(self, net: Subnet) -> list[list[np.ndarray]]:
        """``out[k][i]``: the entries of ``net`` (copies, to train in place), no message.

        ``net`` along the weight chain (vector ``i``'s entries are its ``cols(links[i])``);
        a vector of shape ``(K, f')`` gives the rows of ``net``'s heads, ``(K_m, f')``.
        """
        return [
            [b.reshape(-1)[net.cols(link)].reshape(-1, *b.shape[1:])
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
        averaged over the groups.
        """
        offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        total, last = int(offsets[-1]), len(net.widths) - 2
        buf = np.zeros(len(PARAM_KINDS) * total, dtype=self.values[0][0].dtype)
        if trained is not None:
            for k, kind in enumerate(trained):
                for i, (link, b) in enumerate(zip(self.links, kind, strict=True)):
                    at = k * total + int(offsets[i])
                    flat = b.reshape(-1)
                    buf[at + net.cols(link)] = flat / groups if link == last else flat
        self.world.allreduce(buf, self.category)
        for k, kind in enumerate(self.values):
            for i, b in enumerate(kind):
                at = k * total + int(offsets[i])
                b[...] = buf[at : at + b.size].reshape(b.shape)
