import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from hpcgnn.cost.minibatch import CATEGORIES, CONTROL
from hpcgnn.grid import ProcessGrid
from hpcgnn.io import GraphFile
from hpcgnn.layout.blocks import stage_chunks
from hpcgnn.layout.shapes import admissible_shapes
from hpcgnn.sampling.bulk import BulkSampler, my_share, read_train_ids, sample_epoch_serial
from hpcgnn.sampling.rows import read_pattern
from hpcgnn.sampling.shuffle import minibatches
from hpcgnn.sampling.spec import LADIES_REDUCTIONS, SamplerSpec
from hpcgnn.sampling.spgemm_1p5d import byte_summary
from tests.mpi import assert_all
from tests.sampling import same_batches

SPECS = [SamplerSpec("sage", (3, 2), batch_size=8, bulk=3, seed=5),
         SamplerSpec("ladies", (10, 6), batch_size=8, bulk=3, seed=5)]


def serial_reference(path, spec, epoch):
    with GraphFile(path) as gf:
        store = read_pattern(gf, 0, gf.meta.num_nodes, spec.method)
    return sample_epoch_serial(spec, store, read_train_ids(path), epoch)


def sample_all(sampler, spec, path, epoch):
    batches = minibatches(read_train_ids(path), spec.batch_size, spec.seed, epoch)
    mine = []
    for first in range(0, len(batches), spec.bulk):
        mine += sampler.sample(epoch, batches[first : first + spec.bulk], first)
    every = sampler.grid.world.allgather_obj(mine)
    return sorted((b for part in every for b in part), key=lambda b: b.batch)


@pytest.mark.mpi
@pytest.mark.parametrize("spec", SPECS, ids=["sage", "ladies"])
@pytest.mark.parametrize("directed", [False, True])
def test_layouts_and_grids_give_the_serial_samples(graph_file, world, spec, directed):
    path = graph_file(n=150, avg_degree=6, directed=directed, seed=3)
    reference = serial_reference(path, spec, epoch=1)
    for shape in admissible_shapes("1.5d", world.size):
        for layout in ("replicated", "partitioned"):
            with ProcessGrid(MPI.COMM_WORLD, shape) as grid:
                sampler = BulkSampler(spec, grid, path, layout)
                got = sample_all(sampler, spec, path, epoch=1)
                assert_all(world, same_batches(got, reference), f"{layout} on {shape}")
                edges = grid.world.allreduce_scalar(sampler.edges_sampled)
                assert_all(world, edges == sum(b.nnz for b in reference))


@pytest.mark.mpi
def test_sparsity_aware_sends_fewer_bytes_than_oblivious(graph_file, world):
    path = graph_file(n=600, avg_degree=4, seed=4)
    spec = SamplerSpec("sage", (2, 2), batch_size=4, bulk=2, seed=1)
    with ProcessGrid.create(MPI.COMM_WORLD, "1.5d", replication=1) as grid:
        sampler = BulkSampler(spec, grid, path, "partitioned")
        batches = minibatches(read_train_ids(path), spec.batch_size, spec.seed, 0)[:8]
        for first in range(0, len(batches), spec.bulk):
            sampler.sample(0, batches[first : first + spec.bulk], first)
        cats = grid.stats.snapshot()
        aware = sum(cats.get(c, {}).get("bytes", 0) for c in ("sample_request", "sample_rows"))
        aware = grid.world.allreduce_scalar(int(aware))
        oblivious = grid.world.allreduce_scalar(sampler.bytes_oblivious)
        if world.size == 1:
            assert_all(world, aware == 0 and oblivious == 0)
        else:
            assert_all(world, 0 < aware < oblivious, f"aware {aware} oblivious {oblivious}")


