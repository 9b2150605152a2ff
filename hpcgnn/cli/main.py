"""The ``hpcgnn`` command: argparse sub-commands and the one place errors become exit codes.

Expected errors (:class:`~hpcgnn.errors.HpcgnnError`) print one line,
``hpcgnn: error: <message>``, and exit with status 1. When such an error was agreed
collectively (see :mod:`hpcgnn.comm.collective`) every rank prints the same line and
exits; otherwise, with more than one rank, the job is aborted so no rank can hang.
Any other exception prints its traceback and aborts the whole MPI job.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from hpcgnn import __version__
from hpcgnn.errors import HpcgnnError

SUBCOMMANDS = ("prepare", "partition", "info", "train", "model", "sample", "plan")


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every sub-command registered."""
    import importlib

    parser = argparse.ArgumentParser(
        prog="hpcgnn",
        description="Distributed GNN training on MPI clusters (one rank per GPU or core).",
    )
    parser.add_argument("--version", action="version", version=f"hpcgnn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"hpcgnn.cli.{name}").register(sub)
    return parser


def _world_size() -> int:
    if "mpi4py.MPI" not in sys.modules:
        return 1
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_size() if MPI.Is_initialized() and not MPI.Is_finalized() else 1


def _abort(code: int) -> None:
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``hpcgnn`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HpcgnnError as err:
        # One write per line, so lines of different ranks never interleave.
        sys.stderr.write(f"hpcgnn: error: {err}\n")
        sys.stderr.flush()
        if _world_size() > 1 and not getattr(err, "collective", False):
            _abort(1)
        return 1
    except KeyboardInterrupt:
        print("hpcgnn: interrupted", file=sys.stderr, flush=True)
        if _world_size() > 1:
            _abort(130)
        return 130
    except Exception:
        traceback.print_exc()
        if _world_size() > 1:
            _abort(1)
        return 1


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
