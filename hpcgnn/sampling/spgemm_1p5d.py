"""Sparsity-aware 1.5D SpGEMM ``P = Q S`` on a ``(P/c) x c`` grid (graph-partitioned layout).

The paper's Algorithm 2. ``S`` is split into ``P/c`` block rows; process row ``i`` holds
block row ``S_i``, replicated on its ``c`` ranks. The batches of a bulk are split over
the ranks, so ``Q_i``, the stacked ``Q`` of process row ``i``, lies on its ``c`` ranks:
they first gather their frontiers (``sample_frontier``), which gives every replica the
column ids ``U_i`` of ``Q_i``. ``Q_i S = sum_k Q_ik S_k`` needs from block ``k`` only the
rows ``U_i`` of ``S_k``. As in CAGNET's 1.5D SpMM (:func:`hpcgnn.layout.blocks.
stage_chunks`), replica ``j`` of every process row computes the partial sum over the
stages ``k`` of chunk ``j``:

- **stage loop within the process column**: at stage ``k`` the rank holding block ``k``
  gathers the ids its column peers request (``sample_request``: only ``U_i`` within
  block ``k``, the sparsity-aware part) and scatters back exactly those rows
  (``sample_rows``: row lengths, then column ids; the values are a function of the row,
  see :mod:`hpcgnn.sampling.rows`);
- **sparse all-reduce across the process row**: the ``c`` partial products have
  disjoint nonzero rows (``Q``'s rows select rows of ``S``), so their sum is the union
  of their nonzero rows; every replica receives the others' rows (``sample_combine``:
  lengths and column ids only, the row ids follow from ``U_i``). No arithmetic, so the
  samples are bit-identical to the replicated layout's.

Block ``i`` itself is local on every replica and never travels. The sparsity-oblivious
alternative broadcasts whole block rows: replica ``(i, j)`` would receive every ``S_k``,
``k`` in chunk ``j``, ``k != i`` (``8 (n_k + 1) + 8 nnz_k`` bytes as int64 CSR).
:attr:`SparsityAwareRows.bytes_oblivious` accumulates that volume for every call, for
comparison with the measured bytes. Every call charges its bytes to the cost model
first (:func:`hpcgnn.cost.minibatch.charge_sampling`).

For LADIES the row all-gather is not the paper's last step: ``P = Q (S .* S)`` has one
row per batch, and the paper all-reduces the ``c`` partial products of ``P`` (column ids
and computed values), then runs the row extraction ``R S`` as a second SpGEMM. Ours moves
the rows themselves, which serve both. :meth:`SparsityAwareRows.count_partial_products`
accumulates, from sizes this rank knows and with no message, what that all-reduce would
have moved for this rank's batches (:func:`partial_nonzeros`,
:func:`hpcgnn.cost.minibatch.partial_product_bytes`), for comparison
(``bytes_partial_products`` in :func:`byte_summary`). :meth:`SparsityAwareRows.
distributions` runs the paper's scheme instead (``--ladies-reduction partial-products``):
``P``'s partial products reduced over the process row (``sample_partial_products``,
measured), the row extraction then a second call of :class:`SparsityAwareRows`.
"""

from __future__ import annotations

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.stats import CommStats
from hpcgnn.cost.minibatch import (
    CONTROL,
    ID_BYTES,
    Members,
    Traffic,
    charge_partial_products,
    charge_sampling,
    charge_stacked_frontier,
    charge_stages,
    paper_spgemm_words,
    partial_product_bytes,
    spgemm_bytes_per_process,
)
from hpcgnn.cost.minibatch import SAMPLE_COMBINE as COMBINE
from hpcgnn.cost.minibatch import SAMPLE_FRONTIER as FRONTIER
from hpcgnn.cost.minibatch import SAMPLE_PARTIAL as PARTIAL
from hpcgnn.cost.minibatch import SAMPLE_REQUEST as REQUEST
from hpcgnn.cost.minibatch import SAMPLE_ROWS as ROWS
from hpcgnn.layout.blocks import stage_chunks
from hpcgnn.sampling.arrays import HOST, Array, ops
from hpcgnn.sampling.matrices import Csr, sum_duplicates
from hpcgnn.sampling.rows import RowStore
from hpcgnn.sampling.samplers import LAYER_WISE
from hpcgnn.sampling.setops import unique