@pytest.mark.mpi
@pytest.mark.parametrize("spec", SPECS, ids=["sage", "ladies"])
def test_byte_summary_counts_every_byte_the_sampler_moves(graph_file, world, spec):
    path = graph_file(n=300, avg_degree=5, seed=6)
    for shape in admissible_shapes("1.5d", world.size):
        with ProcessGrid(MPI.COMM_WORLD, shape) as grid:
            sampler = BulkSampler(spec, grid, path, "partitioned")
            batches = minibatches(read_train_ids(path), spec.batch_size, spec.seed, 0)
            grid.stats.reset()
            for first in range(0, len(batches), spec.bulk):
                sampler.sample(0, batches[first : first + spec.bulk], first)
            moved = grid.world.allreduce_scalar(int(grid.stats.total_bytes()))
            s = byte_summary(grid.world, grid.stats, sampler.bytes_oblivious,
                             sampler.bytes_control)
            ours = s["bytes_sparsity_aware"] + s["bytes_row_combine"] + s["bytes_sampling_control"]
            assert_all(world, ours == moved, f"{shape}: counted {ours} of {moved} bytes")
            if s["bytes_sparsity_aware"]:
                assert_all(world, s["oblivious_over_aware"] == s["bytes_oblivious"] / ours)


def paper_partial_bytes(path, spec, grid, offsets, epoch):
    """The paper's all-reduce of LADIES' partial products, from the serial samples (SciPy).

    Per batch, hop and replica ``q`` of the batch owner's process row ``i`` whose stage
    chunk holds blocks other than ``i``: the union of the columns of the rows of ``F_b`` in
    those blocks, sent to the ``c - 1`` other replicas (8 bytes per row, 16 per entry).
    """
    with GraphFile(path) as gf:
        store = read_pattern(gf, 0, gf.meta.num_nodes, spec.method)
    s = sp.csr_matrix((np.ones(store.nnz), store.indices, store.indptr))
    reference = serial_reference(path, spec, epoch)
    where = grid.world.allgather_obj((grid.col.rank, grid.row.rank))  # (i, j) per world rank
    rows, c = grid.col.size, grid.row.size
    chunks = stage_chunks(rows, c)
    block_of = np.searchsorted(offsets, np.arange(store.num_nodes), side="right") - 1
    total = 0
    for first in range(0, len(reference), spec.bulk):
        bulk = reference[first : first + spec.bulk]
        for rank in range(grid.size):
            i, _ = where[rank]
            for pos in my_share(len(bulk), grid.size, rank):
                for hop in bulk[pos].hops:
                    f = np.asarray(hop.rows)
                    for q in range(c):
                        blocks = [k for k in range(chunks[q], chunks[q + 1]) if k != i]
                        if blocks:
                            cols = s[f[np.isin(block_of[f], blocks)]].indices
                            total += (c - 1) * (8 + 16 * len(np.unique(cols)))
    return total


@pytest.mark.mpi
@pytest.mark.parametrize("spec", SPECS, ids=["sage", "ladies"])
def test_partial_products_counted_for_ladies_across_process_rows(graph_file, world, spec):
    path = graph_file(n=200, avg_degree=5, seed=8)
    for shape in admissible_shapes("1.5d", world.size):
        for layout in ("replicated", "partitioned"):
            with ProcessGrid(MPI.COMM_WORLD, shape) as grid:
                sampler = BulkSampler(spec, grid, path, layout)
                sample_all(sampler, spec, path, epoch=2)
                s = byte_summary(grid.world, grid.stats, sampler.bytes_oblivious,
                                 sampler.bytes_control, sampler.bytes_partial_products)
                got = s["bytes_partial_products"]
                if spec.sampler != "ladies" or layout == "replicated" or shape.dims[0] == 1:
                    assert got is None, f"{layout} on {shape}: {got}"
                    continue
                want = paper_partial_bytes(path, spec, grid, sampler.offsets, epoch=2)
                assert got == want, f"{shape}: {got} != {want}"
                assert (got > 0) == (shape.replication > 1)  # one replica: nothing to all-reduce


