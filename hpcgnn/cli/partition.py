"""``hpcgnn partition G.h5 --parts K --method {block,random,metis} --out Gp.h5``.

Computes a vertex partition, writes the graph relabelled so that each part is a
contiguous id range (see :mod:`hpcgnn.partition.relabel`) and prints the edge cut and the
balance. Runs on one process (rank 0 under ``mpiexec``).

``--hierarchy NODESxRANKS`` or ``--topology T.json`` (with ``--method metis``) partitions
hierarchically, nodes first (:mod:`hpcgnn.partition.hierarchy`), and prints the cut across
and within nodes beside flat METIS's.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from hpcgnn.cli.common import run_on_root
from hpcgnn.errors import ConfigError
from hpcgnn.io.reader import GraphFile, GraphMeta
from hpcgnn.io.validate import PartitionSummary, validate_file
from hpcgnn.partition.hierarchy import (
    Hierarchy,
    LevelCuts,
    hierarchical_partition,
    level_cuts,
)
from hpcgnn.partition.methods import (
    BALANCES,
    METHODS,
    check_balance,
    check_num_parts,
    compute_partition,
    metis_partition,
    summarise,
)
from hpcgnn.partition.relabel import write_relabelled
from hpcgnn.utils.files import check_output
from hpcgnn.utils.progress import Step


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``partition`` sub-command to ``subparsers``."""
    parser = subparsers.add_parser(
        "partition",
        help="partition a graph file and relabel its vertices part by part",
        description=(
            "Partition the vertices into K parts and write a copy of the graph whose "
            "vertices are renumbered so that each part is a contiguous id range. The "
            "permutation (perm[new] = original id) and the part offsets are stored in the "
            "output. Prints the edge cut and the balance."
        ),
    )
    parser.add_argument("graph", type=Path, metavar="G.h5", help="input graph file")
    parser.add_argument("--parts", "-k", type=int, required=True, metavar="K",
                        help="number of parts (1 <= K <= number of vertices)")
    parser.add_argument("--method", choices=METHODS, default="metis",
                        help="partitioning method (default: metis)")
    parser.add_argument("--out", "-o", type=Path, required=True, metavar="Gp.h5",
                        help="output graph file")
    parser.add_argument("--balance", choices=BALANCES, default="vertices",
                        help="with --method metis: what the parts get equal shares of, "
                             "vertices, or edges (each vertex weighs 1 + its degree: a "
                             "rank's SpMM, halo and memory follow its edges; on a power-law "
                             "graph a vertex balance may leave most edges in one part) "
                             "(default: vertices)")
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed for the random and metis methods (default: 0)")
    levels = parser.add_mutually_exclusive_group()
    levels.add_argument("--hierarchy", metavar="NODESxRANKS",
                        help="with --method metis: cut into NODES parts first, then each "
                             "node's subgraph into RANKS parts (node i owns parts "
                             "i*RANKS .. (i+1)*RANKS-1); K must be NODES*RANKS")
    levels.add_argument("--topology", metavar="T.json",
                        help="as --hierarchy, with the nodes and their ranks of a topology "
                             "file (or a shipped one's name); K must be its ranks")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


#: ``method`` recorded in a file partitioned hierarchically.
HIERARCHICAL = "metis-hierarchical"


@dataclass(frozen=True)
class HierarchyReport:
    """The cut of a hierarchical partition and of flat METIS, across and within nodes."""

    hierarchy: Hierarchy
    hierarchical: LevelCuts
    flat: LevelCuts


def hierarchy_of(args: argparse.Namespace) -> Hierarchy | None:
    """The hierarchy ``--hierarchy`` or ``--topology`` asks for, checked against ``--parts``."""
    if args.hierarchy is None and args.topology is None:
        return None
    if args.method != "metis":
        raise ConfigError("--hierarchy and --topology partition with --method metis only")
    if args.topology is not None:
        from hpcgnn.planning.topology import load_topology

        topo = load_topology(args.topology, ranks=args.parts)
        return Hierarchy.of_topology(topo.node_of, topo.name)
    hierarchy = Hierarchy.of_shape(args.hierarchy)
    if hierarchy.num_parts != args.parts:
        raise ConfigError(f"--parts {args.parts} is not the {hierarchy.num_parts} ranks of "
                          f"--hierarchy {args.hierarchy}")
    return hierarchy


#: Edges from which a partition is announced before it starts (METIS on 32M edges took
#: 65-139 s here, holding the interpreter, so no line can come while it runs).
LONG_PARTITION_EDGES = 2_000_000


