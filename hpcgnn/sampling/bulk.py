"""Bulk sampling: ``K`` minibatches stacked into one SpGEMM per hop, on one rank or many.

:func:`sample_stack` samples a list of batches with any source of rows of ``S`` (the
whole matrix, or a collective sparsity-aware fetch). :class:`BulkSampler` holds a rank's
share of the graph in one of two layouts on a ``(P/c) x c`` process grid:

- ``replicated``: every rank reads the whole pattern of ``S`` once (about ``8 (n + nnz)``
  bytes per rank) and samples its batches with no communication;
- ``partitioned``: process row ``i`` reads block row ``i`` of ``S`` (replicated on its
  ``c`` ranks) and rows of other blocks are fetched per hop by the sparsity-aware 1.5D
  SpGEMM of :mod:`hpcgnn.sampling.spgemm_1p5d`.

The batches of a bulk are split into ``P`` contiguous near-equal chunks, chunk ``r`` to
world rank ``r`` (so process row ``i`` gets the consecutive chunks of its ``c`` ranks).
Random numbers depend on (seed, epoch, batch id, hop, vertex), never on the rank, the
bulk or the layout, so every batch's sample is the same in every configuration.

The rows of ``S`` are fetched once per hop for the whole stack, but the local SpGEMM,
sampling and extraction run on chunks of whole batches whose entries (frontier rows plus
nonzeros of their rows of ``S``: the size of ``P = Q S`` and of every temporary of a
hop, see :func:`stack_entries`) fit a memory budget (:class:`Chunking`,
``--sample-memory``): on the host :data:`MAX_STACK_ENTRIES` entries, beyond which the
temporaries are fresh memory every hop (page faults on first touch, then cache misses):
on a 100K-vertex graph, batch 1024, fanout 10,5, an unchunked bulk 32 sampled at 0.70x
of bulk 1's rate, and at 1.0x with ``MALLOC_MMAP_THRESHOLD_`` keeping freed memory in the
process, so the slowdown was the working set, not the arithmetic; on a GPU a share of its
free memory, so a bulk is one SpGEMM per hop wherever it fits. Chunking caps the working
set whatever the graph's degrees and the batch size; it changes no sample and no message
(the rows are still fetched once per hop for the whole stack).

With every row at hand (the replicated layout), :func:`sample_depth_first` takes each
chunk down to the last hop before sampling the hop's next chunk, and
:meth:`BulkSampler.sample` returns a :class:`~hpcgnn.sampling.lazy.LazyShare` that samples
those groups of finished batches as the consumer reads them and releases each when it
moves on. A bulk then holds one group's samples, not all ``K`` batches' (about 6 MB per
batch at batch 4096, fanout 10,5: an eager bulk 32 ran at 0.99x of bulk 1 for that
alone), and small batches still stack the whole bulk. The partitioned layout samples its
share eagerly: its rows are fetched collectively per hop for the whole stack.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from hpcgnn.comm.collective import collective
from hpcgnn.cost.minibatch import Traffic
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphFile
from hpcgnn.layout.blocks import even_offsets, vertex_offsets
from hpcgnn.sampling import ladies, sage, setops
from hpcgnn.sampling.arrays import Array, HostOps
from hpcgnn.sampling.clusters import Clusters, cluster_parts, induced_batches
from hpcgnn.sampling.lazy import LazyShare
from hpcgnn.sampling.matrices import Csr
from hpcgnn.sampling.memory import BYTES_PER_ENTRY, MAX_STACK_ENTRIES, default_budget
from hpcgnn.sampling.rows import RowStore, read_pattern
from hpcgnn.sampling.sampled import SampledBatch, SampledHop, split_stacked, stack
from hpcgnn.sampling.shuffle import epoch_key, minibatches
from hpcgnn.sampling.spec import LADIES_REDUCTIONS, LAYOUTS, SamplerSpec, with_clusters
from hpcgnn.sampling.spgemm_1p5d import SparsityAwareRows

RowSource = Callable[[np.ndarray], RowStore]
#: Sees each hop's stacked frontier ``(ptr, ids)`` and the rows of ``S`` fetched for it.
HopObserver = Callable[[Array, Array, RowStore], None]
#: LADIES' ``P = Q (S .* S)`` of a hop's stacked frontier ``(ptr, ids)``, computed elsewhere.
DistributionSource = Callable[[Array, Array], Csr]

@dataclass
class Chunking:
    """How a stack's hops are cut into local SpGEMMs, and how many there were.

    ``budget``: bytes of a hop's temporaries (``--sample-memory``), ``None`` for the
    :data:`MAX_STACK_ENTRIES` entries of the host. Counts the hops of stacks
    (:attr:`hops`) and the chunks they were sampled in (:attr:`chunks`).
    """

    budget: float | None = None
    hops: int = 0
    chunks: int = 0

    @property
    def limit(self) -> int:
        """Most entries of one chunk (:func:`chunk_batches`)."""
        if self.budget is None:
            return MAX_STACK_ENTRIES
        return max(1, int(self.budget // BYTES_PER_ENTRY))

    def spans(self, ptr: np.ndarray) -> list[tuple[int, int]]:
        """:func:`chunk_batches` of ``ptr`` under :attr:`limit`, counted."""
        out = chunk_batches(ptr, self.limit)
        self.hops += 1
        self.chunks += len(out)
        return out


def stack_entries(fr_ptr: Array, fr_ids: Array, store: RowStore) -> np.ndarray:
    """Cumulative entries per stacked batch: its frontier rows plus their nonzeros of ``S``.

    The size of the batch's share of ``P = Q S`` (sage) or of the row extraction ``R S``
    (ladies), the largest temporaries of a hop; a pointer for :func:`chunk_batches`, on
    the host.
    """
    xp = store.xp
    return xp.to_host(xp.ptr(1 + store.lengths(fr_ids))[fr_ptr])


def chunk_batches(ptr: np.ndarray, limit: int | None = None) -> list[tuple[int, int]]:
    """Consecutive batch ranges ``[lo, hi)`` of at most ``limit`` entries (at least one batch).

    ``ptr`` is a cumulative size per stacked batch (:func:`stack_entries`); ``limit``
    defaults to :data:`MAX_STACK_ENTRIES`.
    """
    limit = MAX_STACK_ENTRIES if limit is None else limit
    out, lo = [], 0
    nb = len(ptr) - 1
    while lo < nb:
        hi = int(np.searchsorted(ptr, ptr[lo] + limit, side="right")) - 1
        hi = min(max(hi, lo + 1), nb)
        out.append((lo, hi))
        lo = hi
    return out


def _chunk_hop(
    spec: SamplerSpec, key: np.uint64, hop: int, span: tuple[int, int],
    bids: Array, seeds: tuple[Array, Array], frontier: tuple[Array, Array], store: RowStore,
    p: Csr | None = None,
) -> tuple[list[SampledHop], Array, Array]:
    """Hop ``hop`` of the stacked batches ``span = (lo, hi)``: per batch, and the next frontier.

    ``seeds`` and ``frontier`` are the whole stack's ``(ptr, ids)``; returns the batches'
    :class:`SampledHop` and their stacked columns ``(col_ptr, cols)``. ``p``: LADIES'
    ``P`` of the whole stack when it was computed elsewhere (one row per batch).
    """
    lo, hi = span
    fr_ptr, fr_ids = frontier
    a, b = fr_ptr[lo], fr_ptr[hi]
    ptr, ids = fr_ptr[lo : hi + 1] - a, fr_ids[a:b]
    if spec.method.node_wise:
        st = sage.sample_hop(ptr, ids, bids[lo:hi], hop, spec.sizes[hop], store, key)
    else:
        seed_ptr, seed_ids = seeds
        s0, s1 = seed_ptr[lo], seed_ptr[hi]
        st = ladies.sample_hop(ptr, ids, seed_ptr[lo : hi + 1] - s0, seed_ids[s0:s1],
                               bids[lo:hi], hop, spec.sizes[hop], store, key, spec.self_rows,
                               None if p is None else p.row_slice(lo, hi))
    hops = split_stacked(st.row_ptr, st.rows, st.col_ptr, st.cols, st.indptr, st.indices,
                         st.values)
    return hops, st.col_ptr, st.cols


def _start(
    spec: SamplerSpec, epoch: int, batch_ids: list[int], seeds: list[np.ndarray]
) -> tuple[np.uint64, np.ndarray, list[np.ndarray]]:
    """The epoch key, the batch ids and the seeds as int64 arrays (on the host)."""
    purpose = spec.method.tag
    arrays = [np.asarray(s, dtype=np.int64) for s in seeds]
    if len(arrays) != len(batch_ids):
        raise ValueError(f"{len(batch_ids)} batch ids for {len(arrays)} seed arrays")
    return epoch_key(spec.seed, purpose, epoch), np.asarray(batch_ids, dtype=np.int64), arrays


def _on(xp: HostOps, ptr_ids: tuple[np.ndarray, np.ndarray]) -> tuple[Array, Array]:
    """A stack's ``(ptr, ids)`` where ``xp`` computes."""
    return xp.asarray(ptr_ids[0]), xp.asarray(ptr_ids[1])