def paper_chain_bytes(path, spec, grid, offsets, epoch):
    """The chained reduction of LADIES' partial products of ``P``, from the serial samples.

    Per bulk, hop and process row: replica ``q < c - 1`` sends the running sum over the
    vertices of the chunks ``0..q`` (SciPy's union of their rows' columns per batch) to
    ``q + 1``, and the last replica scatters the other replicas' rows of ``P``; 16 bytes per
    entry (an int64 key and a float64 value).
    """
    with GraphFile(path) as gf:
        store = read_pattern(gf, 0, gf.meta.num_nodes, spec.method)
    s = sp.csr_matrix((np.ones(store.nnz), store.indices, store.indptr))
    reference = serial_reference(path, spec, epoch)
    where = grid.world.allgather_obj((grid.col.rank, grid.row.rank))  # (i, j) per world rank
    c = grid.row.size
    chunks = stage_chunks(grid.col.size, c)
    total = 0
    for first in range(0, len(reference), spec.bulk):
        bulk = reference[first : first + spec.bulk]
        for i in range(grid.col.size):
            row = [r for _, r in sorted((where[r][1], r) for r in range(grid.size)
                                        if where[r][0] == i)]
            for hop in range(spec.layers):
                frontiers = [[np.asarray(bulk[pos].hops[hop].rows) for pos in
                              my_share(len(bulk), grid.size, r)] for r in row]
                for q in range(c - 1):
                    upto = offsets[chunks[q + 1]]
                    total += 16 * sum(len(np.unique(s[f[f < upto]].indices))
                                      for fs in frontiers for f in fs)
                    total += 16 * sum(len(np.unique(s[f].indices)) for f in frontiers[q])
    return total


@pytest.mark.mpi
def test_the_papers_ladies_reduction_samples_the_same_and_measures_its_bytes(graph_file, world):
    spec = SPECS[1]
    path = graph_file(n=200, avg_degree=5, seed=8)
    reference = serial_reference(path, spec, epoch=2)
    for shape in admissible_shapes("1.5d", world.size):
        measured = {}
        for reduction in LADIES_REDUCTIONS:
            with ProcessGrid(MPI.COMM_WORLD, shape) as grid:
                sampler = BulkSampler(spec, grid, path, "partitioned", ladies_reduction=reduction)
                grid.stats.reset()
                got = sample_all(sampler, spec, path, epoch=2)
                where = f"{reduction} on {shape}"
                assert_all(world, same_batches(got, reference), where)
                cats, charged = grid.stats.snapshot(), sampler.aware.traffic.received
                moved = {k: grid.world.allreduce_scalar(int(cats.get(k, {}).get("bytes", 0)))
                         for k in CATEGORIES if k != CONTROL}
                predicted = {k: grid.world.allreduce_scalar(int(charged[k].sum()) if k in charged
                                                            else 0) for k in moved}
                assert_all(world, moved == predicted, f"{where}: {moved} != {predicted}")
                measured[reduction] = moved
                if reduction == "partial-products":
                    want = paper_chain_bytes(path, spec, grid, sampler.offsets, epoch=2)
                    partial = moved["sample_partial_products"]
                    assert_all(world, partial == want, f"{where}: {partial} != {want}")
                    total = grid.world.allreduce_scalar(sampler.bytes_partial_products)
                    assert_all(world, total == partial)
                    # beside the paper's closed form: P's SpGEMM alone, its fetch and the
                    # reduction of its partial products
                    s = byte_summary(grid.world, grid.stats, sampler.bytes_oblivious,
                                     sampler.bytes_control, sampler.bytes_partial_products,
                                     sampler.spgemm_nnz, shape.replication, True)
                    half, p, c = moved["sample_rows"] / 2, shape.size, shape.replication
                    assert_all(world, s["measured_spgemm_bytes"] == half / c + partial / p)
                    assert_all(world, (partial > 0) == (shape.replication > 1))
        rows, paper = measured["rows"], measured["partial-products"]
        # the paper's row extraction R S is a second SpGEMM: the same rows fetched again and
        # all-gathered (our row all-gather); ours serves P and R S from one fetch
        for k in ("sample_request", "sample_rows"):
            assert_all(world, paper[k] == 2 * rows[k], f"{shape} {k}")
        assert_all(world, paper["sample_combine"] == rows["sample_combine"])
        assert_all(world, rows["sample_partial_products"] == 0)


