"""``hpcgnn partition G.h5 --parts K --method {block,random,metis} --out Gp.h5``.

Computes a vertex partition, writes the graph relabelled so that each part is a
contiguous id range (see :mod:`hpcgnn.partition.relabel`) and prints the edge cut and the
balance. Runs on one process (rank 0 under ``mpiexec``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hpcgnn.cli.common import run_on_root
from hpcgnn.errors import ConfigError
from hpcgnn.io.reader import GraphFile, GraphMeta
from hpcgnn.io.validate import PartitionSummary, validate_file
from hpcgnn.partition.methods import METHODS, check_num_parts, compute_partition, summarise
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
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed for the random and metis methods (default: 0)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


#: Edges from which a partition is announced before it starts (METIS on 32M edges took
#: 65-139 s here, holding the interpreter, so no line can come while it runs).
LONG_PARTITION_EDGES = 2_000_000


def partition_file(
    graph: Path, out: Path, num_parts: int, method: str, seed: int = 0,
    show_progress: bool = True,
) -> tuple[PartitionSummary, GraphMeta]:
    """Validate ``graph``, partition it and write the relabelled graph to ``out``.

    Returns
    -------
    summary : PartitionSummary
        Part sizes, edges per part and edge cut of the new partition.
    meta : GraphMeta
        Header of the input file.

    """
    if graph.resolve() == out.resolve():
        raise ConfigError("--out must name a new file, not the input file")
    check_output(out, "--out")
    validate_file(graph, show_progress=show_progress)
    with GraphFile(graph) as src:
        meta = src.meta
        check_num_parts(num_parts, meta.num_nodes)
        with Step(f"reading {meta.num_edges:,} edges", enabled=show_progress):
            adjacency = src.read_csr(0, meta.num_nodes, weights=meta.weighted)  # kept
        big = adjacency.nnz >= LONG_PARTITION_EDGES  # METIS says nothing until it returns
        with Step(f"partitioning {meta.num_nodes:,} vertices, {adjacency.nnz:,} edges into"
                  f" {num_parts} parts by {method}", announce=big, enabled=show_progress):
            parts = compute_partition(method, adjacency, num_parts, seed)
        summary = summarise(adjacency, parts, num_parts, method, meta.directed)
        write_relabelled(src, out, parts, num_parts, method, summary.edge_cut,
                         adjacency=adjacency, show_progress=show_progress)
    return summary, meta


def run(args: argparse.Namespace) -> int:
    """Partition ``args.graph`` on rank 0 and print the result."""
    from hpcgnn.config import check_random_key

    check_random_key(args.seed)  # on every rank alike, before rank 0 reads anything
    outcome = run_on_root(lambda: partition_file(
        args.graph, args.out, args.parts, args.method, args.seed, not args.quiet,
    ))
    if outcome is not None:
        print("\n".join(summary_lines(*outcome, out=args.out)))
    return 0


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
