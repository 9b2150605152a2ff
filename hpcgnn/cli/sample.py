"""``hpcgnn sample``: bulk-sample the minibatches of one epoch and write them to a file.

Runs under ``mpiexec`` with the sampling flags of ``hpcgnn train --mode minibatch``; the
file holds every batch's sampled hop matrices in global vertex ids (layout in
``docs/sampling.md``) and is the same for a given seed whatever the number of ranks, the
graph layout, the replication and the bulk size.
"""

from __future__ import annotations

import argparse

from hpcgnn.cli.common import add_device_argument
from hpcgnn.errors import ConfigError
from hpcgnn.sampling.samplers import NODE_WISE, SAMPLERS
from hpcgnn.sampling.spec import (
    LADIES_REDUCTIONS,
    LAYOUTS,
    SamplerSpec,
    check_ladies_reduction,
    make_spec,
)
from hpcgnn.utils.memory import parse_bytes


def add_sampling_arguments(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Add the sampling flags shared by ``train --mode minibatch`` and ``sample``."""
    g = p.add_argument_group("minibatch sampling (train --mode minibatch or gist, sample)")
    g.add_argument("--sampler", choices=tuple(SAMPLERS), default=None,
                   help="sage: node-wise GraphSAGE; ladies: layer-wise LADIES; cluster: "
                        "Cluster-GCN's METIS clusters of the training graph, each batch the "
                        "subgraph its clusters induce (default: sage; train --mode gist: the "
                        "groups train sampled minibatches of this sampler instead of running a "
                        "full-batch --algo)")
    g.add_argument("--clusters", type=int, default=None, metavar="N",
                   help="cluster: METIS clusters of the training graph (default: one per 100 "
                        "training vertices)")
    g.add_argument("--clusters-per-batch", type=int, default=None, metavar="Q",
                   help="cluster: clusters per minibatch on each rank, drawn at random each "
                        "epoch; the links between them are kept (default: 10)")
    g.add_argument("--fanout", default=None, metavar="F1,F2,...",
                   help="sage: sampled in-neighbours per vertex, one per layer, the seeds' hop "
                        "first, e.g. 15,10,5; a vertex with fewer keeps them all "
                        "(default: 10 per layer; at most 2^31-1)")
    g.add_argument("--layer-size", default=None, metavar="S[,S2,...]",
                   help="ladies: vertices sampled per batch and layer, one value or one per "
                        "layer; fewer candidates are all kept (default: 512 for each of 2 layers; "
                        "at most 2^31-1)")
    g.add_argument("--batch-size", type=int, default=None,
                   help="seed vertices per minibatch on each rank: an optimizer step trains one "
                        "minibatch per rank, so P ranks train P times the seeds per step "
                        "(default: 1024; capped at the training set's size)")
    g.add_argument("--global-batch", type=int, default=None, metavar="G",
                   help="instead of --batch-size: seed vertices per optimizer step over all "
                        "ranks, G/P per rank (G a multiple of P; --bulk then a multiple of P)")
    g.add_argument("--bulk", type=int, default=None,
                   help="minibatches sampled at once, in one stacked SpGEMM per hop, shared out "
                        "over the ranks, one per rank and optimizer step (default: 16, with "
                        "--global-batch the multiple of P from 16 up; at most 2^31-1)")
    g.add_argument("--graph-layout", choices=LAYOUTS, default=None,
                   help="replicated: every rank holds the whole graph; partitioned: block rows "
                        "on a (P/c) x c grid, sparsity-aware 1.5D SpGEMM (default: replicated)")
    g.add_argument("--sample-memory", default=None, metavar="BYTES",
                   help="memory a hop's local SpGEMM and draws may take (e.g. 2G): a bulk whose "
                        "hop needs more is sampled in chunks of whole batches, the same samples "
                        "(default: a quarter of the GPU's free memory with --device cuda, else "
                        "32M, a stack that stays in the CPU's caches)")
    g.add_argument("--ladies-reduction", choices=LADIES_REDUCTIONS, default=None,
                   help="ladies, partitioned graph: rows all-gathers the fetched rows of S over "
                        "the process row, serving P and the extraction; partial-products is the "
                        "paper's: P's partial products reduced over the process row, then the "
                        "row extraction as a second 1.5D SpGEMM; the same samples (default: "
                        "rows)")
    return g


def spec_from_args(args: argparse.Namespace, ranks: int) -> SamplerSpec:
    """The sampling flags for a job of ``ranks``, validated (the same error on every rank)."""
    return make_spec(
        args.sampler or NODE_WISE.name, fanout=args.fanout, layer_size=args.layer_size,
        layers=args.layers, batch_size=args.batch_size, bulk=args.bulk, seed=args.seed,
        global_batch=args.global_batch, ranks=ranks, clusters=args.clusters,
        clusters_per_batch=args.clusters_per_batch,
    )


def sample_memory(args: argparse.Namespace) -> float | None:
    """``--sample-memory`` in bytes (``None``: not given, the default budget)."""
    if args.sample_memory is None:
        return None
    return parse_bytes(args.sample_memory, "--sample-memory")


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
    p.add_argument("--epoch", type=int, default=1,
                   help="the training epoch whose shuffle is sampled, counted from 1 as train "
                        "counts them (default: 1)")
    p.add_argument("--batches", type=int, default=None,
                   help="sample only the first N minibatches of the epoch (default: all)")
    p.add_argument("--replication", type=int, default=None,
                   help="1.5d replication factor c of the (P/c) x c grid")
    p.add_argument("--grid", default=None, help="explicit (P/c)xc grid, e.g. 2x2")
    p.add_argument("--out", required=True, metavar="S.h5", help="samples file to write (rank 0)")
    p.add_argument("--quiet", action="store_true", help="no summary line")
    add_device_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Sample and write; every rank returns the same status."""
    from mpi4py import MPI

    from hpcgnn.grid.device import choose_device
    from hpcgnn.kernels.prepare import prepare_kernels
    from hpcgnn.sampling.epoch_file import sample_to_file

    if not 1 <= args.epoch < 2**63:  # the same on every rank
        raise ConfigError(f"--epoch must be in [1, 2^63), got {args.epoch}")
    spec = spec_from_args(args, MPI.COMM_WORLD.Get_size())
    layout = args.graph_layout or LAYOUTS[0]
    reduction = args.ladies_reduction or LADIES_REDUCTIONS[0]
    check_ladies_reduction(reduction, spec.sampler, layout)
    comm = MPI.COMM_WORLD
    device = choose_device(comm, args.device, prepare_kernels)  # refuses it on every rank
    summary = sample_to_file(
        comm, args.graph, spec, args.out, graph_layout=layout, epoch=args.epoch - 1,
        batches=args.batches, grid=args.grid, replication=args.replication, device=device,
        memory=sample_memory(args), ladies_reduction=reduction,
    )
    if comm.Get_rank() == 0 and not args.quiet:
        print(f"hpcgnn sample: {summary.num_batches} minibatches, {summary.edges} sampled edges, "
              f"{summary.seconds:.3f} s sampling ({spec.sampler}, {layout} graph, grid "
              f"{summary.grid}) -> {args.out}", flush=True)
    return 0
