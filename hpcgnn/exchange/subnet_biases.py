"""The biases of GIST's sampled models: replicated on every rank, averaged where shared.

The sampled models of ``--sampler`` (:mod:`hpcgnn.models.minibatch`) have a bias per
layer, ``b^l`` of width ``f_l``, which the full-batch models lack. A bias is a vector of
the model's width, not a matrix of it, so every rank holds all of them and their Adam
moments whole, and a sub-network takes its entries without any message: ``b^l[ids_l]``
(:meth:`SubnetBiases.select`). After the round, one all-reduce over all ranks (category
``gist_bias``) brings every group's trained entries to every rank
(:meth:`SubnetBiases.write_back`): a hidden layer's entries belong to one sub-network
each; the output layer's bias is the one parameter every sub-network trains, and its
``M`` trained copies (and moments) are averaged, as independent subnetwork training
averages shared parameters. With ``M = 1`` the round trip is exact. The bytes are
:func:`hpcgnn.cost.gist.bias_bytes`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.layout.subnets import PARAM_KINDS, Subnet

BIAS = "gist_bias"


class SubnetBiases:
    """Every bias of the global model and its Adam moments, on every rank.

    Parameters
    ----------
    world
        All ranks.
    widths
        Global widths ``f_0 .. f_L``.
    dtype
        Entry type.

    Attributes
    ----------
    values
        ``values[k][l]``: kind ``PARAM_KINDS[k]`` of the bias of layer ``l + 1`` (zeros at first,
        as :func:`hpcgnn.models.minibatch.sampled_weights` initialises them).
    """

    def __init__(self, world: Comm, widths: Sequence[int], dtype: np.dtype | type) -> None:
        self.world = world
        self.widths = [int(f) for f in widths[1:]]
        self.values = [[np.zeros(f, dtype=dtype) for f in self.widths] for _ in PARAM_KINDS]

    def select(self, net: Subnet) -> list[list[np.ndarray]]:
        """``out[k][l]``: the entries of ``net`` (copies, to train in place), no message."""
        return [[b[net.cols(i)] for i, b in enumerate(kind)] for kind in self.values]

    def write_back(
        self, groups: int, net: Subnet, trained: list[list[np.ndarray]] | None
    ) -> None:
        """Every group's trained entries into every rank's biases (collective, ``gist_bias``).

        ``trained`` (as returned by :meth:`select` for ``net``, after training) is read on
        one rank per group (its root); the others pass ``None``. ``groups``: ``M``.
        """
        offsets = np.concatenate([[0], np.cumsum(self.widths)]).astype(np.int64)
        total, last = int(offsets[-1]), len(self.widths) - 1
        buf = np.zeros(len(PARAM_KINDS) * total, dtype=self.values[0][0].dtype)
        if trained is not None:
            for k, kind in enumerate(trained):
                for i, b in enumerate(kind):
                    at = k * total + int(offsets[i])
                    buf[at + net.cols(i)] = b / groups if i == last else b
        self.world.allreduce(buf, BIAS)
        for k, kind in enumerate(self.values):
            for i, b in enumerate(kind):
                at = k * total + int(offsets[i])
                b[:] = buf[at : at + len(b)]
