"""Collective error handling: an error on any rank becomes the same error on every rank.

Wrap any step that may fail on a subset of ranks (reading a block of a file, checking a
shape) in :func:`collective`. At the end of the block the ranks agree: if any rank
raised, every rank raises one :class:`~hpcgnn.errors.HpcgnnError` carrying the message
of the lowest failing rank, so all ranks exit with the same line and none hangs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mpi4py import MPI

from hpcgnn.comm.communicator import Comm
from hpcgnn.errors import ConfigError, GridError, HpcgnnError, InputError, OutputError

_KINDS: dict[str, type[HpcgnnError]] = {
    cls.__name__: cls for cls in (HpcgnnError, InputError, GridError, ConfigError, OutputError)
}


def agree(comm: Comm, error: BaseException | None) -> None:
    """Raise the first rank's error on every rank if any rank passed one; else return.

    Parameters
    ----------
    comm
        Communicator whose ranks must agree.
    error
        This rank's error, or ``None``.
    """
    bad = comm.allreduce_scalar(comm.rank if error is not None else comm.size, MPI.MIN)
    if bad == comm.size:
        return
    failing = comm.allreduce_scalar(int(error is not None), MPI.SUM)
    payload = None
    if comm.rank == bad:
        assert error is not None
        payload = (type(error).__name__, str(error), isinstance(error, HpcgnnError))
    kind, message, expected = comm.bcast_obj(payload, root=bad)
    cls = _KINDS.get(kind, HpcgnnError)
    text = message if expected else f"internal error on rank {bad} ({kind}): {message}"
    err = cls(text, collective=True)
    err.failing = failing
    if error is not None:
        raise err from error
    raise err


@contextmanager
def collective(comm: Comm) -> Iterator[None]:
    """Run the body on every rank, then raise on all ranks if it failed on any.

    Examples
    --------
    >>> with collective(grid.world):                     # doctest: +SKIP
    ...     block = graph_file.read_csr(lo, hi)
    """
    error: BaseException | None = None
    try:
        yield
    except Exception as exc:  # every failure must reach the agreement below
        error = exc
    agree(comm, error)


def check(comm: Comm, ok: bool, message: str, error: type[HpcgnnError] = HpcgnnError) -> None:
    """Collective assertion: raise ``error(message)`` on every rank unless ``ok`` on all."""
    agree(comm, None if ok else error(message))
