"""Bulk-sample the minibatches of one epoch on a process grid and write them to a file.

The library side of ``hpcgnn sample``: every rank samples its share of the epoch's
minibatches with :class:`~hpcgnn.sampling.bulk.BulkSampler` on a 1.5D grid, rank 0
gathers them and writes the samples file (:mod:`~hpcgnn.sampling.sample_file`). The file
is the same for a given seed whatever the number of ranks, the graph layout, the
replication and the bulk size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mpi4py import MPI

from hpcgnn.backend import Device
from hpcgnn.comm.collective import collective
from hpcgnn.config import check_random_key
from hpcgnn.errors import ConfigError
from hpcgnn.graph.check import check_graph
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.layout.shapes import GridShape
from hpcgnn.sampling.bulk import BulkSampler, read_train_ids
from hpcgnn.sampling.sample_file import write_samples
from hpcgnn.sampling.sampled import SampledBatch
from hpcgnn.sampling.spec import LADIES_REDUCTIONS, SamplerSpec, fit_training_set
from hpcgnn.utils.files import check_output


@dataclass(frozen=True)
class SampleSummary:
    """What :func:`sample_to_file` did; the same on every rank.

    Attributes
    ----------
    num_batches : int
        Minibatches sampled and written.
    edges : int
        Sampled edges, summed over ranks.
    seconds : float
        Wall time of the sampling loop (maximum over ranks; reading and writing excluded).
    grid : GridShape
        The process grid sampled on.
    out : str
        The samples file written.
    """

    num_batches: int
    edges: int
    seconds: float
    grid: GridShape
    out: str


def sample_to_file(
    comm: MPI.Comm,
    graph: str | os.PathLike,
    spec: SamplerSpec,
    out: str | os.PathLike,
    *,
    graph_layout: str = "replicated",
    epoch: int = 0,
    batches: int | None = None,
    grid: str | None = None,
    replication: int | None = None,
    device: Device | None = None,
    memory: float | None = None,
    ladies_reduction: str = LADIES_REDUCTIONS[0],
) -> SampleSummary:
    """Sample the minibatches of one epoch and write them to ``out`` (collective).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The ranks that sample (duplicated, not used directly).
    graph : str or os.PathLike
        Graph file written by ``hpcgnn prepare`` / ``hpcgnn partition``.
    spec : SamplerSpec
        Sampler, sizes, batch size, bulk and seed.
    out : str or os.PathLike
        Samples file to write (by rank 0, atomically).
    graph_layout : {"replicated", "partitioned"}, optional
        Whether every rank holds the whole graph or block rows of it.
    epoch : int, optional
        The 0-based index of the epoch whose shuffle is sampled (the training loop's step
        index, which keys the shuffle); the file records its number, ``epoch + 1``, as
        training counts epochs.
    batches : int, optional
        Sample only the first ``batches`` minibatches of the epoch (default: all).
    grid : str, optional
        Explicit ``(P/c)xc`` grid, e.g. ``"2x2"``.
    replication : int, optional
        Replication factor ``c`` of the ``(P/c) x c`` grid.
    device : Device, optional
        The rank's device (:func:`hpcgnn.grid.device.choose_device`), stored on the grid:
        its clock times the sampling loop, and a GPU samples the hops (see
        ``docs/sampling.md``, "Where sampling runs"); the file is the same either way.
    memory : float, optional
        Bytes a hop's local temporaries may take (``--sample-memory``; see
        :class:`~hpcgnn.sampling.bulk.BulkSampler`).
    ladies_reduction : {"rows", "partial-products"}, optional
        LADIES' last step in the partitioned layout (``--ladies-reduction``; see
        :class:`~hpcgnn.sampling.bulk.BulkSampler`); the file is the same either way.

    Returns
    -------
    SampleSummary
        The same on every rank.

    Raises
    ------
    ConfigError
        On a bad argument or a batch size larger than the training set, on every rank.
    InputError
        On a graph file that fails :func:`~hpcgnn.graph.check.check_graph`, on every rank.
    GridError
        On a grid that does not fit the communicator's size.
    """
    if batches is not None and batches < 1:
        raise ConfigError(f"--batches must be >= 1, got {batches}")
    check_random_key(epoch, "--epoch")
    pgrid = ProcessGrid.create(comm, "1.5d", grid, replication, device=device)
    try:
        world = pgrid.world
        # content: the features are read too (1/P each), so NaN or a corrupt chunk in them is
        # refused as train refuses it, although sampling itself never reads them
        check_graph(world, graph, content=True)
        with collective(world):
            train_ids = read_train_ids(graph)
            spec = fit_training_set(spec, len(train_ids))
            if world.rank == 0:  # the output fails now, not after sampling
                check_output(out, "--out")
        sampler = BulkSampler(spec, pgrid, graph, graph_layout, memory=memory,
                              train_ids=train_ids, ladies_reduction=ladies_reduction)
        epoch_batches = sampler.batches(epoch)[:batches]
        world.barrier()
        t0 = pgrid.stats.clock()
        mine: list[SampledBatch] = []
        for first in range(0, len(epoch_batches), spec.bulk):
            share = sampler.sample(epoch, epoch_batches[first : first + spec.bulk], first)
            mine += [b.on_host() for b in share]  # from the GPU if sampled there
        seconds = world.allreduce_scalar(pgrid.stats.clock() - t0, MPI.MAX)
        gathered = world.gather_obj(mine, 0, "sample_gather")
        attrs = {**spec.as_dict(), "layers": spec.layers, "epoch": epoch + 1,
                 "num_nodes": sampler.meta.num_nodes, "num_batches": len(epoch_batches),
                 "graph": str(graph), "graph_layout": graph_layout,
                 "world_size": pgrid.size, "grid": str(pgrid.shape)}
        with collective(world):
            if gathered is not None:
                write_samples(out, [b for part in gathered for b in part], attrs)
        edges = world.allreduce_scalar(sampler.edges_sampled)
        return SampleSummary(len(epoch_batches), edges, seconds, pgrid.shape, str(out))
    finally:
        pgrid.free()
