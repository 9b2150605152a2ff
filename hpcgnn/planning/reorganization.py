r"""HongTu's reorganisation (Algorithm 4) on vertex-range shards of the chunk neighbour sets.

The greedy of Algorithm 4 asks only how many vertices two sets share: in phase 1, for
part ``i``, the overlaps ``|N^U_j & N_ik|`` of every batch's transition set so far with
every chunk of the part; in phase 2, the overlaps ``|N_b & N_c|`` of the finished
batches. An overlap is a sum over vertices, so it splits over any partition of the
vertex ids. A :class:`MembershipShard` holds, for the vertices of one id range, the
chunks that contain them (one ``(vertex, part, chunk)`` triple per element of some
``N_ik``) and adds up its share of an ``n x n`` overlap matrix; the sum over shards (an
all-reduce) is the matrix of the whole graph. The greedy choice given the summed matrix
(:func:`assign_chunks`, :func:`order_batches`) is the same on every shard, so every rank
takes it itself and all end with the same schedule, equal to the serial one (one shard).

Cost of :func:`reorganize_sharded` with ``m`` parts (ranks), ``n`` chunks per part and
``E_r`` triples on rank ``r`` (``sum_r E_r = V_ori``; shards by the parts' row ranges give
``E_r ~ V_ori / m`` for balanced parts):

memory
    ``O(E_r + n^2)`` per rank: the triples (8 bytes each: vertex and chunk as int32,
    grouped by part), a few int32 temporaries of at most ``E_r`` per step,
    the batch membership so far as a sparse ``n x u_r`` matrix (``u_r`` the vertices of
    the range, ``u_r <= E_r`` since every vertex is in its own chunk's set through its
    self loop) and the ``n x n`` overlaps. No rank holds another rank's chunk sets, a
    dense ``n x |V|`` matrix or anything of size ``|V|``.
communication
    one all-to-allv of the membership keys, 8 bytes per triple (rank ``i`` sends
    ``sum_k |N_ik|`` keys, less the ones of vertices it owns), then one all-reduce of
    ``8 n^2`` bytes per greedy step of phase 1 (``m - 1`` steps, one per part after the
    first) and one of ``16 n^2 + 8`` bytes (phase 2 and the volumes before and after):
    ``m`` all-reduces in sequence, since each part's choice depends on the ones before.
time
    ``O(m E_r)`` per rank for the sparse products (each step rebuilds the membership of
    the parts assigned so far from the triples) plus ``O(m n^2)`` for the greedy.

The serial :func:`choose_schedule` is the same code on one shard with no reduction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hpcgnn.planning.dedup import DedupVolumes, identity_schedule

#: Sums an int64 array over all shards (in place or not) and returns the sum.
Reduce = Callable[[np.ndarray], np.ndarray]


@dataclass
class Reorganization:
    """Volumes before and after HongTu's reorganisation, and whether it was kept.

    ``c_before``, ``c_after``: the modelled cost ``C`` of the two schedules (HongTu eq. 4
    at the run's dedup level and tier bandwidths, in seconds per byte of a vertex row);
    the reorganised schedule is kept when it does not raise ``C``.
    """

    before: DedupVolumes
    after: DedupVolumes
    accepted: bool
    c_before: float = 0.0
    c_after: float = 0.0

    def as_dict(self) -> dict:
        """JSON form."""
        return {
            "before": self.before.as_dict(), "after": self.after.as_dict(),
            "accepted": self.accepted,
            "C_s_per_vertex_byte": {"before": self.c_before, "after": self.c_after},
        }


def membership_keys(sets: Sequence[np.ndarray]) -> np.ndarray:
    """Sorted keys ``v n + k`` of one part's ``n`` chunk neighbour sets ``sets[k]``.

    Sorted by vertex: the keys of the vertex ids ``[lo, hi)`` are those in
    ``[lo n, hi n)``, one contiguous slice (the owner of a key is the owner of
    ``key // n``).
    """
    n = len(sets)
    if not n:
        return np.zeros(0, dtype=np.int64)
    keys = np.concatenate([np.asarray(s, dtype=np.int64) * n + k for k, s in enumerate(sets)])
    keys.sort()
    return keys


def _index_dtype(limit: int) -> type:
    return np.int32 if limit < 2**31 else np.int64


@dataclass(frozen=True)
class MembershipShard:
    """Which chunks contain the vertices of one range of vertex ids.

    Attributes
    ----------
    vertex
        Id of the vertex of every triple, relative to the range's first vertex.
    chunk
        The chunk of the triple's set ``N_{part, chunk}``.
    ptr
        The triples of part ``i`` are ``ptr[i] : ptr[i+1]`` (``m + 1`` offsets).
    vertices
        Size ``u`` of the vertex range.
    chunks
        ``n``.
    """

    vertex: np.ndarray
    chunk: np.ndarray
    ptr: np.ndarray
    vertices: int
    chunks: int

    @classmethod
    def from_keys(
        cls, keys: np.ndarray, counts: Sequence[int] | np.ndarray, chunks: int,
        first: int = 0, vertices: int | None = None,
    ) -> MembershipShard:
        """The shard of the :func:`membership_keys` of parts ``0 .. m-1``.

        ``keys`` holds ``counts[0]`` keys of part 0, then ``counts[1]`` of part 1, ...
        (the layout an all-to-allv from every rank delivers), of vertices in
        ``[first, first + vertices)`` (default: up to the largest vertex).
        """
        keys = np.asarray(keys, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        if int(counts.sum()) != len(keys):
            raise ValueError(f"{len(keys)} keys but counts sum to {int(counts.sum())}")
        rel = keys // chunks - first
        if vertices is None:
            vertices = int(rel.max()) + 1 if len(rel) else 0
        if len(rel) and (int(rel.min()) < 0 or int(rel.max()) >= vertices):
            raise ValueError(f"a key's vertex is outside [{first}, {first + vertices})")
        vertex: np.ndarray = rel.astype(_index_dtype(vertices))
        del rel
        chunk: np.ndarray = (keys % chunks).astype(_index_dtype(chunks))
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return cls(vertex, chunk, ptr, vertices, chunks)

    @classmethod
    def from_sets(cls, sets: Sequence[Sequence[np.ndarray]]) -> MembershipShard:
        """The one shard of all vertices: ``sets[i][k]`` is ``N_ik``."""
        keys = [membership_keys(part) for part in sets]
        return cls.from_keys(np.concatenate(keys), [len(k) for k in keys], len(sets[0]))

    @property
    def parts(self) -> int:
        """``m``."""
        return len(self.ptr) - 1

    @property
    def triples(self) -> int:
        """Number of triples (this shard's share of ``V_ori``)."""
        return len(self.vertex)

    def _batches(self, schedule: np.ndarray, parts: int) -> sp.csr_matrix:
        """``n x u`` 0/1: vertex in batch ``j`` of ``schedule``'s rows ``0 .. parts-1``."""
        end = int(self.ptr[parts])
        batch_of = np.argsort(schedule, axis=1).astype(self.chunk.dtype)  # [i, k]: k's batch
        rows = np.empty(end, dtype=self.chunk.dtype)
        for i in range(parts):
            lo, hi = int(self.ptr[i]), int(self.ptr[i + 1])
            rows[lo:hi] = batch_of[i][self.chunk[lo:hi]]
        member = sp.csr_matrix(
            (np.ones(end, dtype=np.int32), (rows, self.vertex[:end])),
            shape=(self.chunks, self.vertices),
        )
        member.data[:] = 1  # a vertex in two chunks of one batch counts once
        return member

    def chunk_overlaps(self, schedule: np.ndarray, part: int) -> np.ndarray:
        """Phase 1 scores of ``part`` on this shard: ``|N^U_j & N_{part,k}|`` at ``[j, k]``.

        ``N^U_j`` is the union of the chunks ``schedule[i, j]`` of parts ``i < part``
        (rows ``part ..`` of ``schedule`` are not read).
        """
        member = self._batches(schedule, part)
        lo, hi = int(self.ptr[part]), int(self.ptr[part + 1])
        own = sp.csr_matrix(
            (np.ones(hi - lo, dtype=np.int32), (self.chunk[lo:hi], self.vertex[lo:hi])),
            shape=(self.chunks, self.vertices),
        )
        return np.asarray((member @ own.T).toarray(), dtype=np.int64)

    def batch_overlaps(self, schedule: np.ndarray) -> np.ndarray:
        """Phase 2 scores on this shard: ``|N_b & N_c|`` at ``[b, c]`` (``N_b``: batch ``b``)."""
        member = self._batches(schedule, self.parts)
        return np.asarray((member @ member.T).toarray(), dtype=np.int64)


def assign_chunks(overlaps: np.ndarray) -> np.ndarray:
    """Phase 1 for one part: batch ``j`` in turn takes the free chunk ``k`` of most overlap.

    ``overlaps[j, k]`` is ``|N^U_j & N_ik|`` (a batch's set does not change while the
    part's other batches choose). Ties go to the lowest chunk. Returns the part's
    schedule row.
    """
    n = overlaps.shape[0]
    free = list(range(n))
    row = np.empty(n, dtype=np.int64)
    for j in range(n):
        row[j] = free.pop(int(np.argmax(overlaps[j, free])))
    return row


def order_batches(overlaps: np.ndarray) -> list[int]:
    """Phase 2: from batch 0, append the remaining batch sharing most with the last one.

    ``overlaps[b, c]`` is ``|N_b & N_c|``. Ties go to the lowest batch.
    """
    order = [0]
    rest = list(range(1, overlaps.shape[0]))
    while rest:
        order.append(rest.pop(int(np.argmax(overlaps[order[-1], rest]))))
    return order


def volumes_of(overlaps: np.ndarray, order: Sequence[int], v_ori: int) -> DedupVolumes:
    r"""``V_ori``, ``V_p2p`` and ``V_ru`` of running the batches in ``order``.

    ``V_p2p = sum_j |N_j|`` is the diagonal of ``overlaps``; ``V_ru`` subtracts from it
    what each batch shares with the one before, ``|N_j \ N_{j-1}| = |N_j| - |N_j & N_{j-1}|``.
    """
    o = np.asarray(order, dtype=np.int64)
    v_p2p = int(overlaps[o, o].sum())
    v_ru = v_p2p - int(overlaps[o[1:], o[:-1]].sum())
    return DedupVolumes(int(v_ori), v_p2p, v_ru)


def reorganize_sharded(
    shard: MembershipShard, reduce: Reduce, gbps: dict[str, float] | None = None,
    dedup: str = "full",
) -> tuple[np.ndarray, Reorganization]:
    """HongTu Algorithm 4 on ``shard``, its scores summed over all shards by ``reduce``.

    Every shard (rank) calls this with the same ``reduce`` (an all-reduce sum), in
    step; all return the same ``(schedule, reorganization)``: the reorganised schedule
    when it does not raise the modelled cost ``C`` (:meth:`DedupVolumes.cost` at
    ``dedup`` and the tier bandwidths ``gbps``), else the identity. (Fewer loads from
    the host, ``V_ru``, can cost more when the batches' union, ``V_p2p``, grows.)
    Phase 1 starts batch ``j`` with chunk ``j`` of part 0 and, part by part, gives each
    batch in turn the unassigned chunk sharing most neighbours with the batch so far;
    phase 2 keeps batch 0 and repeatedly appends the remaining batch sharing most
    transition vertices with the last one. Ties go to the lowest index. Memory and
    messages: see the module.
    """
    m, n = shard.parts, shard.chunks
    base = identity_schedule(m, n)
    sched = base.copy()
    for i in range(1, m):
        sched[i] = assign_chunks(reduce(shard.chunk_overlaps(sched, i)))
    summed = reduce(
        np.concatenate([
            shard.batch_overlaps(sched).ravel(), shard.batch_overlaps(base).ravel(),
            np.array([shard.triples], dtype=np.int64),
        ])
    )
    after_o, before_o = summed[: n * n].reshape(n, n), summed[n * n : 2 * n * n].reshape(n, n)
    order = order_batches(after_o)
    v_ori = int(summed[-1])
    before = volumes_of(before_o, range(n), v_ori)
    after = volumes_of(after_o, order, v_ori)
    c_before, c_after = (v.cost(1.0, gbps, dedup) for v in (before, after))
    ok = c_after <= c_before
    reorg = Reorganization(before, after, ok, c_before, c_after)
    return (sched[:, order] if ok else base), reorg


def choose_schedule(
    sets: Sequence[Sequence[np.ndarray]], gbps: dict[str, float] | None = None,
    dedup: str = "full",
) -> tuple[np.ndarray, Reorganization]:
    """Serial :func:`reorganize_sharded` of the chunk neighbour sets ``sets[i][k]``."""
    return reorganize_sharded(MembershipShard.from_sets(sets), lambda a: a, gbps, dedup)