def sample_stack(
    spec: SamplerSpec, epoch: int, batch_ids: list[int], seeds: list[np.ndarray],
    rows: RowSource, chunking: Chunking | None = None, observe: HopObserver | None = None,
    distributions: DistributionSource | None = None,
) -> list[SampledBatch]:
    """Sample the batches ``batch_ids`` (seed vertices ``seeds``) together, hop by hop.

    ``rows(ids)`` must return a :class:`RowStore` holding the rows ``ids`` of ``S`` (the
    stacked frontier: repeated and unsorted ids); it is called exactly ``spec.layers``
    times, also when there is no batch (so a collective source stays in step on every
    rank). The hops are sampled where the stores' arrays are (the host, or the sampling
    device: then the hops' arrays are tensors there), in chunks of ``chunking``'s size.
    ``observe(ptr, ids, store)``, if given, sees each hop's stacked frontier and its store.
    ``distributions(ptr, ids)``, if given (LADIES), gives each hop's ``P`` before ``rows``
    is called (collective too: called as ``rows`` is).
    """
    chunking = Chunking() if chunking is None else chunking
    key, bids, arrays = _start(spec, epoch, batch_ids, seeds)
    out = [SampledBatch(int(b), s) for b, s in zip(bids, arrays, strict=True)]
    seed = stack(arrays)
    fr_ptr, fr_ids = seed
    for hop in range(spec.layers):
        p = None if distributions is None else distributions(fr_ptr, fr_ids)
        store = rows(fr_ids)
        if observe is not None:
            observe(fr_ptr, fr_ids, store)
        if not out:
            continue
        if hop == 0:  # the stack where the store is
            xp = store.xp
            seed, bids = _on(xp, seed), xp.asarray(bids)
            fr_ptr, fr_ids = seed
        next_fr = []
        for span in chunking.spans(stack_entries(fr_ptr, fr_ids, store)):
            hops, col_ptr, cols = _chunk_hop(spec, key, hop, span, bids, seed,
                                             (fr_ptr, fr_ids), store, p)
            for batch, h in zip(out[span[0] : span[1]], hops, strict=True):
                batch.hops.append(h)
            next_fr.append((col_ptr, cols))
        if len(next_fr) == 1:  # one chunk: its next frontier is the stack's
            fr_ptr, fr_ids = next_fr[0]
        elif hop + 1 < spec.layers:  # the last hop's columns are no frontier
            fr_ptr = xp.ptr(xp.concat([xp.diff(ptr) for ptr, _ in next_fr]))
            fr_ids = xp.concat([cols for _, cols in next_fr])
    return out


