"""GIST's replicated parameters: on every rank whole, averaged where shared.

Some parameters are small and not matrices of a split width: a layer's weights whose rows
follow neither its input nor its output width (GAT's score vectors ``a_src^l, a_dst^l``,
``K x f'``, whose entries, row-major, follow the layer's ``K f'`` outputs), and the sampled
models' biases (``--sampler``, :mod:`hpcgnn.models.minibatch`: ``b^l`` of width ``f_l``,
which the full-batch models lack); :func:`~hpcgnn.layout.subnets.model_params` finds them
from the shapes the layer declares. Every rank holds all of them and their Adam moments
whole, and a sub-network takes its entries without any message: the entries at its ids of
the widths they follow (:func:`~hpcgnn.layout.subnets.entries`; a head's units being whole
in a GAT sub-network, its entries are its heads' rows). After the round, one all-reduce over
all ranks (category ``gist_bias`` for the biases, ``gist_attention`` for a layer's own
replicated weights) brings every group's trained entries to every rank
(:meth:`SubnetBiases.write_back`): entries that follow a split width belong to one
sub-network each; a parameter that follows none (the output layer's: every sub-network
trains it) has its ``M`` trained copies (and moments) averaged, as independent subnetwork
training averages shared parameters. With ``M = 1`` the round trip is exact. Each category
is all-reduced on its own, so its bytes are :func:`hpcgnn.cost.gist.bias_bytes` of its
parameters' sizes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.layout.subnets import PARAM_KINDS, Param, Subnet, entries, shared

BIAS = "gist_bias"
ATTENTION = "gist_attention"
#: The name of each category's bytes in the metrics' ``gist.per_round`` records.
LABELS = {BIAS: "bias", ATTENTION: "attention"}


def category(param: Param) -> str:
    """Where a replicated parameter's all-reduce is counted: a bias's, or a layer weight's."""
    return BIAS if param.bias else ATTENTION


class SubnetBiases:
    """Every replicated parameter of the global model and its Adam moments, on every rank.

    Parameters
    ----------
    world
        All ranks.
    params
        The replicated parameters in the model's order
        (:class:`~hpcgnn.layout.subnets.Param`, not ``sharded``).
    widths
        The global model's widths ``f_0 .. f_L``.
    dtype
        Entry type.
    initial
        The parameters' values (default zeros, as the sampled biases start); moments start
        at 0.

    Attributes
    ----------
    vector_categories
        ``vector_categories[i]``: parameter ``i``'s category (:func:`category`).
    values
        ``values[k][i]``: kind ``PARAM_KINDS[k]`` of parameter ``i``.
    """

    def __init__(
        self, world: Comm, params: Sequence[Param], widths: Sequence[int],
        dtype: np.dtype | type, initial: Sequence[np.ndarray] | None = None,
    ) -> None:
        self.world, self.params = world, list(params)
        self.averaged = [shared(p, widths) for p in self.params]
        self.vector_categories = [category(p) for p in self.params]
        self.values = [[np.zeros(p.shape, dtype=dtype) for p in self.params]
                       for _ in PARAM_KINDS]
        if initial is not None:
            for b, v in zip(self.values[0], initial, strict=True):
                b[...] = v

    @property
    def sizes(self) -> list[int]:
        """Entries of each parameter."""
        return [b.size for b in self.values[0]]

    @property
    def categories(self) -> tuple[str, ...]:
        """The parameters' categories, each once, in the order of their first parameter."""
        return tuple(dict.fromkeys(self.vector_categories))

    def sizes_of(self, category: str) -> list[int]:
        """Entries of each parameter of ``category``."""
        return [n for n, c in zip(self.sizes, self.vector_categories, strict=True)
                if c == category]

    def select(self, net: Subnet) -> list[list[np.ndarray]]:
        """``out[k][i]``: the entries of ``net`` (copies, to train in place), no message.

        :func:`~hpcgnn.layout.subnets.entries`: a ``(K, f')`` score vector gives the rows
        of ``net``'s heads, ``(K_m, f')``.
        """
        picks = [entries(p, net) for p in self.params]
        return [
            [b.reshape(-1)[at].reshape(shape) for b, (at, shape) in zip(kind, picks, strict=True)]
            for kind in self.values
        ]

    def write_back(
        self, groups: int, trained: Sequence[tuple[Subnet, list[list[np.ndarray]]]]
    ) -> None:
        """Every group's trained entries into every rank's parameters (collective).

        ``trained``: ``(net, entries)`` of each sub-network this rank is the root of
        (``entries`` as returned by :meth:`select` for ``net``, after training), empty on
        the other ranks. ``groups``: ``M``. The parameters every sub-network keeps whole
        are averaged over the groups. One all-reduce per category.
        """
        dtype = self.values[0][0].dtype
        for cat in self.categories:
            mine = [i for i, c in enumerate(self.vector_categories) if c == cat]
            offsets = np.cumsum([0, *(self.sizes[i] for i in mine)]).astype(np.int64)
            total = int(offsets[-1])
            buf = np.zeros(len(PARAM_KINDS) * total, dtype=dtype)
            views = [  # views[k][j]: kind k of this category's parameter j, in buf
                [buf[k * total + int(a) : k * total + int(b)] for a, b in
                 zip(offsets[:-1], offsets[1:], strict=True)]
                for k in range(len(PARAM_KINDS))
            ]
            for net, kinds in trained:  # a sub-network's own entries, or its share of a mean
                for kind, into in zip(kinds, views, strict=True):
                    for i, view in zip(mine, into, strict=True):
                        flat = kind[i].reshape(-1)
                        at, _ = entries(self.params[i], net)
                        view[at] += flat / groups if self.averaged[i] else flat
            self.world.allreduce(buf, cat)
            for kind, into in zip(self.values, views, strict=True):
                for i, view in zip(mine, into, strict=True):
                    kind[i][...] = view.reshape(kind[i].shape)
