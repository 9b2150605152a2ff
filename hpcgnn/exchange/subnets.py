"""GIST's global model, row-sharded over all ranks, and the only traffic it has: sub-models.

The global weights ``W^l`` and their Adam moments are never held whole by any rank: rank
``r`` owns rows ``offsets[l][r] .. offsets[l][r + 1]`` of each (an even split). Each
round, :meth:`SubnetShards.scatter` sends every sub-network's rows/columns from their
owners to the root of the rank group that trains it (one all-to-all-v, category
``gist_scatter``), which broadcasts them in its group (same category);
:meth:`SubnetShards.pack_trained` and :meth:`SubnetShards.write_back` send the trained
sub-weights and moments from the roots back to the owners (``gist_gather``), who write them
into place. Groups are disjoint, so no
entry is written twice. Every size is known on both sides beforehand: no counts travel.

The bytes of both are modelled by :func:`hpcgnn.cost.gist.round_bytes`. Outside the
training steps, the model is evaluated over its shards (``gist_eval``,
:class:`hpcgnn.models.sharded.ShardedForward`) and fingerprinted by streaming the shards
through rank 0's hash one piece at a time (``gist_digest``, :meth:`SubnetShards.digest`);
checkpoints write each rank's rows where they are (:mod:`hpcgnn.training.checkpoint`).

The shards and the round buffers are host NumPy arrays on every device, on purpose: the
global model and its moments stay off the accelerator, which holds the sub-model being
trained (:mod:`hpcgnn.training.gist` moves it there and back once per round through the
device); the exchange runs once per round and its buffers reach MPI as host buffers
(``docs/gist.md``, "Where the global model lives").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.layout.blocks import even_offsets
from hpcgnn.layout.subnets import SubWeights

SCATTER = "gist_scatter"
GATHER = "gist_gather"
EVAL = "gist_eval"
DIGEST = "gist_digest"
#: Entries of the largest piece :meth:`SubnetShards.digest` sends to rank 0 (16 MiB float32).
DIGEST_CHUNK = 1 << 22


class SubnetShards:
    """This rank's rows of the global weights and moments, and the sub-model exchange.

    Parameters
    ----------
    world
        All ranks.
    shapes
        The global shapes of the row-sharded weights, in the model's order
        (:class:`~hpcgnn.layout.subnets.Param`: every declared weight whose rows follow a
        width; a layer's replicated parameters, GAT's score vectors, are
        :class:`~hpcgnn.exchange.subnet_biases.SubnetBiases`).
    shards
        ``shards[k][i]``: this rank's rows of kind ``k`` of weight ``i``, i.e. rows
        ``offsets[i][rank] ..`` (see :meth:`offsets_of`). The kinds are ``PARAM_KINDS``:
        the weights, then Adam's two moments.
    """

    def __init__(
        self, world: Comm, shapes: Sequence[tuple[int, ...]], shards: list[list[np.ndarray]]
    ) -> None:
        self.world = world
        self.shapes = [tuple(int(n) for n in s) for s in shapes]
        self.offsets = self.offsets_of(self.shapes, world.size)
        self.shards = shards

    def weight_shards(self) -> list[tuple[int, np.ndarray]]:
        """``(weight, rows)`` of this rank's weights in the model's order (no moments)."""
        return list(enumerate(self.shards[0]))

    @staticmethod
    def offsets_of(shapes: Sequence[tuple[int, ...]], ranks: int) -> list[np.ndarray]:
        """Row offsets of every weight's shards over ``ranks`` ranks (an even split)."""
        return [even_offsets(int(s[0]), ranks) for s in shapes]

    def _range(self, layer: int, rank: int) -> tuple[int, int]:
        off = self.offsets[layer]
        return int(off[rank]), int(off[rank + 1])

    def _pieces(self, net: SubWeights, owner: int) -> list[tuple[int, np.ndarray]]:
        """``(layer, rows)`` of ``net`` that ``owner`` holds, layer by layer."""
        return [
            (i, net.owned_rows(i, *self._range(i, owner))) for i in range(len(self.shapes))
        ]

    def _my_blocks(
        self, nets: list[SubWeights]
    ) -> Iterator[tuple[np.ndarray, tuple[np.ndarray, ...], slice, tuple[int, int]]]:
        """The blocks of this rank's shards that ``nets`` select, in exchange-buffer order.

        Sub-network by sub-network, layer by layer, kind by kind: ``(shard, index, span,
        shape)`` with ``shard[index]`` the block and ``span`` its place in the flat buffer
        the owner sends (:meth:`scatter`) and receives back (:meth:`write_back`).
        """
        me, pos = self.world.rank, 0
        for net in nets:
            for i, rows in self._pieces(net, me):
                cols = net.cols(i)
                index = np.ix_(rows - self._range(i, me)[0], cols)
                n = len(rows) * len(cols)
                for kind in self.shards:
                    yield kind[i], index, slice(pos, pos + n), (len(rows), len(cols))
                    pos += n

    def _count(self, net: SubWeights, owner: int) -> int:
        return len(self.shards) * net.owned_numel(self.offsets, owner)

    def _rooted(self, roots: Sequence[int]) -> list[int]:
        """The sub-networks whose group this rank is the root of, in order."""
        return [m for m, root in enumerate(roots) if root == self.world.rank]

    def scatter(
        self, nets: list[SubWeights], roots: list[int], group: Comm, mine: Sequence[int]
    ) -> list[list[list[np.ndarray]]]:
        """Send every sub-model from the owners to its group; return this rank's.

        Parameters
        ----------
        nets
            This round's sub-networks.
        roots
            World rank of the root of each sub-network's group (non-decreasing; a rank that
            hosts several sub-networks is the root of each,
            :class:`~hpcgnn.layout.subnets.Placement`).
        group
            This rank's group (its root has group rank 0).
        mine
            The sub-networks this rank's group trains (several only in a group of one rank).

        Returns
        -------
        list of list of list of numpy.ndarray
            ``out[j][k][l]``: kind ``PARAM_KINDS[k]`` of sub-weight ``l`` of sub-network
            ``mine[j]`` (on every rank of the group).
        """
        me, size = self.world.rank, self.world.size
        assert list(roots) == sorted(roots), "groups are ordered by rank"
        dtype = self.shards[0][0].dtype
        counts = np.zeros(size, dtype=np.int64)
        for m, root in enumerate(roots):
            counts[root] += self._count(nets[m], me)
        # the pieces go straight into the send buffer (no list of copies to concatenate)
        flat = np.empty(int(counts.sum()), dtype=dtype)
        for shard, index, span, _ in self._my_blocks(nets[: len(roots)]):
            flat[span] = shard[index].reshape(-1)
        rooted = self._rooted(roots)
        recv_counts = np.array(
            [sum(self._count(nets[m], r) for m in rooted) for r in range(size)], dtype=np.int64
        )
        got, _ = self.world.alltoallv(flat, counts, SCATTER, recvcounts=recv_counts)
        del flat
        kinds = len(self.shards)
        packed, starts = {}, {}
        for m in mine:
            packed[m] = np.empty(kinds * nets[m].numel(), dtype=dtype)
            # packed: kind by kind, layer by layer, each sub-weight's rows in order
            starts[m] = np.cumsum([0] + [r * c for _ in range(kinds) for r, c in nets[m].sizes()])
        # an owner's pieces, in rank order, are each sub-weight's rows in order
        filled = {m: [0] * len(starts[m]) for m in rooted}
        pos = 0
        for owner in range(size):
            for m in rooted:
                layers = len(nets[m].sizes())
                for i, rows in self._pieces(nets[m], owner):
                    n = len(rows) * len(nets[m].cols(i))
                    for k in range(kinds):
                        j = k * layers + i
                        at = int(starts[m][j]) + filled[m][j]
                        packed[m][at : at + n] = got[pos : pos + n]
                        filled[m][j] += n
                        pos += n
        del got
        out: list[list[list[np.ndarray]]] = []
        for m in mine:
            group.bcast(packed[m], 0, SCATTER)
            sizes = nets[m].sizes()
            out.append([
                [packed[m][int(starts[m][k * len(sizes) + i]):][: r * c].reshape(r, c)
                 for i, (r, c) in enumerate(sizes)]
                for k in range(kinds)
            ])
        return out

    def pack_trained(
        self, nets: list[SubWeights], trained: Sequence[tuple[int, list[list[np.ndarray]]]]
    ) -> np.ndarray:
        """The send buffer of :meth:`write_back`: a root's sub-models, owner by owner (local).

        Empty on ranks that are not roots (``trained`` is empty there).
        """
        size = self.world.size
        dtype = self.shards[0][0].dtype
        total = sum(self._count(nets[m], owner) for owner in range(size) for m, _ in trained)
        flat = np.empty(total, dtype=dtype)
        pos = 0
        for owner in range(size):
            for m, model in trained:
                net = nets[m]
                for i, rows in self._pieces(net, owner):
                    at = np.searchsorted(net.rows(i), rows)
                    width = len(net.cols(i))
                    n = len(rows) * width
                    for k in range(len(self.shards)):
                        out_block = flat[pos : pos + n].reshape(len(rows), width)
                        np.take(model[k][i], at, axis=0, out=out_block)
                        pos += n
        return flat

    def write_back(self, nets: list[SubWeights], roots: list[int], flat: np.ndarray) -> None:
        """Send the packed sub-models from the roots to the owners, who write them (collective)."""
        me, size = self.world.rank, self.world.size
        rooted = self._rooted(roots)
        counts = np.array(
            [sum(self._count(nets[m], owner) for m in rooted) for owner in range(size)],
            dtype=np.int64,
        )
        by_rank = np.zeros(size, dtype=np.int64)
        np.add.at(by_rank, list(roots), [self._count(nets[m], me) for m in range(len(roots))])
        got, _ = self.world.alltoallv(flat, counts, GATHER, recvcounts=by_rank)
        del flat
        for shard, index, span, shape in self._my_blocks(nets[: len(roots)]):
            shard[index] = got[span].reshape(shape)

    def full_weights(self) -> list[np.ndarray]:
        """Every weight, whole, on every rank (category ``gist_eval``).

        Tests and small models only: a run never assembles the model (it is evaluated
        over the shards, :class:`hpcgnn.models.sharded.ShardedForward`, and fingerprinted
        by :meth:`digest`).
        """
        return [self.world.allgatherv(w, EVAL) for _, w in self.weight_shards()]

    def digest(
        self, chunk_entries: int = DIGEST_CHUNK, biases: Sequence[np.ndarray] | None = None,
        places: Sequence[int] = (),
    ) -> str:
        """SHA-256 of the weights as :func:`hpcgnn.training.loop.params_sha256` computes it.

        The hash runs over the weights in the model's order (GraphSAGE: ``W_self^1,
        W_neigh^1, ..``) as float32, row-major: each weight's shards in
        rank order, which rank 0 receives one piece of at most ``chunk_entries`` entries
        (whole rows) at a time and feeds to the hash, so no rank ever holds the model.
        ``biases`` (replicated: the sampled models' ``b^l``, GAT's ``a_src^l, a_dst^l``)
        come after the first ``places[i]`` weights, as
        :func:`~hpcgnn.layout.subnets.merge` puts them.
        Collective; the pieces are category ``gist_digest``; every rank returns the digest.
        """
        me, size = self.world.rank, self.world.size
        h = hashlib.sha256() if me == 0 else None
        vectors = list(zip(places, biases or (), strict=True))

        def hash_vectors(before: int) -> None:
            for place, vec in vectors:
                if h is not None and place == before:
                    h.update(np.ascontiguousarray(vec, dtype=np.float32))  # type: ignore[arg-type]

        for i, w in self.weight_shards():
            hash_vectors(i)
            cols = self.shapes[i][1]
            step = max(1, chunk_entries // max(1, cols))
            for owner in range(size):
                lo, hi = self._range(i, owner)
                for a in range(lo, hi, step):
                    b = min(hi, a + step)
                    n = (b - a) * cols
                    if owner == 0:  # rank 0's own rows need no message
                        piece = w[a - lo : b - lo] if me == 0 else None
                    else:
                        counts = np.zeros(size, dtype=np.int64)
                        recv = np.zeros(size, dtype=np.int64)
                        if me == owner:
                            counts[0] = n
                            send = np.ascontiguousarray(w[a - lo : b - lo]).reshape(-1)
                        else:
                            send = np.zeros(0, dtype=w.dtype)
                        if me == 0:
                            recv[owner] = n
                        piece, _ = self.world.alltoallv(send, counts, DIGEST, recvcounts=recv)
                    if h is not None:
                        # numpy's stubs give ndarray ``__buffer__`` on Python >= 3.12 only
                        h.update(np.ascontiguousarray(piece, dtype=np.float32))  # type: ignore[arg-type]
        hash_vectors(len(self.shapes))
        return str(self.world.bcast_obj(h.hexdigest() if h is not None else None, 0, DIGEST))
