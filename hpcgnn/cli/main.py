"""The ``hpcgnn`` command: argparse sub-commands and the one place errors become exit codes.

Expected errors (:class:`~hpcgnn.errors.HpcgnnError`) print one line,
``hpcgnn: error: <message>`` (control characters and newlines escaped, so text read from a
file can neither forge a line nor drive the terminal), and exit with status 1. When such an
error was agreed collectively (see :mod:`hpcgnn.comm.collective`) rank 0 prints it once,
saying how many ranks agree, and every rank exits; otherwise, with more than one rank, the
job is aborted so no rank can hang. Any other exception prints its traceback and aborts the
whole MPI job. SIGINT and SIGTERM unwind the command (every writer removes its temporary
files, see :mod:`hpcgnn.utils.interrupts`), print one line and exit with 130 or 143.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from contextlib import suppress

from hpcgnn import __version__
from hpcgnn.cli.config_file import with_config
from hpcgnn.errors import HpcgnnError
from hpcgnn.utils.files import leaves_nothing_behind
from hpcgnn.utils.interrupts import Interrupted, interrupts_unwind
from hpcgnn.utils.memory import allocation_failure
from hpcgnn.utils.text import printable

SUBCOMMANDS = (
    "prepare", "partition", "info", "train", "predict", "model", "sample", "plan", "jobs",
    "report",
)


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


def _world_rank() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


def agreement(err: HpcgnnError, size: int) -> str:
    """What follows a collective error's message: how many of ``size`` ranks agree."""
    failing = err.failing
    if failing is None or failing == size:
        return f" (all {size} ranks agree)"
    return f" (found on {failing} of {size} ranks; all {size} agree)"


def _abort(code: int) -> None:
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(code)


#: What to do when mpi4py finds no MPI library (the one line instead of a traceback).
NO_MPI_HINT = (
    "pip install 'hpcgnn[mpich]' for the MPICH wheel (a laptop, CI), or on a cluster load its "
    "MPI (module load ...) and build mpi4py against it (make setup MPI=system)"
)


def missing_mpi(err: BaseException) -> str | None:
    """The one-line error for mpi4py failing to load an MPI library, else ``None``.

    mpi4py 4 raises a ``RuntimeError`` whose first line is "cannot load MPI library" and
    whose next lines say why; a build linked against a library that is gone raises an
    ``ImportError`` naming ``libmpi``.
    """
    text = str(err)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if isinstance(err, RuntimeError) and lines and lines[0] == "cannot load MPI library":
        why = lines[1] if len(lines) > 1 else "no library found"
    elif isinstance(err, ImportError) and "libmpi" in text:
        why = lines[0] if lines else text
    else:
        return None
    return f"mpi4py cannot load an MPI library ({why}): {NO_MPI_HINT}"


def _run(args: argparse.Namespace) -> int:
    """Run the sub-command; nothing is left behind, even when it is interrupted."""
    with leaves_nothing_behind(), interrupts_unwind():
        return int(args.func(args) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``hpcgnn`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(with_config(sys.argv[1:] if argv is None else argv))
        return _run(args)
    except HpcgnnError as err:
        # One write per line, so lines of different ranks never interleave; one line
        # whatever the message holds (names read from files are data: escaped, never raw)
        size = _world_size()
        together = size > 1 and err.collective
        if not together or _world_rank() == 0:  # an agreed error once, not once per rank
            tail = agreement(err, size) if together else ""
            sys.stderr.write(f"hpcgnn: error: {printable(str(err))}{tail}\n")
            sys.stderr.flush()
        if size > 1 and not together:
            _abort(1)
        return 1
    except BrokenPipeError:
        # whoever read our output stopped (`| head -1`): stop too, without a traceback;
        # stdout goes nowhere so that the interpreter's last flush fails no more
        with suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if _world_size() > 1:
            _abort(1)
        return 1
    except KeyboardInterrupt as stop:
        if not isinstance(stop, Interrupted):  # raised by Python's own SIGINT handler
            stop = Interrupted(signal.SIGINT)
        print(f"hpcgnn: interrupted by {stop}", file=sys.stderr, flush=True)
        if _world_size() > 1:
            _abort(stop.exit_status)
        return stop.exit_status
    except Exception as err:
        line = missing_mpi(err)
        if line is not None:  # no MPI at all: this process is alone, nothing to abort
            sys.stderr.write(f"hpcgnn: error: {printable(line)}\n")
            return 1
        line = allocation_failure(err)
        if line is not None:  # one rank's allocator: one line, and the job ends
            size = _world_size()
            where = f" (rank {_world_rank()} of {size})" if size > 1 else ""
            sys.stderr.write(f"hpcgnn: error: {printable(line)}{where}\n")
            if size > 1:
                _abort(1)
            return 1
        traceback.print_exc()
        if _world_size() > 1:
            _abort(1)
        return 1


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
