"""``hpcgnn model``: rank algorithms and grids for P ranks from a graph's sizes alone.

The sizes come from a graph file or from ``--shape n,nnz,f[,classes]`` (a graph that is
not here, e.g. Reddit or ogbn-papers100M); alpha and beta from a machine file
(:mod:`hpcgnn.cost.machine`). With several ``--procs`` it is a scaling study.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from hpcgnn.cli.common import add_head_arguments
from hpcgnn.cli.layers import model_name
from hpcgnn.cli.sample import add_sampling_arguments, sample_memory, spec_from_args
from hpcgnn.config import MODELS
from hpcgnn.errors import ConfigError
from hpcgnn.kinds import PRODUCT_ORDERS
from hpcgnn.layout.shapes import MAX_PROCS
from hpcgnn.sampling.spec import LAYOUTS

#: The most rank counts one ``--procs`` list may hold.
MAX_STUDY = 64


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``model`` sub-command."""
    p = sub.add_parser(
        "model",
        help="predict communication of every algorithm and grid for P ranks (no MPI needed)",
        description=(
            "Rank the distributed SpMM algorithms and their process grids for each --procs P "
            "by the alpha-beta cost model, using only the graph's sizes (the file's, or "
            "--shape), with each choice's predicted peak memory per rank and its parts (the "
            "estimate train's memory check uses). P need not be runnable here (e.g. 1024)."
        ),
    )
    p.add_argument("graph", nargs="?", default=None, help="graph file (or give --shape)")
    p.add_argument("--shape", default=None, metavar="n,nnz,f[,classes]",
                   help="model a graph without its file: vertices, stored edges (each "
                        "undirected edge twice, self loops not counted), features and "
                        "classes (default 16); see docs/communication.md for Reddit, "
                        "ogbn-products, ogbn-papers100M, Amazon")
    p.add_argument("--procs", required=True, metavar="P[,P...]",
                   help=f"rank counts P, comma-separated (at most {MAX_STUDY}), each at most "
                        f"{MAX_PROCS} (2^20)")
    p.add_argument("--machine", default="laptop",
                   help="alpha and beta from configs/machines/NAME.json (summit, perlmutter, "
                        "laptop) or a .json file: the intra-node link while P fits on a node, "
                        "else the inter-node link (default: laptop)")
    p.add_argument("--ranks-per-node", type=int, default=None, metavar="R",
                   help="ranks on a node, filled in rank order (default: the machine's GPUs "
                        "per node, or NUMA domains without GPUs); fewer leave each rank more "
                        "of the node's injection bandwidth")
    p.add_argument("--alpha", type=float, default=None,
                   help="latency per message, seconds (overrides the machine's)")
    p.add_argument("--beta", type=float, default=None,
                   help="seconds per byte, 1e-10 = 10 GB/s (overrides the machine's, for "
                        "every collective)")
    p.add_argument("--placement", choices=("nodes", "uniform"), default="nodes",
                   help="nodes: ranks fill the machine's nodes in order and a collective "
                        "whose ranks share a node (a 1.5D process row, say) runs over the "
                        "node's link, the others over the network, sharing an injection "
                        "port with the rings that leave it at the same time; uniform: every "
                        "collective at the job's link, every rank of a node sending at once "
                        "(default: nodes; --beta implies uniform)")
    p.add_argument("--model", type=model_name, default=MODELS[0],
                   metavar=f"{{{','.join(MODELS)}}}|MODULE:CLASS",
                   help="layer type, as train's --model: gcn (A+I normalised) or sage "
                        "(GraphSAGE-mean: the aggregation moves the same layer input over A "
                        "without self loops; two weights per layer, so the gradient "
                        "all-reduce and SUMMA's dense steps double), gin (A+I unnormalised, "
                        "a second dense step W_2 of f_out x f_out per layer) or gat (attention "
                        "over A+I: the rows move with one score column per head); "
                        "MODULE:CLASS: your own layer (imported from the Python path: it runs "
                        "that module's code), its bytes from a trace of its forward "
                        "(default: gcn)")
    p.add_argument("--layers", type=int, default=2, help="layers of the model (default: 2)")
    p.add_argument("--hidden", type=int, default=16,
                   help="width of the hidden layers (default: 16)")
    p.add_argument("--product-order", choices=PRODUCT_ORDERS, default=PRODUCT_ORDERS[0],
                   help="as train's: auto (default) models the order whose SpMM is narrower "
                        "and no backward SpMM of the input; paper models CAGNET's (A^T H) W "
                        "with the first layer's backward SpMM, the order of its closed forms "
                        "(--formulas paper)")
    p.add_argument("--formulas", choices=("ours", "paper"), default="ours",
                   help="paper: after each ranking, CAGNET's closed-form volume per process "
                        "(the paper's 1D/1.5D/2D/3D formulas, hpcgnn/cost/paper.py) beside "
                        "ours for the same grids; with --minibatch-metrics the sparsity-aware "
                        "1.5D SpGEMM's closed form beside the run's bytes (default: ours only)")
    p.add_argument("--minibatch-metrics", default=None, metavar="FILE",
                   help="with --formulas paper: the metrics of a partitioned-layout minibatch "
                        "run (train --metrics): the matrix-based sampling paper's closed form "
                        "of its 1.5D SpGEMM, 8 N (1/c + c/P) bytes per process on the run's "
                        "sampled nonzeros N, for every (P/c) x c grid of each --procs, beside "
                        "the run's measured bytes at its grid (graph and --shape optional)")
    add_head_arguments(p)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                   help="bytes per value of the traffic (default: float32)")
    p.add_argument("--top", type=int, default=15,
                   help="rows to print per P (default 15; 0: none, --out keeps all)")
    p.add_argument("--out", "--json", dest="out", default=None,
                   help="also write every prediction, per P, to this JSON file")
    g = add_sampling_arguments(p)
    g.description = (
        "with --sampler: --mode minibatch's peak memory per rank by part for every (P/c) x c "
        "grid of each --procs, in --graph-layout (default: both layouts)"
    )
    p.set_defaults(func=run, seed=0)


