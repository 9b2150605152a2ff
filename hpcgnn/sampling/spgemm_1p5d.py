"""Sparsity-aware 1.5D SpGEMM ``P = Q S`` on a ``(P/c) x c`` grid (graph-partitioned layout).

``S`` is split into ``P/c`` block rows; process row ``i`` holds block row ``S_i``,
replicated on its ``c`` ranks. The batches of a bulk are split over the ranks, and
``Q_i``, the stacked ``Q`` of the batches of process row ``i``, touches the columns
(vertex ids) ``U_i``. ``Q_i S = sum_k Q_ik S_k`` needs, from block ``k``, only the rows
``U_i`` of ``S_k``. As in CAGNET's 1.5D SpMM (:func:`hpcgnn.spmm.block_row.
stage_chunks`), replica ``j`` of process row ``i`` handles the stages ``k`` of chunk
``j``: it sends the ids ``U_i`` that fall in block ``k`` to rank ``k`` of its process
column (``sample_request``) and receives exactly those rows (``sample_rows``: row
lengths and column ids; the values are a function of the row, see
:mod:`hpcgnn.sampling.rows`). Block ``i`` itself is local on every replica.

Combining along the process row: rather than all-reducing sparse partial products,
every row of ``Q_i`` (a batch's frontier row) is owned by the replica that samples that
batch, and each replica forwards the fetched rows its peers' batches need
(``sample_combine``). The owner then forms its rows of ``Q S`` locally with the same
code as the replicated layout, so both layouts give bit-identical samples.

The sparsity-oblivious alternative broadcasts whole block rows: replica ``(i, j)`` would
receive every ``S_k``, ``k`` in chunk ``j``, ``k != i`` (``8 (n_k + 1) + 8 nnz_k`` bytes
as int64 CSR). :attr:`SparsityAwareRows.bytes_oblivious` accumulates that volume for
every call, for comparison with the measured ``sample_request + sample_rows`` bytes.
"""

from __future__ import annotations

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.stats import CommStats
from hpcgnn.cost.minibatch import SAMPLE_COMBINE as COMBINE
from hpcgnn.cost.minibatch import SAMPLE_FRONTIER as FRONTIER
from hpcgnn.cost.minibatch import SAMPLE_REQUEST as REQUEST
from hpcgnn.cost.minibatch import SAMPLE_ROWS as ROWS
from hpcgnn.cost.minibatch import Members, Traffic, charge_sampling
from hpcgnn.layout.blocks import owner_of, stage_chunks
from hpcgnn.sampling.rows import RowStore
from hpcgnn.sampling.setops import unique

FETCH_CATEGORIES = (REQUEST, ROWS)
COMBINE_CATEGORIES = (COMBINE, FRONTIER)


def byte_summary(
    world: Comm, stats: CommStats, oblivious: int
) -> dict[str, int | float | None]:
    """The partitioned layout's bytes counted in ``stats``, summed over ranks (collective).

    ``bytes_sparsity_aware`` is the measured row fetch (``sample_request + sample_rows``),
    ``bytes_row_combine`` the process-row combine (``sample_frontier + sample_combine``),
    ``bytes_oblivious`` what broadcasting whole block rows would have fetched.
    ``oblivious_over_aware`` divides it by *every* byte the sparsity-aware algorithm
    moved, fetch and combine (the oblivious algorithm's own combine, an all-reduce of
    partial products, is not charged to it: the ratio is a lower bound); ``None`` when
    nothing moved (replicated layout or ``P/c = 1``).
    """
    cats = stats.snapshot()

    def total(names: tuple[str, ...]) -> int:
        return int(world.allreduce_scalar(sum(cats.get(c, {}).get("bytes", 0) for c in names)))

    aware, combine = total(FETCH_CATEGORIES), total(COMBINE_CATEGORIES)
    obl = int(world.allreduce_scalar(int(oblivious)))
    return {
        "bytes_sparsity_aware": aware, "bytes_row_combine": combine, "bytes_oblivious": obl,
        "oblivious_over_aware": obl / (aware + combine) if aware + combine else None,
    }


def members(comm: Comm, world_rank: int) -> Members:
    """The world ranks of ``comm``'s members, for the cost model (collective, set-up)."""
    return Members(np.asarray(comm.allgather_obj(int(world_rank)), dtype=np.int64), comm.rank)


