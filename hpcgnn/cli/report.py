"""``hpcgnn report M.json [more.json ...] --out DIR``: plots and ``index.md``."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``report`` sub-command."""
    p = sub.add_parser(
        "report",
        help="plots (PNG, SVG) and index.md from metrics files and model scaling studies",
        description="Draw loss and accuracy curves, per-phase time bars, measured vs predicted "
                    "bytes and exchange volumes of `train --metrics` files, and scaling curves "
                    "of `model --out` files, into DIR with an index.md (needs matplotlib).",
    )
    p.add_argument("inputs", nargs="+", metavar="M.json",
                   help="metrics files (train --metrics) and scaling studies (model --out)")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for the report")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the report (rank 0 when launched under MPI) and list its files."""
    from hpcgnn.cli.common import run_on_root
    from hpcgnn.plots.report import write_report

    files = run_on_root(lambda: write_report(args.inputs, args.out))
    for path in files or []:
        print(path)
    return 0
