"""Communication cost model of minibatch training (``--mode minibatch``), exact per category.

Minibatch traffic depends on what was sampled, so the model is charged step by step with
the sizes that determine it, computed locally from the sampled ids (never from what a
message brought): the feature rows a batch reads and their owners, the frontier and
request sets of every hop of the sparsity-aware 1.5D SpGEMM, the lengths of the rows of
``S`` requested (a graph statistic), and the size of the model's gradients. Each charge
adds the bytes every receiving world rank will record, in the accounting of
:class:`hpcgnn.comm.Comm` (bytes received from other ranks; an all-reduce of ``m`` bytes
over ``p`` ranks ``round(2 m (p - 1) / p)`` on each; a count exchange of an all-to-allv
``8 (p - 1)`` bytes of ``control``; a pickled object its pickled size).

Per training step of a ``(P/c) x c`` grid (``q = P/c`` ranks per process column,
``s`` bytes per feature value, ``f_0`` input features):

* ``feature_request``: ``8`` bytes per input vertex of a batch held by another rank of
  the column; ``feature_fetch``: ``f_0 s + l`` bytes (features and label) back for each,
  sparse features ``nnz_v (4 + s) + l`` (column indices, values, label), with ``l = 8``
  for a class id (int64) and ``l = C`` for a multi-label row (``C`` uint8 entries,
  ``--loss bce``);
  ``control``: ``8 (q - 1)`` per rank (the request's counts);
* ``allreduce``: the fused weight gradients over the ``P`` ranks.

Per hop of a bulk in the graph-partitioned layout (:mod:`hpcgnn.sampling.spgemm_1p5d`):
see :func:`charge_sampling`. :func:`seconds` turns the bytes and message counts
into an alpha-beta time per category (:class:`hpcgnn.cost.machine.Link`).
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hpcgnn.cost.estimate import allreduce_share
from hpcgnn.cost.machine import Link

CONTROL = "control"
ALLREDUCE = "allreduce"
FEATURE_REQUEST = "feature_request"
FEATURE_FETCH = "feature_fetch"
SAMPLE_FRONTIER = "sample_frontier"
SAMPLE_REQUEST = "sample_request"
SAMPLE_ROWS = "sample_rows"
SAMPLE_COMBINE = "sample_combine"
#: LADIES' partial products of ``P = Q (S .* S)`` reduced over the process row
#: (``--ladies-reduction partial-products``, :func:`charge_partial_products`).
SAMPLE_PARTIAL = "sample_partial_products"
#: Every category minibatch training records.
CATEGORIES = (CONTROL, ALLREDUCE, FEATURE_REQUEST, FEATURE_FETCH, SAMPLE_FRONTIER,
              SAMPLE_REQUEST, SAMPLE_ROWS, SAMPLE_COMBINE, SAMPLE_PARTIAL)
#: Index bytes of one id (int64) and of one label (a class id).
ID_BYTES = 8
#: Bytes of one computed value (float64) of a partial product of ``P = Q (S .* S)``.
VALUE_BYTES = 8


def pickled_bytes(value: int) -> int:
    """Bytes :meth:`hpcgnn.comm.Comm.allgather_obj` records for an ``int`` from one peer."""
    return len(pickle.dumps(int(value), protocol=pickle.HIGHEST_PROTOCOL))


def log_steps(p: int) -> int:
    """Latency steps of a tree or recursive-doubling collective over ``p`` ranks."""
    return math.ceil(math.log2(p)) if p > 1 else 0


@dataclass(frozen=True)
class Members:
    """A communicator seen by the cost model: its ranks' world ranks and this rank's index."""

    world: np.ndarray
    me: int

    @property
    def size(self) -> int:
        """Ranks of the communicator."""
        return len(self.world)

    @property
    def world_rank(self) -> int:
        """This rank's world rank."""
        return int(self.world[self.me])

    def others(self) -> np.ndarray:
        """World ranks of the other members."""
        return np.delete(self.world, self.me)


