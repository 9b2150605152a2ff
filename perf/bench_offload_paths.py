"""HongTu's device paths of ``--mode offload`` side by side (issue 43, items 5-7).

An MPI program (run it under ``mpiexec``): on one graph partitioned into ``P`` parts (made
first, outside MPI, by ``perf/tables.py`` ``prepare``: the command below) it trains the
offloaded GCN with ``--dedup full`` under each configuration of
:class:`hpcgnn.exchange.offload.DevicePaths`, round-robin over ``--rounds`` rounds, and
prints from rank 0, per configuration, the median epoch seconds (forward and backward, the
slowest rank), the device buffers the exchanges allocated and their bytes (most on any
rank), the ``offload_d2d`` bytes and calls per epoch (summed over ranks), and whether the weight
gradients equal the first configuration's bit for bit.

    python -c "import sys; sys.path.insert(0, 'perf'); from pathlib import Path; \
        from tables import prepare; prepare(Path('/tmp/rmat.h5'), 'rmat', 4096, parts=4)"
    mpiexec -n 4 python perf/bench_offload_paths.py /tmp/rmat.h5 --chunks 8 --epochs 5

Configurations: ``today`` (in-place off: new buffers per batch), ``in-place`` (the default),
``interleaved`` (in place, the device-to-device rows in ``P - 1`` rounds), ``zero-copy``
(in place, host rows read by the load kernel: on the CPU device the host gather, as today)
and ``merged`` (in place, one buffer for the transition and neighbour rows).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from mpi4py import MPI

from hpcgnn.config import TrainConfig
from hpcgnn.grid import ProcessGrid
from hpcgnn.models.offload import OffloadModel, OffloadOptions

CONFIGS = {
    "today": {"in_place": False},
    "in-place": {},
    "interleaved": {"interleave": True},
    "zero-copy": {"zero_copy": True},
    "merged": {"merged": True},
}


def run(path: str, name: str, args: argparse.Namespace) -> dict:
    """One configuration: epoch seconds, allocations, d2d bytes and calls, the gradients."""
    cfg = TrainConfig(layers=3, hidden=args.hidden, dropout=0.5, dtype="float32", seed=1)
    opts = OffloadOptions(args.chunks, "full", False, **CONFIGS[name])
    with ProcessGrid.create(MPI.COMM_WORLD, "1d") as grid:
        model = OffloadModel.read(path, grid, cfg, opts)
        model.comm.stats.reset()
        seconds, grads = [], []
        for epoch in range(args.epochs):
            grid.world.mpi.Barrier()
            t0 = time.perf_counter()
            logits = model.forward_pass(epoch)
            grads = model.backward_pass(torch.ones_like(logits))
            seconds.append(grid.world.mpi.allreduce(time.perf_counter() - t0, op=MPI.MAX))
        d2d = model.comm.stats.categories.get("offload_d2d")
        mpi = grid.world.mpi
        return {
            "epoch_s": statistics.median(seconds),
            "allocated": mpi.allreduce(model.exchange.allocated + model.reload.allocated,
                                       op=MPI.MAX),
            "buffer_bytes": mpi.allreduce(
                model.exchange.buffer_bytes + model.reload.buffer_bytes, op=MPI.MAX),
            "d2d_bytes": mpi.allreduce(d2d.bytes if d2d else 0) / args.epochs,
            "d2d_calls": mpi.allreduce(d2d.calls if d2d else 0) / args.epochs,
            "grads": [g.clone() for g in grads],
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph", help="a graph file partitioned into as many parts as ranks")
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    world = MPI.COMM_WORLD
    results: dict[str, list[dict]] = {name: [] for name in CONFIGS}
    for _ in range(args.rounds):
        for name in CONFIGS:
            results[name].append(run(args.graph, name, args))
    if world.rank:
        return
    base = results["today"][0]
    print(f"P={world.size}, {args.graph}, {args.chunks} chunks/part, hidden "
          f"{args.hidden}, float32, dedup full, {args.epochs} epochs x {args.rounds} rounds")
    print("| paths | epoch s (median) | vs today | device buffers allocated | buffer KiB | "
          "d2d MB/epoch | d2d calls/epoch | gradients = today's |")
    print("|---|---|---|---|---|---|---|---|")
    t_base = statistics.median(r["epoch_s"] for r in results["today"])
    for name, runs in results.items():
        t = statistics.median(r["epoch_s"] for r in runs)
        same = all(torch.equal(a, b) for r in runs
                   for a, b in zip(r["grads"], base["grads"], strict=True))
        r = runs[0]
        print(f"| {name} | {t:.3f} | {t / t_base:.2f}x | {r['allocated']} | "
              f"{r['buffer_bytes'] / 1024:.0f} | {r['d2d_bytes'] / 1e6:.2f} | "
              f"{r['d2d_calls']:.0f} | {same} |")


if __name__ == "__main__":
    main()