def sample_depth_first(
    spec: SamplerSpec, epoch: int, batch_ids: list[int], seeds: list[np.ndarray],
    store: RowStore, chunking: Chunking | None = None,
) -> Iterator[list[SampledBatch]]:
    """:func:`sample_stack` with every row of ``S`` at hand, finishing a chunk before the next.

    Each hop's chunk (:func:`chunk_batches` of that hop's frontier) is taken down to the
    last hop before the hop's next chunk is sampled, and yielded then: consecutive
    finished batches, in order. The same samples as :func:`sample_stack` (the random
    numbers do not depend on the chunks), and while a consumer holds one yielded group
    only that group's samples and the earlier hops of its chunks are alive, not the
    whole stack's.
    """
    key, bids, arrays = _start(spec, epoch, batch_ids, seeds)
    xp = store.xp
    seed = _on(xp, stack(arrays))
    yield from _descend(spec, key, 0, xp.asarray(bids), arrays, seed, seed,
                        [[] for _ in arrays], store, Chunking() if chunking is None else chunking)


def _descend(
    spec: SamplerSpec, key: np.uint64, hop: int, bids: Array, seeds: list[np.ndarray],
    seed: tuple[Array, Array], frontier: tuple[Array, Array],
    done: list[list[SampledHop]], store: RowStore, chunking: Chunking,
) -> Iterator[list[SampledBatch]]:
    """Hops ``hop, hop+1, ...`` of a stack whose hops before ``hop`` are ``done``."""
    if hop == spec.layers:
        ids = store.xp.to_host(bids)
        yield [SampledBatch(int(b), s, d) for b, s, d in zip(ids, seeds, done, strict=True)]
        return
    seed_ptr, seed_ids = seed
    for lo, hi in chunking.spans(stack_entries(*frontier, store)):
        hops, col_ptr, cols = _chunk_hop(spec, key, hop, (lo, hi), bids, seed, frontier, store)
        s0, s1 = seed_ptr[lo], seed_ptr[hi]
        yield from _descend(
            spec, key, hop + 1, bids[lo:hi], seeds[lo:hi],
            (seed_ptr[lo : hi + 1] - s0, seed_ids[s0:s1]), (col_ptr, cols),
            [[*d, h] for d, h in zip(done[lo:hi], hops, strict=True)], store, chunking,
        )
        del hops, col_ptr, cols  # this chunk's samples go before the next is sampled