def parse_counts(text: str, flag: str, bounds: list[tuple[int, int]]) -> list[int]:
    """``"4,16,64"`` -> ``[4, 16, 64]``; entry ``k`` must lie in ``bounds[k]`` (or the last)."""
    values = []
    for k, item in enumerate(text.split(",")):
        lo, hi = bounds[min(k, len(bounds) - 1)]
        try:
            value = int(item)
        except ValueError:
            raise ConfigError(
                f"{flag}: expected integers separated by commas, got {text!r}"
            ) from None
        if not lo <= value <= hi:
            raise ConfigError(f"{flag} must be in [{lo}, {hi}], got {item.strip()}")
        values.append(value)
    return values


def shape_meta(text: str) -> Any:
    """The :class:`~hpcgnn.io.reader.GraphMeta` of ``--shape n,nnz,f[,classes]``."""
    from hpcgnn.io.reader import MAX_CLASSES, GraphMeta

    big = 2**62
    values = parse_counts(text, "--shape", [(1, big), (0, big), (1, big), (1, MAX_CLASSES)])
    if len(values) not in (3, 4):
        raise ConfigError(f"--shape: expected n,nnz,f or n,nnz,f,classes, got {text!r}")
    n, nnz, f, classes = (*values, 16)[:4]
    return GraphMeta(f"shape {text}", n, nnz, f, classes, False, f"shape {text}",
                     np.dtype(np.float32), 1, None, None)