@dataclass
class Traffic:
    """What this rank's calls make every world rank receive, per category (accumulated).

    Attributes
    ----------
    received
        ``{category: int64 array over world ranks}``: bytes this rank's share of the
        calls makes each rank record. Summing it over ranks gives what each rank records.
    messages
        ``{category: latency terms}`` of this rank's calls.

    """

    size: int
    received: dict[str, np.ndarray] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)

    def charge(self, category: str, receivers: np.ndarray | int, nbytes: np.ndarray | int,
               messages: int = 0) -> None:
        """Add ``nbytes`` received by ``receivers`` (world ranks) in ``category``."""
        arr = self.received.setdefault(category, np.zeros(self.size, dtype=np.int64))
        np.add.at(arr, np.asarray(receivers, dtype=np.int64), np.asarray(nbytes, dtype=np.int64))
        self.messages[category] = self.messages.get(category, 0) + messages

    def alltoallv(self, comm: Members, rows_to: np.ndarray, row_bytes: int, category: str,
                  counts_known: bool) -> None:
        """An all-to-all(v) sending ``rows_to[k]`` rows of ``row_bytes`` to member ``k``."""
        rows = np.delete(np.asarray(rows_to, dtype=np.int64), comm.me)
        self.charge(category, comm.others(), rows * row_bytes, comm.size - 1)
        if not counts_known:
            self.charge(CONTROL, comm.world_rank, ID_BYTES * (comm.size - 1), comm.size - 1)

    def receive(self, comm: Members, nbytes: int, category: str) -> None:
        """This rank receives ``nbytes`` in one call over ``comm`` (the senders' side is known)."""
        self.charge(category, comm.world_rank, nbytes, comm.size - 1)

    def allgatherv(self, comm: Members, nbytes: int, category: str) -> None:
        """This rank contributes ``nbytes`` to an all-gather over ``comm``."""
        self.charge(category, comm.others(), np.full(comm.size - 1, nbytes), log_steps(comm.size))

    def allgather_int(self, comm: Members, value: int, category: str = CONTROL) -> None:
        """This rank contributes the ``int`` ``value`` to an object all-gather."""
        self.allgatherv(comm, pickled_bytes(value), category)

    def allreduce(self, comm: Members, nbytes: int, category: str) -> None:
        """An all-reduce of ``nbytes`` over ``comm`` (this rank's own record)."""
        if comm.size > 1:
            share = int(allreduce_share(nbytes, comm.size))
            self.charge(category, comm.world_rank, share, 2 * log_steps(comm.size))



def charge_fetch(
    traffic: Traffic, col: Members, owners: np.ndarray, row_bytes: int,
    nonzeros: np.ndarray | None = None, index_bytes: int = 4, label_bytes: int = ID_BYTES,
) -> None:
    """One feature fetch in the process column: ids out, feature rows and labels back.

    ``owners`` are the column ranks holding the batch's input vertices. Dense features:
    ``row_bytes`` is one feature row (``f_0 s``); features and labels come back in two
    calls. Sparse features: ``nonzeros`` are the rows' nonzeros (a graph statistic) and
    ``row_bytes`` one value (``s``); the column indices (``index_bytes`` each), the values
    and the labels come back in three calls. ``label_bytes``: one vertex's label (a class
    id's 8, a multi-label row's ``C``).
    """
    owners = np.asarray(owners, dtype=np.int64)
    counts = np.bincount(owners, minlength=col.size)
    traffic.alltoallv(col, counts, ID_BYTES, FEATURE_REQUEST, counts_known=False)
    remote = int(counts.sum() - counts[col.me])
    if nonzeros is None:
        traffic.receive(col, remote * row_bytes, FEATURE_FETCH)
    else:
        nnz = int(np.asarray(nonzeros, dtype=np.int64)[owners != col.me].sum())
        traffic.receive(col, nnz * index_bytes, FEATURE_FETCH)
        traffic.receive(col, nnz * row_bytes, FEATURE_FETCH)
    traffic.receive(col, remote * label_bytes, FEATURE_FETCH)


def charge_gradients(traffic: Traffic, world: Members, nbytes: int) -> None:
    """The fused all-reduce of ``nbytes`` of weight gradients over all ranks (per step)."""
    traffic.allreduce(world, nbytes, ALLREDUCE)