def partition_file(
    graph: Path, out: Path, num_parts: int, method: str, seed: int = 0,
    show_progress: bool = True, hierarchy: Hierarchy | None = None,
    balance: str = "vertices",
) -> tuple[PartitionSummary, GraphMeta, HierarchyReport | None]:
    """Validate ``graph``, partition it and write the relabelled graph to ``out``.

    ``hierarchy`` (with ``method`` ``metis``): partition nodes first, then ranks, and
    compare the cut with flat METIS's. ``balance``: what METIS's parts share equally
    (``partition.methods.BALANCES``).

    Returns
    -------
    summary : PartitionSummary
        Part sizes, edges per part and edge cut of the new partition.
    meta : GraphMeta
        Header of the input file.
    report : HierarchyReport or None
        With ``hierarchy``: the cuts across and within nodes, hierarchical and flat.

    """
    if graph.resolve() == out.resolve():
        raise ConfigError("--out must name a new file, not the input file")
    check_output(out, "--out")
    check_balance(balance, method)
    validate_file(graph, show_progress=show_progress)
    with GraphFile(graph) as src:
        meta = src.meta
        check_num_parts(num_parts, meta.num_nodes)
        with Step(f"reading {meta.num_edges:,} edges", enabled=show_progress):
            adjacency = src.read_csr(0, meta.num_nodes, weights=meta.weighted)  # kept
        big = adjacency.nnz >= LONG_PARTITION_EDGES  # METIS says nothing until it returns
        with Step(f"partitioning {meta.num_nodes:,} vertices, {adjacency.nnz:,} edges into"
                  f" {num_parts} parts by {method}", announce=big, enabled=show_progress):
            if hierarchy is None:
                parts = compute_partition(method, adjacency, num_parts, seed, balance)
            else:
                method = HIERARCHICAL
                parts = hierarchical_partition(adjacency, hierarchy, seed, balance)
                flat = metis_partition(adjacency, num_parts, seed, balance=balance)
        report = None if hierarchy is None else HierarchyReport(
            hierarchy, level_cuts(adjacency, parts, hierarchy, meta.directed),
            level_cuts(adjacency, flat, hierarchy, meta.directed))
        summary = summarise(adjacency, parts, num_parts, method, meta.directed)
        write_relabelled(src, out, parts, num_parts, method, summary.edge_cut,
                         adjacency=adjacency, show_progress=show_progress)
    return summary, meta, report


def run(args: argparse.Namespace) -> int:
    """Partition ``args.graph`` on rank 0 and print the result."""
    from hpcgnn.config import check_random_key

    check_random_key(args.seed)  # on every rank alike, before rank 0 reads anything
    hierarchy = hierarchy_of(args)
    outcome = run_on_root(lambda: partition_file(
        args.graph, args.out, args.parts, args.method, args.seed, not args.quiet, hierarchy,
        args.balance,
    ))
    if outcome is not None:
        summary, meta, report = outcome
        print("\n".join(summary_lines(summary, meta, out=args.out)))
        if report is not None:
            print("\n".join(hierarchy_lines(report, meta.directed)))
    return 0


def hierarchy_lines(report: HierarchyReport, directed: bool) -> list[str]:
    """The cut across and within nodes of the hierarchical and the flat METIS partition.

    Flat METIS's part ``k`` goes to rank ``k`` as a run would place it, so its node is
    ``hierarchy.node_of[k]``.
    """
    h = report.hierarchy
    kind = "directed" if directed else "undirected"
    rows = [("hierarchical", report.hierarchical), ("flat metis", report.flat)]
    return [
        f"hierarchy {h.label}: {h.num_nodes} nodes, {h.num_parts} ranks; {kind} edges cut",
        f"{'':14}{'across nodes':>14}{'within nodes':>14}{'total':>10}",
        *(f"{name:14}{c.across_nodes:>14}{c.within_nodes:>14}{c.total:>10}"
          for name, c in rows),
    ]


def summary_lines(summary: PartitionSummary, meta: GraphMeta, out: Path) -> list[str]:
    """Describe a partition of the graph ``meta`` written to ``out`` in a few lines.

    The edge cut counts edges whose endpoints lie in different parts: every entry of
    ``A`` for a directed graph, every undirected edge once for an undirected graph.
    """
    sizes = summary.sizes
    mean = sum(sizes) / len(sizes)
    kind = "directed" if meta.directed else "undirected"
    total = meta.num_edges if meta.directed else meta.num_edges // 2
    share = f" ({100.0 * summary.edge_cut / total:.1f}%)" if total else ""
    return [
        f"wrote {out}: {meta.num_nodes} vertices in {summary.num_parts} parts "
        f"by {summary.method}",
        f"edge cut: {summary.edge_cut} of {total} {kind} edges{share} join different parts",
        f"balance:  {summary.vertex_balance:.3f} by vertices (largest part {max(sizes)}, "
        f"mean {mean:.1f}), {summary.edge_balance:.3f} by edges (largest / mean)",
    ]
