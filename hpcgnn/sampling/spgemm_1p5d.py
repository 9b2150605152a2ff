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
"""

from __future__ import annotations

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.stats import CommStats
from hpcgnn.cost.minibatch import CONTROL, Members, Traffic, charge_sampling
from hpcgnn.cost.minibatch import SAMPLE_COMBINE as COMBINE
from hpcgnn.cost.minibatch import SAMPLE_FRONTIER as FRONTIER
from hpcgnn.cost.minibatch import SAMPLE_REQUEST as REQUEST
from hpcgnn.cost.minibatch import SAMPLE_ROWS as ROWS
from hpcgnn.layout.blocks import owner_of, stage_chunks
from hpcgnn.sampling.rows import RowStore
from hpcgnn.sampling.setops import unique

FETCH_CATEGORIES = (REQUEST, ROWS)
COMBINE_CATEGORIES = (COMBINE, FRONTIER)


def byte_summary(
    world: Comm, stats: CommStats, oblivious: int, control: int = 0
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
    """
    cats = stats.snapshot()

    def total(names: tuple[str, ...]) -> int:
        return int(world.allreduce_scalar(sum(cats.get(c, {}).get("bytes", 0) for c in names)))

    aware, combine = total(FETCH_CATEGORIES), total(COMBINE_CATEGORIES)
    ctl = int(world.allreduce_scalar(int(control)))
    obl = int(world.allreduce_scalar(int(oblivious)))
    ours = aware + combine + ctl
    return {
        "bytes_sparsity_aware": aware, "bytes_row_combine": combine,
        "bytes_sampling_control": ctl, "bytes_oblivious": obl,
        "oblivious_over_aware": obl / ours if aware + combine else None,
    }


def members(comm: Comm, world_rank: int) -> Members:
    """The world ranks of ``comm``'s members, for the cost model (collective, set-up)."""
    return Members(np.asarray(comm.allgather_obj(int(world_rank)), dtype=np.int64), comm.rank)


def _ptr(lens: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def _segment_sums(ptr: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Nonzeros of consecutive groups of ``counts`` rows of the CSR pointer ``ptr``."""
    bounds = _ptr(counts)
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
    bytes_oblivious
        Bytes this rank would have received so far by broadcasting whole block rows.
    bytes_control
        ``control`` bytes this rank received in the calls so far (the frontier sizes
        and the stage requests' counts), measured by the communication layer.

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

    def _control_bytes(self) -> int:
        entry = self.col.stats.categories.get(CONTROL)
        return 0 if entry is None else int(entry.bytes)

    def __call__(self, own_ids: np.ndarray) -> RowStore:
        """Rows of ``S`` at ``own_ids`` (sorted, distinct) on this rank."""
        own_ids = np.asarray(own_ids, dtype=np.int64)
        n = self.block.num_nodes
        control = self._control_bytes()
        counts = self.row.allgather_obj(len(own_ids), "control")
        union = unique(self.row.allgatherv(own_ids, FRONTIER, counts))
        owner = owner_of(union, self.offsets)
        parts = [union[np.isin(owner, self.stages[q])] for q in range(self.row.size)]
        stages = self._stage_requests(union, owner)
        charge_sampling(
            self.traffic, self.col_members, self.row_members, len(own_ids),
            [(k, len(ids), int(self.lengths[ids].sum())) for k, ids in stages],
            [(len(ids), int(self.lengths[ids].sum())) for ids in parts],
        )
        mine = RowStore.merge([self._stage(k, ids) for k, ids in stages], n)
        combined = self._sparse_allreduce(mine, parts)
        self.bytes_oblivious += self.oblivious_per_call
        self.bytes_control += self._control_bytes() - control
        local_ids = own_ids[owner_of(own_ids, self.offsets) == self.col.rank]
        local = RowStore(local_ids, *self.block.take(local_ids), n)
        return RowStore.merge([local, combined], n)

    def _stage_requests(self, union: np.ndarray, owner: np.ndarray
                        ) -> list[tuple[int, np.ndarray]]:
        """Per stage ``k`` of this process column's chunk, the ids of ``union`` in block ``k``.

        Nothing at the stage whose root this rank is (its own block is local).
        """
        j, empty = self.row.rank, np.zeros(0, np.int64)
        return [
            (k, union[owner == k] if k != self.col.rank else empty)
            for k in range(int(self.chunks[j]), int(self.chunks[j + 1]))
        ]

    def _stage(self, k: int, want: np.ndarray) -> RowStore:
        """Stage ``k``: column rank ``k`` serves the rows of its block that its peers want."""
        with self.col.stats.tagged(stage=k):  # the trace names the stage
            return self._serve(k, want)

    def _serve(self, k: int, want: np.ndarray) -> RowStore:
        """The messages of stage ``k`` (:meth:`_stage`)."""
        n, empty = self.block.num_nodes, np.zeros(0, np.int64)
        asked, counts = self.col.gatherv(want, k, REQUEST)
        if asked is None:
            lens = self.col.scatterv(empty, None, len(want), k, ROWS)
            idx = self.col.scatterv(empty, None, int(lens.sum()), k, ROWS)
            return RowStore(want, _ptr(lens), idx, n)
        assert counts is not None
        ptr, idx = self.block.take(asked)
        self.col.scatterv(np.diff(ptr), counts, 0, k, ROWS)
        self.col.scatterv(idx, _segment_sums(ptr, counts), 0, k, ROWS)
        return RowStore(empty, np.zeros(1, np.int64), empty, n)

    def _sparse_allreduce(self, mine: RowStore, parts: list[np.ndarray]) -> RowStore:
        """Sum the replicas' partial products over the process row: their nonzero rows.

        ``parts[q]`` are the row ids of replica ``q``'s partial product (every replica
        knows them), so only the row lengths and column ids travel.
        """
        n = self.block.num_nodes
        sizes = np.array([len(p) for p in parts], dtype=np.int64)
        ptr = _ptr(self.row.allgatherv(np.diff(mine.indptr), COMBINE, sizes.tolist()))
        idx = self.row.allgatherv(mine.indices, COMBINE, _segment_sums(ptr, sizes).tolist())
        ids = np.concatenate([np.zeros(0, np.int64), *parts])
        return RowStore.merge([RowStore(ids, ptr, idx, n)], n)