FETCH_CATEGORIES = (REQUEST, ROWS)
COMBINE_CATEGORIES = (COMBINE, FRONTIER)


def byte_summary(
    world: Comm, stats: CommStats, oblivious: int, control: int = 0,
    partial: int | None = None, nnz: int | None = None, replication: int = 1,
    paper_reduction: bool = False,
) -> dict[str, int | float | None]:
    """The partitioned layout's bytes counted in ``stats``, summed over ranks (collective).

    ``bytes_sparsity_aware`` is the measured row fetch (``sample_request + sample_rows``),
    ``bytes_row_combine`` the process-row combine (``sample_frontier + sample_combine``),
    ``bytes_sampling_control`` the sampler's own ``control`` bytes (the frontier sizes
    and the stage requests' counts; ``control``, this rank's
    :attr:`SparsityAwareRows.bytes_control`, since other traffic shares the category),
    ``bytes_oblivious`` what broadcasting whole block rows would have fetched.
    ``oblivious_over_aware`` divides it by *every* byte the sparsity-aware algorithm
    moved, fetch, combine and control (the oblivious algorithm's own combine, an
    all-reduce of partial products, is not charged to it: the ratio is a lower bound);
    ``None`` when nothing moved (replicated layout or ``P/c = 1``).
    ``bytes_partial_products`` sums ``partial``, this rank's
    :attr:`SparsityAwareRows.bytes_partial_products`: what the paper's all-reduce of
    LADIES' partial products of ``P`` would have moved instead of ``sample_combine``;
    ``None`` where ``partial`` is (the same on every rank: another sampler, the replicated
    layout, ``P/c = 1``).

    ``spgemm_nnz`` sums ``nnz``, this rank's :attr:`SparsityAwareRows.nnz_selected` (the
    nonzeros of the rows of ``S`` each hop's ``Q_i`` selects, counted once per process
    row), and ``paper_spgemm_bytes`` is the paper's closed form on it,
    ``8 spgemm_nnz (1/c + c/P)`` (:func:`hpcgnn.cost.minibatch.paper_spgemm_words`, ``c``
    the ``replication``), beside ``measured_spgemm_bytes``, ours in its accounting
    (:func:`hpcgnn.cost.minibatch.spgemm_bytes_per_process`), and ``paper_over_measured``;
    all ``None`` where ``nnz`` is (the replicated layout), the ratio where nothing moved.
    With ``paper_reduction`` (LADIES' ``--ladies-reduction partial-products``: every hop
    fetches its rows twice, for ``P`` and for ``R S``) ours is ``P``'s SpGEMM alone, the
    paper's step: half the ``sample_rows`` (the two fetches are the same) and the
    reduction of the partial products, ``sample_partial_products``, in place of
    ``sample_combine``.
    """
    cats = stats.snapshot()

    def total(names: tuple[str, ...]) -> int:
        return int(world.allreduce_scalar(sum(cats.get(c, {}).get("bytes", 0) for c in names)))

    aware, combine = total(FETCH_CATEGORIES), total(COMBINE_CATEGORIES)
    ctl = int(world.allreduce_scalar(int(control)))
    paper: dict[str, int | float | None] = dict.fromkeys(
        ("spgemm_nnz", "paper_spgemm_bytes", "measured_spgemm_bytes", "paper_over_measured")
    )
    if nnz is not None:
        total_nnz = int(world.allreduce_scalar(int(nnz)))
        words = paper_spgemm_words(world.size, replication, total_nnz)
        if paper_reduction:
            ours = spgemm_bytes_per_process(world.size, replication, total((ROWS,)) / 2,
                                            total((PARTIAL,)))
        else:
            ours = spgemm_bytes_per_process(world.size, replication, total((ROWS,)),
                                            total((COMBINE,)))
        paper.update(spgemm_nnz=total_nnz, paper_spgemm_bytes=ID_BYTES * words,
                     measured_spgemm_bytes=ours,
                     paper_over_measured=ID_BYTES * words / ours if ours else None)
    obl = int(world.allreduce_scalar(int(oblivious)))
    ours = aware + combine + ctl
    return {
        "bytes_sparsity_aware": aware, "bytes_row_combine": combine,
        "bytes_sampling_control": ctl, "bytes_oblivious": obl,
        "oblivious_over_aware": obl / ours if aware + combine else None,
        "bytes_partial_products": (
            None if partial is None else int(world.allreduce_scalar(int(partial)))
        ),
        **paper,
    }


