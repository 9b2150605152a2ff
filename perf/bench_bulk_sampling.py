"""Bulk sampling speed-up and sparsity-aware SpGEMM volume, over batch sizes.

Two measurements per sampler (sage, ladies) and batch size (``--batch-sizes``, default
64 to 4096), written to ``perf/results/bench_bulk_sampling.{json,md}`` by rank 0 (the
ratio table printed last):

1. ``bulk``: the time to sample ``--batches`` minibatches ``K`` at a time (one stacked
   SpGEMM per hop) against one at a time, with the graph-replicated layout;
   ``speedup_per_batch[K] = t(bulk 1) / t(bulk K)`` (the same batches, identical
   samples), from wall-clock and from CPU time (steadier on a shared machine). The
   batches are the first ``--batches`` minibatches of epochs 0, 1, ... (a large batch
   size has fewer per epoch than the largest bulk needs), each read once in order as
   the trainer reads them (the replicated layout samples a bulk as it is read, one
   group of batches at a time; see ``hpcgnn.sampling.bulk``). Each repeat times every
   bulk size once, in turn, so a busy spell of a shared machine hits them alike; best
   of ``--repeats``; times are the maximum over ranks.
2. ``bytes``: the graph-partitioned layout on the ``(P/c) x c`` grid: bytes received by
   the sparsity-aware row fetch (``sample_request + sample_rows``) against the
   sparsity-oblivious broadcast of whole block rows, summed over ranks;
   ``oblivious_over_aware`` divides the latter by every byte of ours: fetch, row combine
   and the SpGEMM's control messages (``hpcgnn.sampling.spgemm_1p5d.byte_summary``;
   ``null`` when ``P/c = 1``).

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


def sample_all(sampler: BulkSampler, batches: list[np.ndarray], k: int) -> None:
    """Sample ``batches`` ``k`` at a time, reading each batch once in order (as a trainer does).

    The replicated layout samples a bulk lazily as its batches are read, so every batch
    is read; none is kept.
    """
    for first in range(0, len(batches), k):
        for _batch in sampler.sample(0, batches[first : first + k], first):
            pass


def time_bulks(sampler: BulkSampler, batches: list[np.ndarray], bulks: list[int],
               repeats: int) -> dict[int, dict[str, float]]:
    """Best wall and CPU seconds (max over ranks) to sample ``batches`` ``K`` at a time.

    Every repeat times each ``K`` of ``bulks`` once, in turn.
    """
    world = sampler.grid.world
    best = {k: {"wall": float("inf"), "cpu": float("inf")} for k in bulks}
    for _ in range(repeats):
        for k in bulks:
            world.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            sample_all(sampler, batches, k)
            wall = world.allreduce_scalar(time.perf_counter() - t0, MPI.MAX)
            cpu = world.allreduce_scalar(time.process_time() - c0, MPI.MAX)
            best[k] = {"wall": min(best[k]["wall"], wall), "cpu": min(best[k]["cpu"], cpu)}
    return best


def epoch_batches(train: np.ndarray, spec: SamplerSpec, count: int) -> list[np.ndarray]:
    """The first ``count`` minibatches of epochs 0, 1, ... of ``spec``."""
    out: list[np.ndarray] = []
    epoch = 0
    while len(out) < count:
        out += minibatches(train, spec.batch_size, spec.seed, epoch)
        epoch += 1
    return out[:count]


def bench_one(args: argparse.Namespace, path: str, spec: SamplerSpec, train: np.ndarray
              ) -> tuple[dict, dict]:
    """Both measurements for one sampler and batch size."""
    batches = epoch_batches(train, spec, args.batches)
    bulks = [1, *(k for k in args.bulk if k != 1)]
    with ProcessGrid.create(MPI.COMM_WORLD, "1.5d", replication=args.replication) as grid:
        t = time_bulks(BulkSampler(spec, grid, path, "replicated"), batches, bulks,
                       args.repeats)
    rows: dict = {"sizes": list(spec.sizes), "batches": len(batches),
                  "seconds_per_batch": {}, "cpu_seconds_per_batch": {},
                  "speedup_per_batch": {}, "cpu_speedup_per_batch": {}}
    for k in bulks:
        rows["seconds_per_batch"][str(k)] = t[k]["wall"] / len(batches)
        rows["cpu_seconds_per_batch"][str(k)] = t[k]["cpu"] / len(batches)
        if k != 1:
            rows["speedup_per_batch"][str(k)] = t[1]["wall"] / t[k]["wall"]
            rows["cpu_speedup_per_batch"][str(k)] = t[1]["cpu"] / t[k]["cpu"]
    with ProcessGrid.create(MPI.COMM_WORLD, "1.5d", replication=args.replication) as grid:
        sampler = BulkSampler(spec, grid, path, "partitioned")
        grid.stats.reset()
        sample_all(sampler, batches, spec.bulk)
        nbytes = {
            "grid": str(grid.shape), "bulk": spec.bulk,
            **byte_summary(grid.world, grid.stats, sampler.bytes_oblivious,
                           sampler.bytes_control, sampler.bytes_partial_products),
        }
    return rows, nbytes


def bench(args: argparse.Namespace, path: str) -> dict:
    """Run both measurements on the graph ``path`` for every sampler and batch size."""
    top = max(args.bulk)
    train = read_train_ids(path)
    out: dict = {"world_size": MPI.COMM_WORLD.Get_size(), "batch_sizes": args.batch_sizes,
                 "bulk": {}, "bytes": {}}
    for name, sizes in (("sage", args.fanout), ("ladies", args.layer_size)):
        out["bulk"][name], out["bytes"][name] = {}, {}
        for bs in args.batch_sizes:
            spec = SamplerSpec(name, tuple(sizes), bs, top, args.seed)
            rows, nbytes = bench_one(args, path, spec, train)
            out["bulk"][name][str(bs)], out["bytes"][name][str(bs)] = rows, nbytes
    return out


def main() -> None:
    """Parse the flags, make or open the graph, save the results on rank 0."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("graph", nargs="?", help="graph file (default: a generated random graph)")
    p.add_argument("--nodes", type=int, default=100_000, help="generated graph: vertices")
    p.add_argument("--avg-degree", type=float, default=16.0, help="generated graph: mean degree")
    p.add_argument("--batch-sizes", type=ints, default=[64, 256, 1024, 4096],
                   help="seeds per minibatch, one measurement each (default: 64,256,1024,4096)")
    p.add_argument("--batch-size", type=int, help="one batch size (same as --batch-sizes B)")
    p.add_argument("--batches", type=int, default=64, help="minibatches sampled per measurement")
    p.add_argument("--bulk", type=ints, default=[4, 16, 32],
                   help="bulk sizes K compared with K = 1 (default: 4,16,32)")
    p.add_argument("--fanout", type=ints, default=[10, 5])
    p.add_argument("--layer-size", type=ints, default=[256, 256])
    p.add_argument("--replication", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="bench_bulk_sampling", help="results name in perf/results")
    p.add_argument("--note", action="append", default=[],
                   help="a line for the table's notes (e.g. the machine's state); repeatable")
    args = p.parse_args()
    if args.batch_size is not None:
        args.batch_sizes = [args.batch_size]
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
        result["notes"] = args.note
    if world.rank == 0:
        save(args.name, result, _table(result))