def charge_sampling(
    traffic: Traffic, col: Members, row: Members, frontier: int,
    stages: Sequence[tuple[int, int, int]], parts: Sequence[tuple[int, int]],
) -> None:
    """One hop of the sparsity-aware 1.5D SpGEMM on rank ``(i, j)`` of the grid.

    1. The process row gathers its frontiers (the count, pickled, then ``8`` bytes per
       id): the column ids ``U_i`` of ``Q_i`` on every replica.
    2. Stage loop over the blocks ``k`` of chunk ``j`` (:func:`charge_stages`).
    3. Sparse all-reduce over the process row: every replica receives the lengths and
       column ids of the other replicas' partial products (the row ids are known).

    Parameters
    ----------
    traffic
        Where to charge.
    col, row
        This rank's process column and row.
    frontier
        Distinct frontier vertices of this rank's batches.
    stages
        Per stage of this process column's chunk: ``(k, rows, nonzeros)`` this rank
        requests from column rank ``k`` (nothing when it is ``k``, the stage's root).
    parts
        Per replica of the process row: ``(rows, nonzeros)`` of its partial product.
    """
    traffic.allgather_int(row, frontier)
    traffic.allgatherv(row, ID_BYTES * frontier, SAMPLE_FRONTIER)
    charge_stages(traffic, col, stages)
    others = sum(r + n for q, (r, n) in enumerate(parts) if q != row.me)
    traffic.charge(SAMPLE_COMBINE, row.world_rank, ID_BYTES * others, 2 * log_steps(row.size))


def charge_stages(traffic: Traffic, col: Members, stages: Sequence[tuple[int, int, int]]
                  ) -> None:
    """The stage loop of one hop: rows of ``S`` fetched from the process column.

    At stage ``k`` rank ``k`` of the process column gathers the requests (``8`` bytes of
    ``control`` and ``8`` per id from every other rank) and scatters back the rows'
    lengths and column ids (``8`` bytes per row and per nonzero). ``stages``: as in
    :func:`charge_sampling`.
    """
    steps = log_steps(col.size)
    for k, rows, nnz in stages:
        root = k == col.me
        traffic.charge(CONTROL, col.world[k], 0 if root else ID_BYTES, steps)
        traffic.charge(SAMPLE_REQUEST, col.world[k], 0 if root else ID_BYTES * rows, steps)
        traffic.charge(SAMPLE_ROWS, col.world_rank, 0 if root else ID_BYTES * (rows + nnz),
                       2 * steps)


def charge_stacked_frontier(traffic: Traffic, row: Members, batches: int, ids: int) -> None:
    """The process row gathers its batches' frontiers whole: ``Q_i`` on every replica.

    The paper's layout (``--ladies-reduction partial-products``): the batch count
    (pickled), then ``8`` bytes per batch (its frontier's length) and per frontier id.
    """
    traffic.allgather_int(row, batches)
    traffic.allgatherv(row, ID_BYTES * batches, SAMPLE_FRONTIER)
    traffic.allgatherv(row, ID_BYTES * ids, SAMPLE_FRONTIER)


def charge_partial_products(traffic: Traffic, row: Members, running: int,
                            scattered: Sequence[int]) -> None:
    """This replica's share of the reduction of LADIES' partial products of ``P``.

    The reduction is a chain in the order of the process row (:meth:`hpcgnn.sampling.
    spgemm_1p5d.SparsityAwareRows.distributions`): replica ``q < c - 1`` sends the running
    sum of the partial products of replicas ``0..q``, ``running`` nonzeros, to ``q + 1``
    (its count, ``8`` bytes of ``control``, then ``16`` bytes per nonzero: an int64 key
    ``b n + j``, batch row and column, and a float64 value); the last replica scatters
    each replica's batches' rows of ``P`` (``scattered[r]`` nonzeros to replica ``r``:
    ``8`` bytes of ``control`` and ``16`` per nonzero to each other replica).
    """
    entry = ID_BYTES + VALUE_BYTES
    if row.size == 1:
        return
    if row.me < row.size - 1:
        nxt = row.world[row.me + 1]
        traffic.charge(CONTROL, nxt, ID_BYTES, 1)
        traffic.charge(SAMPLE_PARTIAL, nxt, entry * int(running), 1)
        return
    counts = np.delete(np.asarray(scattered, dtype=np.int64), row.me)
    steps = log_steps(row.size)
    traffic.charge(CONTROL, row.others(), np.full(row.size - 1, ID_BYTES), steps)
    traffic.charge(SAMPLE_PARTIAL, row.others(), entry * counts, 2 * steps)