def members(comm: Comm, world_rank: int) -> Members:
    """The world ranks of ``comm``'s members, for the cost model (collective, set-up)."""
    return Members(np.asarray(comm.allgather_obj(int(world_rank)), dtype=np.int64), comm.rank)


def partial_nonzeros(fr_ptr: Array, fr_ids: Array, store: RowStore, offsets: np.ndarray,
                     replica_of: np.ndarray, replicas: int) -> np.ndarray:
    """Nonzeros of each batch's row of every replica's partial product of ``P = Q (S .* S)``.

    Replica ``q`` of the process row sums over the rows of ``S`` in its stage chunk, so its
    row ``b`` holds the union of the column ids of the rows ``v`` of ``F_b`` whose block
    ``k`` (by ``offsets``) has ``replica_of[k] == q``; ``-1`` marks the process row's own
    block, local on every replica. The values of ``S .* S`` are positive, so no sum
    cancels and the union is the row's pattern.

    Parameters
    ----------
    fr_ptr, fr_ids
        The stacked frontiers ``F_b`` of this rank's ``K`` batches (distinct per batch).
    store
        Holds every row of ``S`` in the frontiers (where the hop is sampled).
    offsets
        Vertex offsets of the ``P/c`` block rows.
    replica_of
        Per block row, the replica whose partial product sums it, or ``-1``.
    replicas
        ``c``, the replicas of the process row.

    Returns
    -------
    numpy.ndarray
        ``(c, K)`` int64 on the host.
    """
    xp = store.xp
    fr_ptr, fr_ids = xp.asarray(fr_ptr), xp.asarray(fr_ids)
    c, nb, n = int(replicas), len(fr_ptr) - 1, store.num_nodes
    block = xp.searchsorted(xp.asarray(offsets), fr_ids, right=True) - 1
    q = xp.asarray(replica_of)[block]
    keep = q >= 0
    ptr, idx = store.take(fr_ids[keep])
    part_row = q[keep] * nb + xp.rows_of(fr_ptr)[keep]
    keys = unique(xp.repeat(part_row, xp.diff(ptr)) * n + idx)
    return xp.to_host(xp.bincount(keys // n, c * nb)).reshape(c, nb)


def partial_product(batch: Array, ids: Array, store: RowStore) -> tuple[Array, Array]:
    """One replica's partial product of ``P = Q (S .* S)`` as sorted-per-entry terms.

    ``batch[e]`` is the batch row of frontier vertex ``ids[e]`` (distinct per batch), and
    ``store`` holds their rows of ``S``. Returns the keys ``b n + j`` and values
    ``S_vj^2`` of every term, ordered by batch row and then by ascending vertex ``v``:
    :func:`~hpcgnn.sampling.matrices.sum_duplicates` of them sums each entry in SciPy's
    order of ``Q (S .* S)`` (``Q``'s row in sorted vertex order).
    """
    xp, n = store.xp, store.num_nodes
    order = xp.argsort(batch * n + ids)
    batch, ids = batch[order], ids[order]
    rows = store.matrix(ids, LAYER_WISE).squared()
    keys = xp.repeat(batch, xp.diff(rows.indptr)) * n + rows.indices
    return keys, rows.data


def _segment_sums(ptr: Array, counts: np.ndarray) -> Array:
    """Nonzeros of consecutive groups of ``counts`` rows of the CSR pointer ``ptr``."""
    xp = ops(ptr)
    bounds = xp.asarray(HOST.ptr(counts))
    return ptr[bounds[1:]] - ptr[bounds[:-1]]


class SparsityAwareRows:
    """Gives each rank the rows of ``S`` its batches' frontiers need (collective call).

    Parameters
    ----------
    col
        Process column (``P/c`` ranks; rank ``k`` holds block row ``k``).
    row
        Process row (the ``c`` replicas of this block row).
    block
        This process row's rows of ``S``, on the host or on the sampling GPU (the calls
        compute there, and their messages carry its buffers).
    offsets
        Vertex offsets of the ``P/c`` block rows.
    world_rank
        This rank's world rank (for the cost model's receivers).
    traffic
        Where every call charges the bytes it will move (:mod:`hpcgnn.cost.minibatch`),
        before moving them; a private one if not given.

    Attributes
    ----------
    lengths
        Row lengths of all of ``S`` (``8 n`` bytes gathered once over the process
        column): the cost model's statistic of the rows a rank requests.
    bytes_oblivious
        Bytes this rank would have received so far by broadcasting whole block rows.
    bytes_control
        ``control`` bytes this rank received in the calls so far (the frontier sizes
        and the stage requests' counts), measured by the communication layer.
    bytes_partial_products
        Bytes the paper's all-reduce of LADIES' partial products of ``P`` would have moved
        for this rank's batches so far (:meth:`count_partial_products`; computed, never
        sent).
    nnz_selected
        Nonzeros of the rows of ``S`` at the union ``U_i`` of the process row's frontiers,
        summed over the calls so far, the local block's included (the paper's ``b k d``
        for this process row); counted by replica 0 only, so the sum over ranks counts
        each process row once.

    """

    def __init__(
        self, col: Comm, row: Comm, block: RowStore, offsets: np.ndarray, world_rank: int,
        traffic: Traffic | None = None,
    ) -> None:
        self.col, self.row, self.block = col, row, block
        self.col_members, self.row_members = members(col, world_rank), members(row, world_rank)
        self.traffic = traffic if traffic is not None else Traffic(col.size * row.size)
        xp = block.xp
        self.lengths = col.allgatherv(HOST.to_host(xp.diff(block.indptr)), "control")
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self._lengths, self._offsets = xp.asarray(self.lengths), xp.asarray(self.offsets)
        self.chunks = chunks = stage_chunks(col.size, row.size)
        me = col.rank
        self.stages = [  # the blocks of each replica's partial product (block i is local)
            np.setdiff1d(np.arange(chunks[j], chunks[j + 1], dtype=np.int64), [me])
            for j in range(row.size)
        ]
        nnz = col.allgather_obj(block.nnz, "control")
        rows = np.diff(self.offsets)
        self.oblivious_per_call = int(
            sum(8 * (int(rows[k]) + 1) + 8 * int(nnz[k]) for k in self.stages[row.rank])
        )
        self.bytes_oblivious = 0
        self.bytes_control = 0
        self.bytes_partial_products = 0
        self.nnz_selected = 0
        #: Per block row, the replica whose partial product sums it (``-1``: block ``i``).
        self.replica_of = np.full(col.size, -1, dtype=np.int64)
        for q, blocks in enumerate(self.stages):
            self.replica_of[blocks] = q

    def _control_bytes(self) -> int:
        return self._recorded(CONTROL)

    def _recorded(self, category: str) -> int:
        entry = self.col.stats.categories.get(category)
        return 0 if entry is None else int(entry.bytes)

    def _block_slices(self, union: Array) -> tuple[np.ndarray, np.ndarray]:
        """Each block's slice of the sorted ``union`` and the union's nonzeros before it.

        The union is sorted, so each block's ids are a slice: the blocks' bounds in it,
        and the nonzeros of the union's rows before each bound, on the host.
        """
        xp = self.block.xp
        bounds_x = xp.searchsorted(union, self._offsets)
        return xp.to_host(bounds_x), xp.to_host(xp.ptr(self._lengths[union])[bounds_x])

    def __call__(self, own_ids: Array) -> RowStore:
        """Rows of ``S`` at ``own_ids`` (sorted, distinct) on this rank.

        Computes where :attr:`block` is: on the host, or on the sampling GPU, whose
        buffers then go through the communicator's wire (CUDA-aware, or staged). The
        sizes every message needs are known on the host before it (one copy of the
        union's block bounds per call, and one of each served stage's sizes at its root).
        """
        xp = self.block.xp
        own_ids = xp.int64(xp.asarray(own_ids))
        control = self._control_bytes()
        counts = self.row.allgather_obj(len(own_ids), "control")
        union = unique(self.row.allgatherv(own_ids, FRONTIER, counts))
        bounds, nnz_before = self._block_slices(union)
        if self.row.rank == 0:
            self.nnz_selected += int(nnz_before[-1])
        stages = self._stage_requests(bounds, nnz_before)
        parts = [self._part(q, bounds, nnz_before) for q in range(self.row.size)]
        charge_sampling(
            self.traffic, self.col_members, self.row_members, len(own_ids),
            [(k, hi - lo, nnz) for k, (lo, hi), nnz in stages],
            [(sum(hi - lo for lo, hi in spans), nnz) for spans, nnz in parts],
        )
        n = self.block.num_nodes
        mine = RowStore.merge(
            [self._stage(k, union[lo:hi], nnz) for k, (lo, hi), nnz in stages], n, xp
        )
        combined = self._sparse_allreduce(mine, union, parts)
        self.bytes_oblivious += self.oblivious_per_call
        self.bytes_control += self._control_bytes() - control
        lo, hi = (int(v) for v in self.offsets[self.col.rank : self.col.rank + 2])
        local_ids = own_ids[(own_ids >= lo) & (own_ids < hi)]
        local = RowStore(local_ids, *self.block.take(local_ids), n)
        return RowStore.merge([local, combined], n)

    def distributions(self, fr_ptr: Array, fr_ids: Array) -> Csr:
        """LADIES' ``P = Q (S .* S)`` for this rank's batches, the paper's way (collective).

        ``fr_ptr, fr_ids``: the stacked frontiers ``F_b`` of this rank's batches (distinct
        per batch). Algorithm 2 with the paper's last step
        (``--ladies-reduction partial-products``):

        1. the process row gathers its batches' frontiers whole (``sample_frontier``:
           every replica holds ``Q_i``, the paper's layout);
        2. the stage loop fetches the rows of ``S`` at the union ``U_i`` in this replica's
           chunk (``sample_request``, ``sample_rows``; block ``i`` is local);
        3. replica ``q``'s partial product sums, for every batch of the process row, the
           rows of ``S .* S`` of ``F_b`` in its chunk; the partial products are reduced
           over the process row (``sample_partial_products``: int64 keys ``b n + j`` and
           float64 values) as a chain in block order, replica ``q`` adding its rows to the
           running sum of replicas ``0..q-1``, and the last replica scatters each replica's
           batches' rows.

        The chain keeps SciPy's summation order (each entry summed over the rows of
        ``F_b`` in ascending vertex order, :func:`~hpcgnn.sampling.matrices.sum_duplicates`),
        so ``P`` is the local product's bit for bit and the samples do not change. Returns
        ``P`` as a ``K x n`` :class:`~hpcgnn.sampling.matrices.Csr` with sorted columns.
        The reduction's bytes are measured and added to :attr:`bytes_partial_products`.
        """
        xp = self.block.xp
        fr_ptr, fr_ids = xp.int64(xp.asarray(fr_ptr)), xp.int64(xp.asarray(fr_ids))
        n, me = self.block.num_nodes, self.row.rank
        control, partial = self._control_bytes(), self._recorded(PARTIAL)
        batches = self.row.allgather_obj(len(fr_ptr) - 1, "control")
        first = HOST.ptr(np.asarray(batches, dtype=np.int64))  # each replica's first batch
        ptr = xp.ptr(self.row.allgatherv(xp.diff(fr_ptr), FRONTIER, batches))
        ends = xp.to_host(ptr[xp.asarray(first)])
        ids = self.row.allgatherv(fr_ids, FRONTIER, np.diff(ends).tolist())
        union = unique(ids)
        bounds, nnz_before = self._block_slices(union)
        stages = self._stage_requests(bounds, nnz_before)
        charge_stacked_frontier(self.traffic, self.row_members, len(fr_ptr) - 1, len(fr_ids))
        charge_stages(self.traffic, self.col_members,
                      [(k, hi - lo, nnz) for k, (lo, hi), nnz in stages])
        parts = [self._stage(k, union[lo:hi], nnz) for k, (lo, hi), nnz in stages]
        blocks = (int(self.chunks[me]), int(self.chunks[me + 1]))
        i = self.col.rank
        if blocks[0] <= i < blocks[1]:  # the process row's own block is in this chunk
            local = union[int(bounds[i]) : int(bounds[i + 1])]
            parts.append(RowStore(local, *self.block.take(local), n))
        lo, hi = (int(self.offsets[k]) for k in blocks)
        inside = (ids >= lo) & (ids < hi)
        keys, values = partial_product(xp.rows_of(ptr)[inside], ids[inside],
                                       RowStore.merge(parts, n, xp))
        keys, values = self._reduce_chain(keys, values, first)
        self.bytes_control += self._control_bytes() - control
        self.bytes_partial_products += self._recorded(PARTIAL) - partial
        keys = keys - int(first[me]) * n
        nb = len(fr_ptr) - 1
        return Csr(xp.ptr(xp.bincount(keys // n, nb)), keys % n, values, (nb, n))

    def _reduce_chain(self, keys: Array, values: Array, first: np.ndarray
                      ) -> tuple[Array, Array]:
        """Reduce the partial products ``(keys, values)`` over the process row, in its order.

        Replica ``q`` adds its entries after the running sum of replicas ``0..q-1``
        received from ``q - 1`` and passes it on; the last replica scatters each replica's
        batch rows (``first``: each replica's first batch row of the process row's stack).
        Returns this replica's rows, keys in the process row's stack.
        """
        xp, row, me = self.block.xp, self.row, self.row.rank
        c, n = row.size, self.block.num_nodes
        if c == 1:
            return sum_duplicates(keys, values)
        if me > 0:
            count = np.zeros(1, dtype=np.int64)
            row.complete([row.irecv(count, me - 1)], [count], CONTROL)
            got_k, got_v = xp.zeros(int(count[0])), xp.zeros(int(count[0]), "float64")
            row.complete([row.irecv(got_k, me - 1), row.irecv(got_v, me - 1)],
                         [got_k, got_v], PARTIAL)
            keys, values = xp.concat([got_k, keys]), xp.concat([got_v, values])
        keys, values = sum_duplicates(keys, values)  # the running sum first: stable
        last = c - 1
        if me < last:
            charge_partial_products(self.traffic, self.row_members, len(keys), [])
            count = np.array([len(keys)], dtype=np.int64)
            sends = [row.isend(count, me + 1), row.isend(keys, me + 1),
                     row.isend(values, me + 1)]
            row.complete(sends, [], PARTIAL)
            counts = None
        else:
            cut = xp.searchsorted(keys, xp.asarray(first) * n)
            counts = np.diff(xp.to_host(cut))
            charge_partial_products(self.traffic, self.row_members, 0, counts)
        mine = row.scatterv(np.zeros(0, np.int64) if counts is None else counts,
                            None if counts is None else [1] * c, 1, last, CONTROL)
        size = int(mine[0])
        own_k = row.scatterv(xp.zeros(0) if counts is None else keys, counts, size, last,
                             PARTIAL)
        own_v = row.scatterv(xp.zeros(0, "float64") if counts is None else values, counts,
                             size, last, PARTIAL)
        return own_k, own_v

    def count_partial_products(self, fr_ptr: Array, fr_ids: Array, store: RowStore) -> None:
        """Add what the paper's all-reduce of a LADIES hop's ``P`` would move for these batches.

        ``fr_ptr, fr_ids``: the stacked frontiers of this rank's batches at the hop;
        ``store``: the rows of ``S`` this SpGEMM gave them. Local arithmetic, no message
        (:func:`partial_nonzeros`, :func:`hpcgnn.cost.minibatch.partial_product_bytes`).
        """
        if len(fr_ptr) < 2:
            return
        nonzeros = partial_nonzeros(fr_ptr, fr_ids, store, self.offsets, self.replica_of,
                                    self.row.size)
        present = np.array([len(blocks) > 0 for blocks in self.stages])
        self.bytes_partial_products += partial_product_bytes(nonzeros, present)

    def _stage_requests(self, bounds: np.ndarray, nnz_before: np.ndarray
                        ) -> list[tuple[int, tuple[int, int], int]]:
        """Per stage ``k`` of this process column's chunk: the union's slice in block ``k``.

        ``(k, (lo, hi), nonzeros)``; nothing at the stage whose root this rank is (its own
        block is local).
        """
        j, me = self.row.rank, self.col.rank
        out = []
        for k in range(int(self.chunks[j]), int(self.chunks[j + 1])):
            if k == me:
                out.append((k, (0, 0), 0))
            else:
                out.append((k, (int(bounds[k]), int(bounds[k + 1])),
                            int(nnz_before[k + 1] - nnz_before[k])))
        return out

    def _part(self, q: int, bounds: np.ndarray, nnz_before: np.ndarray
              ) -> tuple[list[tuple[int, int]], int]:
        """Replica ``q``'s partial product: the union's slices of its stages and their nonzeros.

        Its stages are :attr:`stages` ``[q]``: the blocks of chunk ``q`` but this process
        row's own.
        """
        blocks = [int(k) for k in self.stages[q]]
        spans = [(int(bounds[k]), int(bounds[k + 1])) for k in blocks]
        return spans, sum(int(nnz_before[k + 1] - nnz_before[k]) for k in blocks)

    def _stage(self, k: int, want: Array, nnz: int) -> RowStore:
        """Stage ``k``: column rank ``k`` serves the rows of its block that its peers want."""
        with self.col.stats.tagged(stage=k):  # the trace names the stage
            return self._serve(k, want, nnz)

    def _serve(self, k: int, want: Array, nnz: int) -> RowStore:
        """The messages of stage ``k`` (:meth:`_stage`); ``nnz``: the nonzeros of ``want``."""
        xp = self.block.xp
        n, empty = self.block.num_nodes, xp.zeros(0)
        asked, counts = self.col.gatherv(want, k, REQUEST)
        if asked is None:
            lens = self.col.scatterv(empty, None, len(want), k, ROWS)
            idx = self.col.scatterv(empty, None, nnz, k, ROWS)
            return RowStore(want, xp.ptr(lens), idx, n)
        assert counts is not None
        ptr, idx = self.block.take(asked)
        self.col.scatterv(xp.diff(ptr), counts, 0, k, ROWS)
        self.col.scatterv(idx, xp.to_host(_segment_sums(ptr, counts)), 0, k, ROWS)
        return RowStore(empty, xp.zeros(1), empty, n)

    def _sparse_allreduce(self, mine: RowStore, union: Array,
                          parts: list[tuple[list[tuple[int, int]], int]]) -> RowStore:
        """Sum the replicas' partial products over the process row: their nonzero rows.

        ``parts[q]`` gives the row ids of replica ``q``'s partial product as slices of the
        process row's ``union`` (every replica knows them) and their nonzeros, so only the
        row lengths and column ids travel.
        """
        xp, n = self.block.xp, self.block.num_nodes
        sizes = [sum(hi - lo for lo, hi in spans) for spans, _ in parts]
        ptr = xp.ptr(self.row.allgatherv(xp.diff(mine.indptr), COMBINE, sizes))
        idx = self.row.allgatherv(mine.indices, COMBINE, [nnz for _, nnz in parts])
        ids = xp.concat([xp.zeros(0)] + [union[lo:hi] for spans, _ in parts for lo, hi in spans])
        return RowStore.merge([RowStore(ids, ptr, idx, n)], n)