def _per_peer(peer: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(peer, weights=weights, minlength=size).astype(np.int64)


def exchange_rows(
    comm: Comm, ids_per_peer: list[np.ndarray], store: RowStore, expect: list[np.ndarray],
    category: str,
) -> RowStore:
    """Send ``store``'s rows ``ids_per_peer[q]`` to each peer ``q``; receive rows ``expect[q]``.

    Row lengths, then column ids, go through two all-to-all(v) calls in ``category``.
    """
    size = comm.size
    send_ids = np.concatenate(ids_per_peer).astype(np.int64)
    send_counts = np.array([len(x) for x in ids_per_peer], dtype=np.int64)
    recv_counts = np.array([len(x) for x in expect], dtype=np.int64)
    ptr, idx = store.take(send_ids)
    lens = np.diff(ptr)
    lens_in, _ = comm.alltoallv(lens, send_counts, category, recvcounts=recv_counts)
    send_peer = np.repeat(np.arange(size), send_counts)
    recv_peer = np.repeat(np.arange(size), recv_counts)
    idx_in, _ = comm.alltoallv(
        idx, _per_peer(send_peer, lens, size), category,
        recvcounts=_per_peer(recv_peer, lens_in, size),
    )
    got_ids = np.concatenate(expect).astype(np.int64)
    got_ptr = np.concatenate([[0], np.cumsum(lens_in)]).astype(np.int64)
    return RowStore.merge([RowStore(got_ids, got_ptr, idx_in, store.num_nodes)], store.num_nodes)


class SparsityAwareRows:
    """Gives each rank the rows of ``S`` its batches' frontiers need (collective call).

    Parameters
    ----------
    col
        Process column (``P/c`` ranks; rank ``k`` holds block row ``k``).
    row
        Process row (the ``c`` replicas of this block row).
    block
        This process row's rows of ``S``.
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

    """

    def __init__(
        self, col: Comm, row: Comm, block: RowStore, offsets: np.ndarray, world_rank: int,
        traffic: Traffic | None = None,
    ) -> None:
        self.col, self.row, self.block = col, row, block
        self.col_members, self.row_members = members(col, world_rank), members(row, world_rank)
        self.traffic = traffic if traffic is not None else Traffic(col.size * row.size)
        self.lengths = col.allgatherv(np.diff(block.indptr), "control")
        self.offsets = np.asarray(offsets, dtype=np.int64)
        chunks = stage_chunks(col.size, row.size)
        me = col.rank
        self.stages = [
            np.setdiff1d(np.arange(chunks[j], chunks[j + 1], dtype=np.int64), [me])
            for j in range(row.size)
        ]
        nnz = col.allgather_obj(block.nnz, "control")
        rows = np.diff(self.offsets)
        self.oblivious_per_call = int(
            sum(8 * (int(rows[k]) + 1) + 8 * int(nnz[k]) for k in self.stages[row.rank])
        )
        self.bytes_oblivious = 0

    def __call__(self, own_ids: np.ndarray) -> RowStore:
        """Rows of ``S`` at ``own_ids`` (sorted, distinct) on this rank."""
        own_ids = np.asarray(own_ids, dtype=np.int64)
        counts = self.row.allgather_obj(len(own_ids), "control")
        every = self.row.allgatherv(own_ids, FRONTIER, counts)
        union = unique(every)
        req, req_owner = self._requests(union)
        own_owner = owner_of(own_ids, self.offsets)
        expect = [own_ids[np.isin(own_owner, self.stages[q])] for q in range(self.row.size)]
        others = [e for q, e in enumerate(expect) if q != self.row.rank]
        combine = np.concatenate([np.zeros(0, np.int64), *others])
        charge_sampling(
            self.traffic, self.col_members, self.row_members, len(own_ids), req_owner,
            int(self.lengths[req].sum()), len(combine), int(self.lengths[combine].sum()),
        )
        fetched = self._fetch(req, req_owner)
        self.bytes_oblivious += self.oblivious_per_call
        # combine along the process row: forward what each replica's batches need
        starts = np.concatenate([[0], np.cumsum(counts)])
        peers_need = [every[starts[q] : starts[q + 1]] for q in range(self.row.size)]
        send = [np.intersect1d(need, fetched.ids, assume_unique=True) for need in peers_need]
        combined = exchange_rows(self.row, send, fetched, expect, COMBINE)
        local_ids = own_ids[own_owner == self.col.rank]
        ptr, idx = self.block.take(local_ids)
        local = RowStore(local_ids, ptr, idx, self.block.num_nodes)
        return RowStore.merge([local, combined], self.block.num_nodes)

    def _requests(self, union: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of ``union`` in the blocks of this replica's stage chunk, and their owners."""
        owner = owner_of(union, self.offsets)
        mine = np.isin(owner, self.stages[self.row.rank])
        return union[mine], owner[mine]

    def _fetch(self, req: np.ndarray, owner: np.ndarray) -> RowStore:
        """Request the rows ``req`` (sorted) from their ``owner`` ranks of the column."""
        sendcounts = np.bincount(owner, minlength=self.col.size).astype(np.int64)
        got, got_counts = self.col.alltoallv(req, sendcounts, REQUEST)
        starts = np.concatenate([[0], np.cumsum(got_counts)])
        serve = [got[starts[q] : starts[q + 1]] for q in range(self.col.size)]
        rstarts = np.concatenate([[0], np.cumsum(sendcounts)])
        expect = [req[rstarts[q] : rstarts[q + 1]] for q in range(self.col.size)]
        return exchange_rows(self.col, serve, self.block, expect, ROWS)
