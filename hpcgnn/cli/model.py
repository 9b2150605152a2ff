"""``hpcgnn model``: rank algorithms and grids for P ranks from a file's statistics alone."""

from __future__ import annotations

import argparse
import json

from hpcgnn.layout.shapes import MAX_PROCS


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``model`` sub-command."""
    p = sub.add_parser(
        "model",
        help="predict communication of every algorithm and grid for P ranks (no MPI needed)",
        description=(
            "Rank the distributed SpMM algorithms and their process grids for --procs P by "
            "the alpha-beta cost model, using only the graph file's sizes. P need not be "
            "runnable here (e.g. 1024)."
        ),
    )
    p.add_argument("graph")
    p.add_argument("--procs", type=int, required=True,
                   help=f"number of ranks P, at most {MAX_PROCS} (2^20)")
    p.add_argument("--machine", default="laptop",
                   help="alpha and beta from configs/machines/NAME.json (summit, perlmutter, "
                        "laptop) or a .json file: the intra-node link while P fits on a node, "
                        "else the inter-node link (default: laptop)")
    p.add_argument("--alpha", type=float, default=None,
                   help="latency per message, seconds (overrides the machine's)")
    p.add_argument("--beta", type=float, default=None,
                   help="seconds per byte, 1e-10 = 10 GB/s (overrides the machine's)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--top", type=int, default=15, help="rows to print")
    p.add_argument("--json", default=None, help="also write every prediction to this JSON file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the ranking."""
    from hpcgnn.config import TrainConfig
    from hpcgnn.cost.machine import load_machine
    from hpcgnn.cost.ranking import rank_choices
    from hpcgnn.errors import ConfigError
    from hpcgnn.io.reader import GraphFile

    if not 1 <= args.procs <= MAX_PROCS:
        raise ConfigError(f"--procs must be in [1, {MAX_PROCS}], got {args.procs}")
    machine = load_machine(args.machine)
    link = machine.link(args.procs)
    alpha = link.alpha if args.alpha is None else args.alpha
    beta = link.beta if args.beta is None else args.beta
    cfg = TrainConfig(layers=args.layers, hidden=args.hidden, dtype=args.dtype)
    with GraphFile(args.graph) as gf:
        meta = gf.meta
    rows = rank_choices(meta, cfg, args.procs, alpha, beta)
    print(
        f"{meta.name or args.graph}: n={meta.num_nodes} nnz(A+I)={meta.num_edges + meta.num_nodes}"
        f" widths f={meta.num_features}->{args.hidden}x{args.layers - 1}->{meta.num_classes}"
        f" | P={args.procs} on {machine.name} ({machine.link_kind(args.procs)})"
        f" alpha={alpha:g} s beta={beta:g} s/B"
    )
    print(
        f"{'rank':>4} {'algo':>5} {'grid':>10} {'comm s/epoch':>13} {'MB/rank':>10}"
        f" {'GB total':>9} {'msgs':>6} {'mem GB/rank':>11}"
    )
    for i, r in enumerate(rows[: args.top]):
        print(
            f"{i + 1:>4} {r['algo']:>5} {r['grid']:>10} {r['time_s']:>13.6f}"
            f" {r['max_rank_bytes'] / 1e6:>10.3f} {r['total_bytes'] / 1e9:>9.3f}"
            f" {r['messages']:>6} {r['memory_per_rank_bytes'] / 2**30:>11.3f}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"procs": args.procs, "machine": machine.name, "alpha": alpha, "beta": beta,
                 "choices": rows},
                fh,
                indent=2,
            )
    return 0