def run(args: argparse.Namespace) -> int:
    """Print the ranking for every P; write them all with ``--out``."""
    from hpcgnn.cli.layers import is_user_layer, load_layer
    from hpcgnn.config import TrainConfig
    from hpcgnn.cost.machine import load_machine
    from hpcgnn.cost.ranking import rank_choices
    from hpcgnn.cost.summa import BlockNnzCounter
    from hpcgnn.io.reader import GraphFile
    from hpcgnn.utils.files import atomic_write, check_output
    from hpcgnn.utils.json_text import dumps

    for flag in ("alpha", "beta"):
        value = getattr(args, flag)
        if value is not None and not (math.isfinite(value) and value >= 0.0):
            raise ConfigError(f"--{flag} must be finite and >= 0, got {value}")
    if args.top < 0:
        raise ConfigError(f"--top must be >= 0 (0: print none, --out has all), got {args.top}")
    procs = parse_counts(args.procs, "--procs", [(1, MAX_PROCS)])
    if len(procs) > MAX_STUDY:
        raise ConfigError(f"--procs: at most {MAX_STUDY} rank counts, got {len(procs)}")
    if args.minibatch_metrics is not None:
        if args.formulas != "paper":
            raise ConfigError("--minibatch-metrics needs --formulas paper")
        _print_spgemm_paper(args.minibatch_metrics, procs)
        if args.graph is None and args.shape is None:
            return 0
    if (args.graph is None) == (args.shape is None):
        raise ConfigError("give a graph file or --shape n,nnz,f, not both")
    machine = load_machine(args.machine).placed(args.ranks_per_node)
    cfg = TrainConfig(layers=args.layers, hidden=args.hidden, dtype=args.dtype, model=args.model,
                      heads=args.heads, output_heads=args.output_heads,
                      product_order=args.product_order,
                      layer=load_layer(args.model) if is_user_layer(args.model) else None)
    if args.out:
        check_output(args.out, "model output")
    # the minibatch flags, checked as train checks them (on each P: --global-batch)
    if args.sampler is not None:
        spec_from_args(args, procs[0])
    budget = sample_memory(args)
    counter = None
    if args.shape is not None:
        meta = shape_meta(args.shape)
        blocks = "2D/3D sparse blocks: nonzeros spread uniformly (no file)"
    else:
        with GraphFile(args.graph) as gf:
            meta = gf.meta
        counter = BlockNnzCounter(args.graph, kind=cfg.kind)
        blocks = (
            f"2D/3D sparse blocks: exact nonzeros (uniform beyond {counter.max_cells} blocks)"
            if counter.loaded else "2D/3D sparse blocks: nonzeros spread uniformly (large file)"
        )
    nnz = (f"nnz(A+I)={meta.num_edges + meta.num_nodes}" if cfg.kind.self_loops
           else f"nnz(A)={meta.num_edges}")
    print(
        f"{meta.name or args.graph}: {args.model} n={meta.num_nodes} {nnz}"
        f" widths f={meta.num_features}->{args.hidden}x{args.layers - 1}->{meta.num_classes}"
        f" on {machine.name} | product order {args.product_order} | {blocks}"
    )
    results = []
    for p in procs:
        link = machine.link(p)
        alpha = link.alpha if args.alpha is None else args.alpha
        beta = link.beta if args.beta is None else args.beta
        by_axis = args.placement == "nodes" and args.beta is None
        rows = rank_choices(meta, cfg, p, alpha, beta, counter,
                            machine.axis_betas if by_axis else None)
        _print_ranking(rows[: args.top], p, machine.link_kind(p), alpha, beta)
        if by_axis and machine.link_kind(p) == "inter_node" and p not in machine.collectives:
            print(f"  (collectives inside a node: beta={machine.links['intra_node'].beta:g}"
                  f" s/B; ranks fill nodes of {machine.node_ranks} in order; across nodes"
                  f" the ring streams leaving one of {machine.nics_per_node} injection"
                  f" port(s) share it: {_contention(machine)})")
        if by_axis and machine.groups.get(p):
            sizes = ", ".join(f"{q}: beta={g.beta:g} s/B" for q, g in machine.groups[p].items())
            print(f"  (calibrated grid axes of fewer ranks, by size: {sizes})")
        if args.formulas == "paper":
            _print_paper(rows[: args.top])
        results.append({"procs": p, "link": machine.link_kind(p), "alpha": alpha, "beta": beta,
                        "placement": "nodes" if by_axis else "uniform", "choices": rows})
        if args.sampler is not None:
            spec = spec_from_args(args, p)
            layouts = [args.graph_layout] if args.graph_layout else list(LAYOUTS)
            memory = _minibatch_rows(meta, cfg, spec, p, layouts, budget)
            results[-1]["minibatch_memory"] = memory
            _print_minibatch(memory, spec)
    if len(procs) > 1:
        _print_scaling(results)
    if args.out:
        doc = {
            "graph": meta.name or args.graph, "num_nodes": meta.num_nodes,
            "num_edges": meta.num_edges, "num_features": meta.num_features,
            "num_classes": meta.num_classes, "model": args.model, "layers": args.layers,
            "hidden": args.hidden, "product_order": args.product_order,
            "dtype": args.dtype, "machine": machine.name,
            "ranks_per_node": machine.node_ranks, "results": results,
        }
        atomic_write(args.out, dumps(doc, indent=2), "model output")
    return 0


