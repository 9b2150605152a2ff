"""``hpcgnn sample``: bulk-sample the minibatches of one epoch and write them to a file.

Runs under ``mpiexec`` with the sampling flags of ``hpcgnn train --mode minibatch``; the
file holds every batch's sampled hop matrices in global vertex ids (layout in
``docs/sampling.md``) and is the same for a given seed whatever the number of ranks, the
graph layout, the replication and the bulk size.
"""

from __future__ import annotations

import argparse
import time

from hpcgnn.errors import ConfigError
from hpcgnn.sampling.rows import SAMPLERS
from hpcgnn.sampling.spec import LAYOUTS, SamplerSpec, make_spec


def add_sampling_arguments(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Add the sampling flags shared by ``train --mode minibatch`` and ``sample``."""
    g = p.add_argument_group("minibatch sampling (train --mode minibatch, sample)")
    g.add_argument("--sampler", choices=SAMPLERS, default="sage",
                   help="sage: node-wise GraphSAGE; ladies: layer-wise LADIES (default: sage)")
    g.add_argument("--fanout", default=None, metavar="F1,F2,...",
                   help="sage: sampled in-neighbours per vertex, one per layer, the seeds' hop "
                        "first, e.g. 15,10,5 (default: 10 per layer)")
    g.add_argument("--layer-size", default=None, metavar="S[,S2,...]",
                   help="ladies: vertices sampled per batch and layer, one value or one per "
                        "layer (default: 512)")
    g.add_argument("--batch-size", type=int, default=1024, help="seed vertices per minibatch")
    g.add_argument("--bulk", type=int, default=16,
                   help="minibatches sampled at once, in one stacked SpGEMM per hop (default: 16)")
    g.add_argument("--graph-layout", choices=LAYOUTS, default="replicated",
                   help="replicated: every rank holds the whole graph; partitioned: block rows "
                        "on a (P/c) x c grid, sparsity-aware 1.5D SpGEMM (default: replicated)")
    return g


def spec_from_args(args: argparse.Namespace) -> SamplerSpec:
    """Validate the sampling flags (the same :class:`ConfigError` on every rank)."""
    return make_spec(
        args.sampler, fanout=args.fanout, layer_size=args.layer_size, layers=args.layers,
        batch_size=args.batch_size, bulk=args.bulk, seed=args.seed,
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``sample`` sub-command."""
    p = sub.add_parser(
        "sample",
        help="bulk-sample the minibatches of an epoch and write them (run under mpiexec)",
        description="Matrix-based bulk sampling (GraphSAGE or LADIES) of one epoch's minibatches; "
                    "writes every batch's sampled adjacency matrices in global vertex ids.",
    )
    p.add_argument("graph", help="graph file written by `hpcgnn prepare` / `hpcgnn partition`")
    add_sampling_arguments(p)
    p.add_argument("--layers", type=int, default=None,
                   help="number of hops (default: from --fanout / --layer-size)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--epoch", type=int, default=0,
                   help="epoch whose shuffle is sampled (default: 0)")
    p.add_argument("--batches", type=int, default=None,
                   help="sample only the first N minibatches of the epoch (default: all)")
    p.add_argument("--replication", type=int, default=None,
                   help="1.5d replication factor c of the (P/c) x c grid")
    p.add_argument("--grid", default=None, help="explicit (P/c)xc grid, e.g. 2x2")
    p.add_argument("--out", required=True, metavar="S.h5", help="samples file to write (rank 0)")
    p.add_argument("--quiet", action="store_true", help="no summary line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Sample and write; every rank returns the same status."""
    from mpi4py import MPI

    from hpcgnn.comm.collective import collective
    from hpcgnn.grid.process_grid import ProcessGrid
    from hpcgnn.layout.shapes import choose_shape
    from hpcgnn.sampling.bulk import BulkSampler, read_train_ids
    from hpcgnn.sampling.sample_file import write_samples
    from hpcgnn.sampling.shuffle import minibatches
    from hpcgnn.sampling.spec import check_training_set

    spec = spec_from_args(args)
    if args.batches is not None and args.batches < 1:
        raise ConfigError(f"--batches must be >= 1, got {args.batches}")
    if args.epoch < 0:
        raise ConfigError(f"--epoch must be >= 0, got {args.epoch}")
    grid = ProcessGrid(MPI.COMM_WORLD, choose_shape("1.5d", MPI.COMM_WORLD.Get_size(), args.grid,
                                                    args.replication))
    try:
        with collective(grid.world):
            train_ids = read_train_ids(args.graph)
            check_training_set(spec, len(train_ids))
        sampler = BulkSampler(spec, grid, args.graph, args.graph_layout)
        batches = minibatches(train_ids, spec.batch_size, spec.seed, args.epoch)[: args.batches]
        grid.world.barrier()
        t0 = time.perf_counter()
        mine = []
        for first in range(0, len(batches), spec.bulk):
            mine += sampler.sample(args.epoch, batches[first : first + spec.bulk], first)
        seconds = grid.world.allreduce_scalar(time.perf_counter() - t0, MPI.MAX)
        gathered = grid.world.gather_obj(mine, 0, "sample_gather")
        attrs = {**spec.as_dict(), "layers": spec.layers, "epoch": args.epoch,
                 "num_nodes": sampler.meta.num_nodes, "num_batches": len(batches),
                 "graph": str(args.graph), "graph_layout": args.graph_layout,
                 "world_size": grid.size, "grid": str(grid.shape)}
        with collective(grid.world):
            if gathered is not None:
                write_samples(args.out, [b for part in gathered for b in part], attrs)
        edges = grid.world.allreduce_scalar(sampler.edges_sampled)
        if grid.rank == 0 and not args.quiet:
            print(f"hpcgnn sample: {len(batches)} minibatches, {edges} sampled edges, "
                  f"{seconds:.3f} s sampling ({spec.sampler}, {args.graph_layout} graph, grid "
                  f"{grid.shape}) -> {args.out}", flush=True)
    finally:
        grid.free()
    return 0
