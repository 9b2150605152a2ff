"""``hpcgnn train``: distributed full-batch GCN training."""

from __future__ import annotations

import argparse

from hpcgnn.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command."""
    from hpcgnn.train.algorithms import ALGORITHMS

    p = sub.add_parser(
        "train",
        help="train a GCN on a graph file (run under mpiexec/srun, one rank per GPU or core)",
        description="Full-batch GCN training with a distributed SpMM algorithm (CAGNET).",
    )
    p.add_argument("graph", help="graph file written by `hpcgnn prepare` / `hpcgnn partition`")
    p.add_argument("--mode", choices=["fullbatch"], default="fullbatch")
    p.add_argument("--algo", choices=ALGORITHMS, default="1d", help="distributed SpMM algorithm")
    p.add_argument("--grid", default=None,
                   help="process grid, e.g. 4, 2x2 or 2x2x2 (default: chosen for the rank count)")
    p.add_argument("--replication", type=int, default=None, help="1.5d replication factor c")
    m = p.add_argument_group("model and optimiser")
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--hidden", type=int, default=16)
    m.add_argument("--epochs", type=int, default=100)
    m.add_argument("--lr", type=float, default=0.01)
    m.add_argument("--weight-decay", type=float, default=5e-4)
    m.add_argument("--dropout", type=float, default=0.5)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    o = p.add_argument_group("output")
    o.add_argument("--eval-every", type=int, default=1,
                   help="evaluate every K epochs (0: only at the end)")
    o.add_argument("--metrics", default=None, help="write the metrics JSON here (rank 0)")
    o.add_argument("--trace", default=None, help="write a Chrome/Perfetto trace here (rank 0)")
    o.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    c = p.add_argument_group("checkpoint/restart")
    c.add_argument("--checkpoint-dir", default=None, help="directory for checkpoints (rank 0)")
    c.add_argument("--checkpoint-every", type=int, default=0, help="checkpoint every K epochs")
    c.add_argument("--resume", default=None, help="resume from the checkpoint in this directory")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads per rank")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run training; every rank returns the same status."""
    import torch

    from hpcgnn.train.config import TrainConfig
    from hpcgnn.train.run import RunOptions, train

    if args.threads is not None:
        if args.threads < 1:
            raise ConfigError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    cfg = TrainConfig(
        layers=args.layers, hidden=args.hidden, epochs=args.epochs, lr=args.lr,
        weight_decay=args.weight_decay, dropout=args.dropout, seed=args.seed,
        eval_every=args.eval_every, dtype=args.dtype,
    )
    opts = RunOptions(
        graph=args.graph, algo=args.algo, grid=args.grid, replication=args.replication,
        metrics=args.metrics, trace=args.trace, checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=args.checkpoint_every, resume=args.resume, quiet=args.quiet,
    )
    train(opts, cfg)
    return 0