def _minibatch_rows(meta: Any, cfg: Any, spec: Any, procs: int, layouts: list[str],
                    budget: float | None) -> list[dict]:
    """``--mode minibatch``'s memory per rank on every ``(P/c) x c`` grid and layout."""
    from hpcgnn.layout.shapes import admissible_shapes
    from hpcgnn.sampling.memory import minibatch_memory

    rows = []
    for shape in admissible_shapes("1.5d", procs):
        q, c = shape.dims
        for layout in layouts:
            parts = minibatch_memory(meta, cfg, spec, (q, c), layout, budget)
            rows.append({"grid": str(shape), "graph_layout": layout,
                         "memory_per_rank_bytes": sum(parts.values()),
                         "memory_parts_bytes": parts})
    return rows


def _print_minibatch(rows: list[dict], spec: Any) -> None:
    sizes = ",".join(str(s) for s in spec.sizes)
    print(f"minibatch memory per rank (--sampler {spec.sampler}, sizes {sizes}, batch"
          f" {spec.batch_size}, bulk {spec.bulk}; cost/minibatch_memory.py)")
    print(f"{'grid':>10} {'graph layout':>12} {'mem GB/rank':>11} | peak memory per rank by"
          " part (MiB)")
    for r in rows:
        print(f"{r['grid']:>10} {r['graph_layout']:>12}"
              f" {r['memory_per_rank_bytes'] / 2**30:>11.3f} |"
              f" {memory_words(r['memory_parts_bytes'])}")


def _contention(machine: Any) -> str:
    """Seconds per byte of 1, 2 and 3 ring streams on one injection port, for the notes."""
    return ", ".join(f"{k} stream{'s' * (k > 1)} beta={machine.stream_beta(k):.3g} s/B"
                     for k in (1, 2, 3))


def _print_ranking(rows: list[dict], procs: int, link: str, alpha: float, beta: float) -> None:
    print(f"P={procs} ({link}) alpha={alpha:g} s beta={beta:g} s/B")
    print(
        f"{'rank':>4} {'algo':>5} {'grid':>10} {'comm s/epoch':>13} {'MB/rank':>10}"
        f" {'GB total':>9} {'msgs':>6} {'mem GB/rank':>11}  time by phase (ms)"
        " | peak memory per rank by part (MiB)"
    )
    for i, r in enumerate(rows):
        phases = " ".join(f"{k}={v * 1e3:.3g}" for k, v in r["time_by_phase_s"].items())
        print(
            f"{i + 1:>4} {r['algo']:>5} {r['grid']:>10} {r['time_s']:>13.6f}"
            f" {r['max_rank_bytes'] / 1e6:>10.3f} {r['total_bytes'] / 1e9:>9.3f}"
            f" {r['messages']:>6} {r['memory_per_rank_bytes'] / 2**30:>11.3f}  {phases}"
            f" | {memory_words(r['memory_parts_bytes'])}"
            + (f" | note: {r['note']}" if r["note"] else "")
        )