def ints(text: str) -> list[int]:
    """A comma-separated list of integers."""
    return [int(x) for x in text.split(",")]


def _table(result: dict) -> str:
    """Speed-up per bulk size and the byte ratio, one row per sampler and batch size."""
    bulks = sorted({k for per in result["bulk"].values() for r in per.values()
                    for k in r["speedup_per_batch"]}, key=int)
    rows = []
    for name, per in result["bulk"].items():
        for bs, r in per.items():
            cpu, wall = r["cpu_speedup_per_batch"], r["speedup_per_batch"]
            rows.append([
                name, int(bs), r["batches"], 1e3 * r["cpu_seconds_per_batch"]["1"],
                *(f"{cpu[k]:.2f} ({wall[k]:.2f})" for k in bulks),
                min(cpu[k] for k in bulks),
                result["bytes"][name][bs]["oblivious_over_aware"] or "-",
            ])
    return markdown(
        f"Bulk sampling ({result['graph']}; {result['world_size']} rank(s))",
        ["sampler", "batch size", "batches", "CPU ms/batch at bulk 1",
         *(f"bulk {k} speed-up" for k in bulks), "lowest speed-up",
         "oblivious / aware bytes"], rows,
        ["Speed-up = time per batch at bulk 1 / at bulk K (the same samples), from CPU time "
         "(wall clock in brackets); lowest = the smallest CPU speed-up of the row. The byte "
         "ratio counts every byte of ours (fetch, row combine and control).",
         *result.get("notes", [])],
    )


if __name__ == "__main__":
    main()
