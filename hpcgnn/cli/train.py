"""``hpcgnn train``: distributed full-batch GCN training."""

from __future__ import annotations

import argparse
import sys
import time

from hpcgnn.errors import ConfigError

ALGORITHMS = ("1d",)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command."""
    p = sub.add_parser(
        "train",
        help="train a GCN on a graph file (run under mpiexec/srun, one rank per GPU or core)",
        description="Full-batch GCN training with a distributed SpMM algorithm.",
    )
    p.add_argument("graph", help="graph file written by `hpcgnn prepare` / `hpcgnn partition`")
    p.add_argument("--mode", choices=["fullbatch"], default="fullbatch")
    p.add_argument("--algo", choices=ALGORITHMS, default="1d", help="distributed SpMM algorithm")
    p.add_argument("--grid", default=None, help="process grid, e.g. 4, 2x2 or 2x2x2 (default: automatic)")
    p.add_argument("--replication", type=int, default=None, help="1.5d replication factor c")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=1, help="evaluate every K epochs (0: only at the end)")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--metrics", default=None, help="write metrics JSON here (rank 0)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads per rank")
    p.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run training; every rank returns the same status."""
    import torch
    from mpi4py import MPI

    from hpcgnn.grid.process_grid import ProcessGrid
    from hpcgnn.train.config import TrainConfig
    from hpcgnn.train.distributed import BlockRowGCN
    from hpcgnn.train.fullbatch import EpochRecord, train_fullbatch
    from hpcgnn.train.metrics import build_metrics, summed_over_ranks, write_json

    if args.threads is not None:
        if args.threads < 1:
            raise ConfigError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    cfg = TrainConfig(
        layers=args.layers, hidden=args.hidden, epochs=args.epochs, lr=args.lr,
        weight_decay=args.weight_decay, dropout=args.dropout, seed=args.seed,
        eval_every=args.eval_every, dtype=args.dtype,
    )
    grid = ProcessGrid.create(MPI.COMM_WORLD, args.algo, args.grid, args.replication)
    try:
        root = grid.rank == 0
        t0 = time.perf_counter()
        model = BlockRowGCN(args.graph, grid, cfg)
        setup_s = time.perf_counter() - t0
        if root:
            m = model.meta
            print(
                f"hpcgnn train: {m.name or args.graph}: {m.num_nodes} vertices, {m.num_edges} edges,"
                f" {m.num_features} features, {m.num_classes} classes | algo {args.algo}"
                f" grid {grid.shape} on {grid.size} ranks | setup {setup_s:.2f} s",
                flush=True,
            )
        grid.stats.reset()

        def progress(rec: EpochRecord) -> None:
            if root and not args.quiet:
                acc = ""
                if rec.train_acc is not None:
                    acc = f" | train {rec.train_acc:.4f} val {rec.val_acc:.4f}"
                share = 100.0 * rec.comm_s / rec.time_s if rec.time_s > 0 else 0.0
                print(
                    f"epoch {rec.epoch + 1:4d} | loss {rec.loss:.4f}{acc} | {rec.time_s * 1e3:8.1f} ms"
                    f" | comm {share:4.1f}%",
                    flush=True,
                )

        result = train_fullbatch(model, cfg, progress)
        measured = summed_over_ranks(grid.world, result.per_epoch(result.step_bytes))
        if root:
            f = result.final
            print(
                f"final | loss {f['loss']:.4f} | train {f['train_acc']:.4f} val {f['val_acc']:.4f}"
                f" test {f['test_acc']:.4f} | params sha256 {result.params_sha256[:16]}",
                flush=True,
            )
            if args.metrics:
                doc = build_metrics(
                    result, world_size=grid.size,
                    config={**cfg.as_dict(), "algo": args.algo, "grid": str(grid.shape),
                            "graph": args.graph, "mode": args.mode},
                    measured_bytes=measured,
                )
                write_json(args.metrics, doc)
                print(f"metrics written to {args.metrics}", file=sys.stderr)
    finally:
        grid.free()
    return 0