def partial_product_bytes(nonzeros: np.ndarray, present: np.ndarray) -> int:
    """What the paper's all-reduce of ``P = Q (S .* S)``'s partial products would move.

    LADIES' ``P`` has one row per batch; on a ``(P/c) x c`` grid replica ``q`` of a process
    row sums, over the rows of ``S`` in its stage chunk, a partial product whose row ``b``
    holds the union of the column ids of the rows of ``F_b`` it owns, with computed values.
    The sparse all-reduce is charged as an all-gather of every partial product to the
    ``c - 1`` other replicas (every replica ends with all of ``P_i``, as in the paper): per
    partial row its length (``8`` bytes) and per nonzero an int64 column id and a float64
    value (``16`` bytes). A replica whose chunk holds no remote block has no partial
    product and sends nothing (its rows of the process row's own block are local to every
    replica, as in :func:`charge_sampling`).

    Parameters
    ----------
    nonzeros
        ``(c, K)``: the nonzeros of row ``b`` of replica ``q``'s partial product, for the
        ``K`` batches this rank samples.
    present
        ``(c,)`` booleans: replica ``q`` has a partial product (its stage chunk holds a
        block other than the process row's own).

    Returns
    -------
    int
        Bytes all replicas of the process row would receive for this rank's batches' rows
        (summed over ranks, the all-reduce's whole volume).
    """
    nonzeros = np.asarray(nonzeros, dtype=np.int64)
    present = np.asarray(present, dtype=bool)
    c, k = nonzeros.shape
    rows = ID_BYTES * k * int(present.sum())
    entries = (ID_BYTES + VALUE_BYTES) * int(nonzeros[present].sum())
    return (c - 1) * (rows + entries)


def paper_spgemm_words(procs: int, replication: int, nnz: float) -> float:
    """The paper's closed-form bandwidth of the sparsity-aware 1.5D SpGEMM, words per process.

    Tripathy, Yelick and Buluç (MLSys 2024), Section 5.2.1 ("Communication Analysis" of
    Algorithm 2, generating the probability distributions ``Q S``) on a ``(P/c) x c`` grid,
    with ``b`` seeds per batch, ``k`` batches per bulk and ``d`` nonzeros per row of ``S``:

    * the stage loop: ``P / c^2`` stages run one after another in a process column, and at
      each the root sends the ``b k c / P`` rows its column peers need, ``d`` nonzeros each:
      ``T_rows = beta b k d / c``;
    * the all-reduce over the process row of the ``c`` partial products of ``Q_i S``, each of
      ``b k d c / P`` nonzeros: ``T_allreduce = beta b k d c / P``;
    * the gather of the requested column ids (``beta b k / c``) the paper calls negligible
      beside the row data and leaves out of the total.

    So ``T = beta b k d (1/c + c/P) = beta 2 b k d / H(c, P/c)``, ``H`` the harmonic mean of
    ``c`` and ``P/c``. With ``nnz`` for ``b k d`` (the nonzeros of the rows of ``S`` that ``Q``
    selects), the words are ``nnz (1/c + c/P)``: per process, on the critical path (the
    stages of a column serialise), not a volume summed over ranks.

    Parameters
    ----------
    procs
        ``P``, the ranks.
    replication
        ``c``, the replicas of a block row (``P / c`` process rows).
    nnz
        ``b k d``: the nonzeros of the selected rows of ``S`` over all process rows.

    Returns
    -------
    float
        ``nnz (1/c + c/P)``.
    """
    if procs < 1 or replication < 1 or procs % replication:
        raise ValueError(f"no (P/c) x c grid for P={procs}, c={replication}")
    return nnz * (1 / replication + replication / procs)


def spgemm_bytes_per_process(procs: int, replication: int, rows: float, combine: float
                             ) -> float:
    """Our measured SpGEMM bytes in the accounting of :func:`paper_spgemm_words`.

    The stage loop's critical path, averaged over the ``c`` process columns (a column's
    ``sample_rows``: the bytes its stages' roots send), plus the bytes a rank receives in
    the process row's all-reduce, averaged over the ``P`` ranks: ``rows / c + combine / P``
    for ``rows``, ``combine`` the ``sample_rows`` and ``sample_combine`` bytes summed over
    ranks.
    """
    return rows / replication + combine / procs


def seconds(busiest: dict[str, float], messages: dict[str, float], link: Link
            ) -> dict[str, float]:
    """Alpha-beta seconds per category: ``alpha * messages + beta * busiest-rank bytes``."""
    return {c: link.alpha * messages.get(c, 0) + link.beta * b for c, b in busiest.items()}
