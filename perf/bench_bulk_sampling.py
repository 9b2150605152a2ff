"""Bulk sampling speed-up and sparsity-aware SpGEMM volume.

Two measurements, written to ``perf/results/bench_bulk_sampling.{json,md}`` by rank 0 (the
ratio table printed last):

1. ``bulk``: per sampler, the time to sample the first ``--batches`` minibatches of an
   epoch ``K`` at a time (one stacked SpGEMM per hop) against one at a time, with the
   graph-replicated layout; ``speedup_per_batch[K] = t(bulk 1) / t(bulk K)`` (the same
   batches, identical samples), from wall-clock and from CPU time (steadier on a shared
   machine). Best of ``--repeats``; times are the maximum over ranks.
2. ``bytes``: the graph-partitioned layout on the ``(P/c) x c`` grid: bytes received by
   the sparsity-aware row fetch (``sample_request + sample_rows``) against the
   sparsity-oblivious broadcast of whole block rows, summed over ranks;
   ``oblivious_over_aware`` divides the latter by every byte of ours, fetch and row
   combine (``hpcgnn.sampling.spgemm_1p5d.byte_summary``; ``null`` when ``P/c = 1``).

    python perf/bench_bulk_sampling.py                       # generated graph, 1 rank
    mpiexec -n 4 python perf/bench_bulk_sampling.py G.h5 --replication 2 --bulk 8,32
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI
from tables import markdown, save

from hpcgnn.grid import ProcessGrid
from hpcgnn.io import EdgeSorter, GraphFileWriter
from hpcgnn.sampling.bulk import BulkSampler, read_train_ids
from hpcgnn.sampling.shuffle import minibatches
from hpcgnn.sampling.spec import SamplerSpec
from hpcgnn.sampling.spgemm_1p5d import byte_summary


def write_graph(path: Path, n: int, avg_degree: float, seed: int) -> None:
    """An undirected random graph with a power-law-ish degree spread (no features needed)."""
    rng = np.random.default_rng(seed)
    m = int(n * avg_degree / 2)
    weights = 1.0 / np.arange(1, n + 1) ** 0.6
    src = rng.choice(n, m, p=weights / weights.sum())
    dst = rng.integers(0, n, m)
    keep = src != dst
    with EdgeSorter(n, False, int(keep.sum())) as sorter:
        sorter.add(src[keep], dst[keep])
        with GraphFileWriter(path, num_nodes=n, num_features=1, num_classes=2, directed=False,
                             name="bench", show_progress=False) as w:
            w.write_adjacency(sorter)
            w.write_features(0, np.zeros((n, 1), np.float32))
            w.write_labels(rng.integers(0, 2, n))
            w.write_masks(rng.random(n) < 0.5, np.zeros(n, bool), np.zeros(n, bool))


def time_epoch(sampler: BulkSampler, batches: list[np.ndarray], bulk: int, repeats: int) -> dict:
    """Best wall and CPU seconds (max over ranks) to sample ``batches`` ``bulk`` at a time."""
    world = sampler.grid.world
    wall = cpu = float("inf")
    for _ in range(repeats):
        world.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        for first in range(0, len(batches), bulk):
            sampler.sample(0, batches[first : first + bulk], first)
        wall = min(wall, world.allreduce_scalar(time.perf_counter() - t0, MPI.MAX))
        cpu = min(cpu, world.allreduce_scalar(time.process_time() - c0, MPI.MAX))
    return {"wall": wall, "cpu": cpu}


def bench(args: argparse.Namespace, path: str) -> dict:
    """Run both measurements on the graph ``path``."""
    top = max(args.bulk)
    specs = {
        "sage": SamplerSpec("sage", tuple(args.fanout), args.batch_size, top, args.seed),
        "ladies": SamplerSpec("ladies", tuple(args.layer_size), args.batch_size, top, args.seed),
    }
    train = read_train_ids(path)
    out: dict = {"world_size": MPI.COMM_WORLD.Get_size(), "batch_size": args.batch_size,
                 "bulk": {}, "bytes": {}}
    for name, spec in specs.items():
        batches = minibatches(train, spec.batch_size, spec.seed, 0)[: args.batches]
        with ProcessGrid.create(MPI.COMM_WORLD, "1.5d", replication=args.replication) as grid:
            sampler = BulkSampler(spec, grid, path, "replicated")
            one = time_epoch(sampler, batches, 1, args.repeats)
            rows = {"sizes": list(spec.sizes), "batches": len(batches),
                    "seconds_per_batch": {"1": one["wall"] / len(batches)}, "speedup_per_batch": {},
                    "cpu_speedup_per_batch": {}}
            for k in args.bulk:
                t = time_epoch(sampler, batches, k, args.repeats)
                rows["seconds_per_batch"][str(k)] = t["wall"] / len(batches)
                rows["speedup_per_batch"][str(k)] = one["wall"] / t["wall"]
                rows["cpu_speedup_per_batch"][str(k)] = one["cpu"] / t["cpu"]
            out["bulk"][name] = rows
        with ProcessGrid.create(MPI.COMM_WORLD, "1.5d", replication=args.replication) as grid:
            sampler = BulkSampler(spec, grid, path, "partitioned")
            grid.stats.reset()
            for first in range(0, len(batches), spec.bulk):
                sampler.sample(0, batches[first : first + spec.bulk], first)
            out["bytes"][name] = {
                "grid": str(grid.shape), "bulk": spec.bulk,
                **byte_summary(grid.world, grid.stats, sampler.bytes_oblivious),
            }
    return out


def main() -> None:
    """Parse the flags, make or open the graph, save the results on rank 0."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("graph", nargs="?", help="graph file (default: a generated random graph)")
    p.add_argument("--nodes", type=int, default=100_000, help="generated graph: vertices")
    p.add_argument("--avg-degree", type=float, default=16.0, help="generated graph: mean degree")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=64, help="minibatches sampled per measurement")
    p.add_argument("--bulk", type=lambda s: [int(x) for x in s.split(",")], default=[4, 16, 64],
                   help="bulk sizes K compared with K = 1 (default: 4,16,64)")
    p.add_argument("--fanout", type=lambda s: [int(x) for x in s.split(",")], default=[10, 5])
    p.add_argument("--layer-size", type=lambda s: [int(x) for x in s.split(",")],
                   default=[256, 256])
    p.add_argument("--replication", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="bench_bulk_sampling", help="results name in perf/results")
    args = p.parse_args()
    world = MPI.COMM_WORLD
    with tempfile.TemporaryDirectory() as tmp:
        path = args.graph
        if path is None:
            path = world.bcast(str(Path(tmp) / "bench.h5") if world.rank == 0 else None)
            if world.rank == 0:
                write_graph(Path(path), args.nodes, args.avg_degree, args.seed)
            world.Barrier()
        result = bench(args, path)
        generated = f"generated: {args.nodes} vertices, mean degree {args.avg_degree}"
        result["graph"] = args.graph or generated
    if world.rank == 0:
        save(args.name, result, _table(result))


def _table(result: dict) -> str:
    """Speed-up per bulk size and the byte ratio, one row per sampler."""
    bulks = sorted({k for r in result["bulk"].values() for k in r["speedup_per_batch"]}, key=int)
    rows = [
        [name, r["batches"], 1e3 * r["seconds_per_batch"]["1"],
         *(r["speedup_per_batch"][k] for k in bulks),
         result["bytes"][name]["oblivious_over_aware"] or "-"]
        for name, r in result["bulk"].items()
    ]
    return markdown(
        f"Bulk sampling ({result['graph']}; {result['world_size']} rank(s), batch "
        f"{result['batch_size']})",
        ["sampler", "batches", "ms/batch at bulk 1", *(f"bulk {k} speed-up" for k in bulks),
         "oblivious / aware bytes"], rows,
        ["Speed-up = time per batch at bulk 1 / at bulk K (the same samples). The byte ratio "
         "counts every byte of ours (fetch and row combine)."],
    )


if __name__ == "__main__":
    main()