def memory_words(parts: dict[str, float]) -> str:
    """``graph_blocks=12.3 features=4.5 ...``: the nonzero parts of a peak, in MiB."""
    return " ".join(f"{k}={v / 2**20:.4g}" for k, v in parts.items() if v)


def _print_paper(rows: list[dict]) -> None:
    """CAGNET's closed-form bytes per process beside ours (busiest rank) for each grid."""
    print("paper: CAGNET's closed forms (per process, words x bytes per value) beside ours"
          " (busiest rank), per epoch; docs/communication.md explains the differences")
    print(f"{'algo':>9} {'grid':>10} {'ours MB/rank':>13} {'paper MB/rank':>14}"
          f" {'ours/paper':>11}")
    for r in rows:
        paper = r["paper_bytes_per_rank"]
        if paper is None:
            continue
        ratio = r["max_rank_bytes"] / paper if paper else float("nan")
        print(f"{r['algo']:>9} {r['grid']:>10} {r['max_rank_bytes'] / 1e6:>13.3f}"
              f" {paper / 1e6:>14.3f} {ratio:>11.3f}")


def _print_spgemm_paper(path: str, procs: list[int]) -> None:
    """The 1.5D SpGEMM's closed form on a run's sampled nonzeros beside its measured bytes."""
    import json

    from hpcgnn.cost.minibatch import ID_BYTES, paper_spgemm_words
    from hpcgnn.layout.shapes import admissible_shapes, parse_grid

    try:
        with open(path) as f:
            doc = json.load(f)
        sampling, grid = doc["sampling"], parse_grid(doc["config"]["grid"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"--minibatch-metrics {path}: not a minibatch run's metrics ({e})"
                          ) from None
    nnz = sampling.get("spgemm_nnz")
    if nnz is None or len(grid) != 2:
        raise ConfigError(f"--minibatch-metrics {path}: no sparsity-aware SpGEMM in the run "
                          "(train --mode minibatch --graph-layout partitioned)")
    run_p, run_c = grid[0] * grid[1], grid[1]
    print(f"paper: the sparsity-aware 1.5D SpGEMM's closed form (Tripathy et al. 2024, Sec. "
          f"5.2.1: 8 N (1/c + c/P) bytes per process, 2 N / H(c, P/c)) on the run's "
          f"N={nnz} sampled nonzeros ({sampling.get('sampler')}, {doc['config']['grid']}) "
          f"beside ours (measured: sample_rows/c + sample_combine/P); docs/sampling.md")
    print(f"{'P':>8} {'grid':>10} {'paper MB/process':>17} {'ours MB/process':>16}"
          f" {'paper/ours':>11}")
    for p in procs:
        for shape in admissible_shapes("1.5d", p):
            c = shape.replication
            paper = ID_BYTES * paper_spgemm_words(p, c, nnz)
            ours = sampling.get("measured_spgemm_bytes") if (p, c) == (run_p, run_c) else None
            cells = ("-", "-") if ours is None else (
                f"{ours / 1e6:.6f}", f"{paper / ours:.3f}" if ours else "-")
            print(f"{p:>8} {shape!s:>10} {paper / 1e6:>17.6f} {cells[0]:>16} {cells[1]:>11}")


def _print_scaling(results: list[dict]) -> None:
    """The fastest grid of each algorithm at each P: modelled seconds per epoch (grid)."""
    from hpcgnn.cost.ranking import fastest_per_algo

    algos = list(dict.fromkeys(r["algo"] for res in results for r in res["choices"]))
    print("scaling: modelled communication s/epoch of each algorithm's fastest grid")
    print(f"{'P':>8} " + " ".join(f"{a:>22}" for a in algos))
    for res in results:
        best = {a: f"{r['time_s']:.6f} ({r['grid']})"
                for a, r in fastest_per_algo(res["choices"]).items()}
        print(f"{res['procs']:>8} " + " ".join(f"{best.get(a, '-'):>22}" for a in algos))