def selected_nnz(path, spec, grid, epoch):
    """The paper's ``b k d`` from the serial samples: per bulk, hop and process row ``i``,
    the nonzeros of the rows of ``S`` at the union of the frontiers of row ``i``'s ranks."""
    with GraphFile(path) as gf:
        lengths = np.diff(read_pattern(gf, 0, gf.meta.num_nodes, spec.method).indptr)
    reference = serial_reference(path, spec, epoch)
    row_of = grid.world.allgather_obj(grid.col.rank)  # process row of each world rank
    total = 0
    for first in range(0, len(reference), spec.bulk):
        bulk = reference[first : first + spec.bulk]
        for i in range(grid.col.size):
            mine = [bulk[pos] for rank in range(grid.size) if row_of[rank] == i
                    for pos in my_share(len(bulk), grid.size, rank)]
            for hop in range(len(reference[0].hops)):
                frontier = [np.asarray(b.hops[hop].rows, dtype=np.int64) for b in mine]
                total += int(lengths[np.unique(np.concatenate([[], *frontier]).astype(
                    np.int64))].sum())
    return total


@pytest.mark.mpi
@pytest.mark.parametrize("spec", SPECS, ids=["sage", "ladies"])
def test_paper_closed_form_on_the_selected_nonzeros_beside_the_measured(graph_file, world,
                                                                       spec):
    path = graph_file(n=200, avg_degree=5, seed=9)
    for shape in admissible_shapes("1.5d", world.size):
        for layout in ("replicated", "partitioned"):
            with ProcessGrid(MPI.COMM_WORLD, shape) as grid:
                sampler = BulkSampler(spec, grid, path, layout)
                grid.stats.reset()
                sample_all(sampler, spec, path, epoch=1)
                s = byte_summary(grid.world, grid.stats, sampler.bytes_oblivious,
                                 sampler.bytes_control, sampler.bytes_partial_products,
                                 sampler.spgemm_nnz, shape.replication)
                if layout == "replicated":
                    assert_all(world, s["paper_spgemm_bytes"] is None
                               and s["spgemm_nnz"] is None)
                    continue
                p, c = shape.size, shape.replication
                n = selected_nnz(path, spec, grid, epoch=1)
                assert_all(world, s["spgemm_nnz"] == n, f"{shape}: {s['spgemm_nnz']} != {n}")
                assert_all(world, s["paper_spgemm_bytes"] == 8 * n * (1 / c + c / p))
                cats = grid.stats.snapshot()
                rows, combine, request = (
                    grid.world.allreduce_scalar(int(cats.get(k, {}).get("bytes", 0)))
                    for k in ("sample_rows", "sample_combine", "sample_request"))
                # docs/sampling.md: the row all-gather moves c - 1 copies of the fetched rows
                assert_all(world, combine == (c - 1) * rows)
                assert_all(world, s["measured_spgemm_bytes"] == rows / c + combine / p)
                # the fetched nonzeros ((rows - request) / 8) never exceed the selected ones:
                # the process row's own block is selected but never travels
                assert_all(world, (rows - request) // 8 <= n)
                if rows:
                    assert_all(world, s["paper_over_measured"]
                               == s["paper_spgemm_bytes"] / s["measured_spgemm_bytes"])
                else:  # P/c = 1: every row is local
                    assert_all(world, s["paper_over_measured"] is None and c == p)