def sample_epoch_serial(
    spec: SamplerSpec, store: RowStore, train_ids: np.ndarray, epoch: int,
    max_batches: int | None = None,
) -> list[SampledBatch]:
    """Every batch of an epoch on one process, ``spec.bulk`` at a time (the reference)."""
    batches = minibatches(train_ids, spec.batch_size, spec.seed, epoch)[:max_batches]
    out: list[SampledBatch] = []
    for start in range(0, len(batches), spec.bulk):
        ids = list(range(start, min(start + spec.bulk, len(batches))))
        out += sample_stack(spec, epoch, ids, [batches[b] for b in ids], lambda _ids: store)
    return out


def my_share(num: int, size: int, rank: int) -> range:
    """The positions ``[lo, hi)`` of a bulk of ``num`` batches that world rank ``rank`` samples."""
    off = even_offsets(num, size)
    return range(int(off[rank]), int(off[rank + 1]))


def read_train_ids(path: str | os.PathLike) -> np.ndarray:
    """Sorted global ids of the training vertices (the whole mask, ``n`` bytes)."""
    with GraphFile(path) as gf:
        return np.flatnonzero(gf.read_mask("train", 0, gf.meta.num_nodes)).astype(np.int64)


class BulkSampler:
    """A rank's share of ``S`` in the chosen layout, and the bulk sampling driver.

    Parameters
    ----------
    spec
        What to sample.
    grid
        A ``1.5d`` (or ``1d``) process grid.
    path
        Graph file.
    layout
        ``"replicated"`` or ``"partitioned"``.
    traffic
        Where the partitioned layout's SpGEMM charges its bytes before moving them
        (:mod:`hpcgnn.cost.minibatch`); the replicated layout samples without messages.
    memory
        Bytes a hop's local temporaries may take (``--sample-memory``): a stack whose hop
        needs more is sampled in chunks of whole batches (:class:`Chunking`); default
        :func:`default_budget` (a share of the GPU's free memory, or the host's
        cache-sized stack).
    train_ids
        Sorted ids of the training vertices (default: read from ``path``).
    ladies_reduction
        LADIES in the partitioned layout (:data:`~hpcgnn.sampling.spec.LADIES_REDUCTIONS`):
        ``rows`` (default) all-gathers the fetched rows of ``S`` over the process row, which
        serve both ``P`` and the extraction; ``partial-products`` is the paper's way: ``P``'s
        partial products reduced over the process row
        (:meth:`SparsityAwareRows.distributions`), then the row extraction ``R S`` as a
        second 1.5D SpGEMM (the rows fetched again and all-gathered). The same samples.

    On a grid whose device is a GPU the hops are sampled there (:attr:`device` ``cuda``):
    the replicated layout keeps the whole pattern of ``S`` on the GPU, the partitioned one
    its block row, whose 1.5D SpGEMM serves and combines rows in device buffers through
    the communicator's wire; the sampled batches' arrays are tensors there. The samples
    are the host's bit for bit (:mod:`hpcgnn.sampling.arrays`).

    Attributes
    ----------
    offsets
        Vertex offsets of the ``P/c`` block rows (the file's partition when it has one).
    block
        This process row's rows ``[offsets[i], offsets[i+1])`` of ``S``.
    edges_sampled
        Sampled edges (all hops) of the batches this rank sampled so far.
    device
        Where the hops are sampled: ``cuda`` or ``cpu`` (the metrics' ``sampling.device``).
    chunking
        The budget of a hop's temporaries, and the hops and chunks sampled so far.
    clusters
        ``--sampler cluster``: the training vertices' METIS clusters (computed on world
        rank 0 from the training graph, broadcast); :attr:`spec` then counts the non-empty
        ones. ``None`` for the other samplers.

    """

    def __init__(
        self, spec: SamplerSpec, grid: ProcessGrid, path: str | os.PathLike, layout: str,
        traffic: Traffic | None = None, memory: float | None = None,
        train_ids: np.ndarray | None = None, ladies_reduction: str = LADIES_REDUCTIONS[0],
    ) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}")
        if ladies_reduction not in LADIES_REDUCTIONS:
            raise ValueError(f"unknown LADIES reduction {ladies_reduction!r}")
        #: ``--ladies-reduction``; :attr:`paper_reduction` where it applies.
        self.ladies_reduction = ladies_reduction
        #: ``partial-products`` on LADIES' partitioned hops: ``P`` reduced over the process
        #: row (the paper's).
        self.paper_reduction = (ladies_reduction != LADIES_REDUCTIONS[0]
                                and layout == "partitioned" and spec.method.layer_wise)
        self.spec, self.grid, self.layout = spec, grid, layout
        #: Where the hops are sampled: ``cuda`` (the grid's GPU) or ``cpu`` (the host).
        self.device = "cuda" if grid.device.is_cuda else "cpu"
        where = grid.device.torch_device if grid.device.is_cuda else None
        col = grid.col
        self.full: RowStore | None = None
        parts: np.ndarray | None = None
        with collective(grid.world), GraphFile(path) as gf:
            self.meta = meta = gf.meta
            self.train_ids = read_train_ids(path) if train_ids is None else train_ids
            self.offsets = vertex_offsets(meta.num_nodes, col.size, meta.partition_offsets)
            lo, hi = (int(v) for v in self.offsets[col.rank : col.rank + 2])
            full = None
            if layout == "replicated":
                full = read_pattern(gf, 0, meta.num_nodes, spec.method)
                ids = np.arange(lo, hi, dtype=np.int64)
                self.block = RowStore(ids, *full.take(ids), meta.num_nodes)
                self.full = full.on(where)  # the whole pattern where sampling runs
            else:
                self.block = read_pattern(gf, lo, hi, spec.method)
            if spec.method.induced and grid.rank == 0:  # METIS runs once, on rank 0
                graph = full if full is not None else read_pattern(
                    gf, 0, meta.num_nodes, spec.method
                )
                assert spec.clusters is not None
                parts = cluster_parts(graph, self.train_ids, spec.clusters, spec.seed)
            del full
        #: Cluster-GCN's clusters of the training vertices (``--sampler cluster``).
        self.clusters: Clusters | None = None
        if spec.method.induced:
            assert spec.clusters is not None
            got = np.empty(len(self.train_ids), np.int64) if parts is None else parts
            grid.world.bcast(got, 0, "control")
            self.clusters = Clusters.of_parts(self.train_ids, got, spec.clusters)
            # without the clusters METIS left empty
            self.spec = with_clusters(spec, self.clusters.count)
        self.rows_range = (lo, hi)
        free = grid.device.free_bytes() if grid.device.is_cuda else None
        self.chunking = Chunking(default_budget(free) if memory is None else float(memory))
        self.aware = None
        if layout == "partitioned":  # its rows fetched and combined where sampling runs
            self.aware = SparsityAwareRows(
                col, grid.row, self.block.on(where), self.offsets, grid.rank, traffic
            )
        self.edges_sampled = 0

    @property
    def bytes_oblivious(self) -> int:
        """Bytes this rank would have received by broadcasting whole blocks (0 if replicated)."""
        return 0 if self.aware is None else self.aware.bytes_oblivious

    @property
    def bytes_partial_products(self) -> int | None:
        """Bytes of the paper's all-reduce of LADIES' partial products so far.

        :attr:`SparsityAwareRows.bytes_partial_products`: measured with
        ``ladies_reduction="partial-products"``, else what it would have moved (counted);
        ``None`` unless a layer-wise sampler's hops are fetched across process rows (the
        partitioned layout, ``P/c > 1``).
        """
        if self.paper_reduction:
            assert self.aware is not None
            return self.aware.bytes_partial_products
        if self.aware is None or not self.spec.method.layer_wise or self.grid.col.size == 1:
            return None
        return self.aware.bytes_partial_products

    @property
    def spgemm_nnz(self) -> int | None:
        """Nonzeros of the rows of ``S`` the SpGEMM's hops selected so far (``None`` if replicated).

        :attr:`SparsityAwareRows.nnz_selected`: the paper's ``b k d``, summed over ranks.
        """
        return None if self.aware is None else self.aware.nnz_selected

    @property
    def bytes_control(self) -> int:
        """``control`` bytes this rank received in the SpGEMM's calls (0 if replicated)."""
        return 0 if self.aware is None else self.aware.bytes_control

    def batches(self, epoch: int) -> list[np.ndarray]:
        """The seed vertices of each minibatch of ``epoch`` (the same on every rank).

        The shuffled training set cut into ``batch_size`` seeds
        (:func:`~hpcgnn.sampling.shuffle.minibatches`), or Cluster-GCN's shuffled clusters
        ``clusters_per_batch`` at a time (:meth:`Clusters.batches`).
        """
        spec = self.spec
        if self.clusters is not None:
            assert spec.clusters_per_batch is not None
            return self.clusters.batches(spec.clusters_per_batch, spec.seed, epoch)
        return minibatches(self.train_ids, spec.batch_size, spec.seed, epoch)

    def sample(
        self, epoch: int, batches: list[np.ndarray], first: int
    ) -> Sequence[SampledBatch]:
        """Sample this rank's share of the bulk ``batches`` (global ids ``first, first+1, ...``).

        Sampling is timed as the grid's ``sample`` phase and counted in
        :attr:`edges_sampled`. Collective in the partitioned layout: every rank calls it
        for every bulk, and the share is sampled now. In the replicated layout the share is
        a :class:`LazyShare`: its batches are sampled a group of
        :func:`sample_depth_first` at a time when first indexed, and a group is released
        when a later one is read, so a large bulk holds no more samples than its
        working-set limit lets it stack. Read it in order (or iterate over it) to sample
        each batch once.
        """
        share = my_share(len(batches), self.grid.size, self.grid.rank)
        ids, seeds = [first + i for i in share], [batches[i] for i in share]
        if self.clusters is not None:
            with self.grid.stats.phase("sample"):
                out = self._induced(ids, seeds)
            self._count(out)
            return out
        if self.aware is not None:
            aware = self.aware
            hops: list[tuple[Array, Array, RowStore]] = []
            count = self.bytes_partial_products is not None and not self.paper_reduction
            with self.grid.stats.phase("sample"):
                out = sample_stack(
                    self.spec, epoch, ids, seeds, lambda f: aware(setops.unique(f)),
                    self.chunking, (lambda *h: hops.append(h)) if count else None,
                    aware.distributions if self.paper_reduction else None,
                )
            for hop in hops:  # counted outside the sample phase: no message, not sampling
                aware.count_partial_products(*hop)
            self._count(out)
            return out
        full = self.full
        assert full is not None

        def groups(start: int) -> Iterator[list[SampledBatch]]:
            it = sample_depth_first(self.spec, epoch, ids[start:], seeds[start:], full,
                                    self.chunking)
            while True:
                with self.grid.stats.phase("sample"):
                    group = next(it, None)
                if group is None:
                    return
                yield group
                del group  # released before the next group is sampled

        return LazyShare(len(ids), groups, self._count)

    def _induced(self, ids: list[int], sets: list[np.ndarray]) -> list[SampledBatch]:
        """Cluster-GCN's batches ``ids`` (vertex sets ``sets``): their induced subgraphs.

        The partitioned layout fetches the rows of every set's vertices at once (collective:
        every rank calls it for every bulk).
        """
        ptr, stacked = stack(sets)
        if self.aware is None:
            assert self.full is not None
            store = self.full
        else:
            store = self.aware(setops.unique(stacked))
        if not sets:
            return []
        on = _on(store.xp, (ptr, stacked))
        spans = self.chunking.spans(stack_entries(*on, store))
        return induced_batches(ids, sets, store, self.spec.layers, spans, on)

    def _count(self, batches: list[SampledBatch]) -> None:
        self.edges_sampled += sum(b.nnz for b in batches)
