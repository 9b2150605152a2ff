"""``hpcgnn info G.h5``: validate a graph file completely and print its statistics.

The check runs on one process (rank 0 under ``mpiexec``); a problem becomes the same
one-line error on every rank and exit status 1.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hpcgnn.cli.common import run_on_root
from hpcgnn.io.validate import DegreeSummary, GraphReport, validate_file


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``info`` sub-command to ``subparsers``."""
    parser = subparsers.add_parser(
        "info",
        help="validate a graph file and print its statistics",
        description=(
            "Check every dataset of a graph file (structure, index ranges, monotone indptr, "
            "finite and symmetric edge weights, finite features, label ranges, masks, "
            "partition) and print its statistics. "
            "Exits with status 1 and a one-line message on the first problem."
        ),
    )
    parser.add_argument("graph", type=Path, metavar="G.h5", help="graph file to check")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate ``args.graph`` and print its report on rank 0."""
    report = run_on_root(lambda: validate_file(args.graph, show_progress=not args.quiet))
    if report is not None:
        if args.json:
            print(json.dumps(report.to_dict(), indent=2))
        else:
            print("\n".join(report_lines(report)))
    return 0


def _degrees(label: str, d: DegreeSummary) -> str:
    return (
        f"{label + ':':<12} min {d.minimum}, mean {d.mean:.2f}, median {d.median:g}, "
        f"max {d.maximum}, zero {d.zero}"
    )


def _percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def report_lines(report: GraphReport) -> list[str]:
    """Format a :class:`~hpcgnn.io.validate.GraphReport` as human-readable lines.

    The last line is ``valid``.
    """
    meta = report.meta
    n = meta.num_nodes
    lines = [f"file:        {meta.path}"]
    if meta.name:
        lines.append(f"name:        {meta.name}")
    lines.append(f"format:      version {meta.format_version}")
    kind = "directed" if meta.directed else "undirected"
    lines.append(f"vertices:    {n}")
    if report.undirected_edges is None:
        lines.append(f"edges:       {meta.num_edges} ({kind})")
    else:
        lines.append(
            f"edges:       {report.undirected_edges} ({kind}; {meta.num_edges} stored entries of A)"
        )
    lines.append(f"weights:     {'stored (a weight per edge)' if meta.weighted else 'none'}")
    layout = ""
    if meta.feature_nnz is not None:
        density = meta.feature_nnz / (meta.num_nodes * meta.num_features)
        layout = f", stored sparse: {meta.feature_nnz} nonzeros, {100 * density:.2f}%"
    if meta.feature_normalization:
        layout += f", {meta.feature_normalization}-normalised"
    lines.append(f"features:    {meta.num_features} ({meta.feature_dtype}{layout})")
    targets = " (multi-label: a 0/1 target per class)" if meta.multi_label else ""
    lines.append(f"classes:     {meta.num_classes}{targets}")
    for name in ("train", "val", "test"):
        size = getattr(report, name)
        lines.append(f"{name + ':':<12} {size} ({_percent(size, n)})")
    hist = ", ".join(f"{c}: {k}" for c, k in enumerate(report.class_histogram))
    if meta.multi_label:
        lines.append(f"labels:      vertices with each class: {hist}")
    else:
        lines.append(f"labels:      {hist}; unlabelled: {report.unlabelled}")
    if report.in_degree is None:
        lines.append(_degrees("degree", report.out_degree))
    else:
        lines.append(_degrees("out-degree", report.out_degree))
        lines.append(_degrees("in-degree", report.in_degree))
    lines.append(f"isolated:    {report.isolated} ({_percent(report.isolated, n)})")
    p = report.partition
    if p is None:
        lines.append("partition:   none")
    else:
        cut_total = meta.num_edges if report.undirected_edges is None else report.undirected_edges
        lines.append(f"partition:   {p.num_parts} parts ({p.method or 'unknown method'})")
        lines.append(f"  sizes:     {', '.join(str(s) for s in p.sizes)}")
        lines.append(f"  edge cut:  {p.edge_cut} ({_percent(p.edge_cut, cut_total)} of edges)")
        lines.append(
            f"  balance:   {p.vertex_balance:.3f} by vertices, {p.edge_balance:.3f} by edges "
            "(max part / mean part)"
        )
    lines.extend(f"warning:     {w}" for w in report.warnings)
    lines.append("valid")
    return lines
