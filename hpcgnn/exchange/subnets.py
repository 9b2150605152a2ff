"""GIST's global model, row-sharded over all ranks, and the only traffic it has: sub-models.

The global weights ``W^l`` and their Adam moments are never held whole by any rank: rank
``r`` owns rows ``offsets[l][r] .. offsets[l][r + 1]`` of each (an even split). Each
round, :meth:`SubnetShards.scatter` sends every sub-network's rows/columns from their
owners to the root of the rank group that trains it (one all-to-all-v, category
``gist_scatter``), which broadcasts them in its group (same category);
:meth:`SubnetShards.gather` sends the trained sub-weights and moments from the roots back
to the owners (``gist_gather``), who write them into place. Groups are disjoint, so no
entry is written twice. Every size is known on both sides beforehand: no counts travel.

The bytes of both are modelled by :func:`hpcgnn.cost.gist.round_bytes`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.cost.gist import KINDS
from hpcgnn.layout.blocks import even_offsets
from hpcgnn.layout.subnets import Subnet

SCATTER = "gist_scatter"
GATHER = "gist_gather"
EVAL = "gist_eval"


class SubnetShards:
    """This rank's rows of the global weights and moments, and the sub-model exchange.

    Parameters
    ----------
    world
        All ranks.
    widths
        Global widths ``f_0 .. f_L``.
    shards
        ``shards[k][l]``: this rank's rows of kind ``KINDS[k]`` of ``W^{l+1}``, i.e. rows
        ``offsets[l][rank] ..`` (see :meth:`offsets_of`).
    """

    def __init__(
        self, world: Comm, widths: Sequence[int], shards: list[list[np.ndarray]]
    ) -> None:
        self.world = world
        self.widths = tuple(widths)
        self.offsets = self.offsets_of(widths, world.size)
        self.shards = shards

    @staticmethod
    def offsets_of(widths: Sequence[int], ranks: int) -> list[np.ndarray]:
        """Row offsets of every weight's shards over ``ranks`` ranks."""
        return [even_offsets(f, ranks) for f in widths[:-1]]

    def _range(self, layer: int, rank: int) -> tuple[int, int]:
        off = self.offsets[layer]
        return int(off[rank]), int(off[rank + 1])

    def _pieces(self, net: Subnet, owner: int) -> list[tuple[int, np.ndarray]]:
        """``(layer, rows)`` of ``net`` that ``owner`` holds, layer by layer."""
        return [
            (i, net.owned_rows(i, *self._range(i, owner))) for i in range(len(self.widths) - 1)
        ]

    def _count(self, net: Subnet, owner: int) -> int:
        return len(KINDS) * net.owned_numel(self.offsets, owner)

    def scatter(
        self, nets: list[Subnet], roots: list[int], group: Comm, mine: int
    ) -> list[list[np.ndarray]]:
        """Send every sub-model from the owners to its group; return this rank's.

        Parameters
        ----------
        nets
            This round's sub-networks.
        roots
            World rank of the root of each sub-network's group.
        group
            This rank's group (its root has group rank 0).
        mine
            Index of the sub-network this rank's group trains.

        Returns
        -------
        list of list of numpy.ndarray
            ``out[k][l]``: kind ``KINDS[k]`` of sub-weight ``l`` (on every rank of the group).
        """
        me, size = self.world.rank, self.world.size
        assert list(roots) == sorted(roots), "groups are ordered by rank"
        dtype = self.shards[0][0].dtype
        send, counts = [], np.zeros(size, dtype=np.int64)
        for m, root in enumerate(roots):
            for i, rows in self._pieces(nets[m], me):
                local = rows - self._range(i, me)[0]
                cols = nets[m].cols(i)
                for kind in self.shards:
                    send.append(kind[i][np.ix_(local, cols)].reshape(-1))
            counts[root] += self._count(nets[m], me)
        recv_counts = np.zeros(size, dtype=np.int64)
        if me in roots:
            net = nets[roots.index(me)]
            recv_counts[:] = [self._count(net, r) for r in range(size)]
        flat = np.concatenate(send) if send else np.zeros(0, dtype=dtype)
        got, _ = self.world.alltoallv(flat, counts, SCATTER, recvcounts=recv_counts)
        net = nets[mine]
        sizes = net.sizes()
        packed = np.empty(len(KINDS) * net.numel(), dtype=dtype)
        if group.rank == 0:  # owners' pieces, in rank order, are each sub-weight's rows in order
            parts: list[list[list[np.ndarray]]] = [[[] for _ in sizes] for _ in KINDS]
            pos = 0
            for owner in range(size):
                for i, rows in self._pieces(net, owner):
                    n = len(rows) * sizes[i][1]
                    for k in range(len(KINDS)):
                        parts[k][i].append(got[pos : pos + n])
                        pos += n
            packed[:] = np.concatenate([p for kind in parts for layer in kind for p in layer])
        group.bcast(packed, 0, SCATTER)
        out, pos = [], 0
        for _ in KINDS:
            out.append([])
            for s in sizes:
                out[-1].append(packed[pos : pos + s[0] * s[1]].reshape(s))
                pos += s[0] * s[1]
        return out

    def gather(
        self, nets: list[Subnet], roots: list[int], trained: list[list[np.ndarray]] | None
    ) -> None:
        """Write the trained sub-models back into the owners' shards (collective).

        ``trained`` (as returned by :meth:`scatter`, after training) is read on the roots
        only; other ranks pass ``None``.
        """
        me, size = self.world.rank, self.world.size
        dtype = self.shards[0][0].dtype
        send, counts = [], np.zeros(size, dtype=np.int64)
        if me in roots:
            assert trained is not None
            net = nets[roots.index(me)]
            for owner in range(size):
                for i, rows in self._pieces(net, owner):
                    at = np.searchsorted(net.rows(i), rows)
                    for k in range(len(KINDS)):
                        send.append(trained[k][i][at].reshape(-1))
                counts[owner] = self._count(net, owner)
        recv_counts = np.array([self._count(nets[m], me) for m in range(len(roots))])
        by_rank = np.zeros(size, dtype=np.int64)
        by_rank[roots] = recv_counts
        flat = np.concatenate(send) if send else np.zeros(0, dtype=dtype)
        got, _ = self.world.alltoallv(flat, counts, GATHER, recvcounts=by_rank)
        pos = 0
        for m in range(len(roots)):
            for i, rows in self._pieces(nets[m], me):
                local = rows - self._range(i, me)[0]
                cols = nets[m].cols(i)
                n = len(rows) * len(cols)
                for kind in self.shards:
                    kind[i][np.ix_(local, cols)] = got[pos : pos + n].reshape(len(rows), len(cols))
                    pos += n

    def full_weights(self) -> list[np.ndarray]:
        """Every weight, whole, on every rank (evaluation only: category ``gist_eval``)."""
        return [self.world.allgatherv(w, EVAL) for w in self.shards[0]]
