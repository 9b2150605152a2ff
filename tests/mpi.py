"""Collective test helpers: assertions that cannot hang an MPI test run.

The suite runs serially (``pytest``) and at N ranks
(``mpiexec -n N python -m mpi4py -m pytest --with-mpi``); every rank runs the same test
body. The rules these helpers encode:

Rank-local data is asserted collectively.
    A plain ``assert`` that fails on one rank stops that rank only; the others go on into
    the next collective and wait there for ever. So an assertion on rank-local data goes
    through :func:`assert_all` (or a helper built on it): each rank's pass/fail flag is
    all-reduced first, and the test fails on every rank, with the number of failing ranks
    in the message. :func:`assert_all` is itself a synchronisation point: once it returns
    on any rank, every rank has finished the code before it.

Replicated data may be asserted plainly.
    Data that is by construction identical on every rank fails the same way everywhere,
    so a plain ``assert`` is safe (and reads better). What is where:

    * replicated: the model weights, the loss and the accuracies of every epoch, the
      metrics / trace / samples files written by rank 0 and read back by every rank,
      anything computed from the same seed and the same file on every rank (e.g. a
      serial reference run);
    * rank-local: the logits and the gradients of a rank's row block, a rank's halo and
      send sets, measured bytes before they are summed over ranks, a command's exit code
      and what it printed (only rank 0 prints results, and an error every rank agrees on:
      read it with :func:`error_output`);
    * to check that something meant to be replicated really is, use
      :func:`assert_same_on_all_ranks`.

Files are written by rank 0 and shared.
    The ``shared_tmp`` fixture is rank 0's ``tmp_path``, broadcast, so every rank sees
    the same directory; rank 0 writes inputs with :func:`on_rank0` (which shares rank 0's
    failure with the others instead of leaving them at a barrier) and a file written by a
    command is read after a collective (:func:`assert_all` on its exit code is one).

Every helper takes ``comm`` as either the instrumented :class:`hpcgnn.comm.Comm` (the
``world`` fixture) or a raw ``mpi4py`` communicator, and works unchanged serially (one
rank). ``mpi4py`` is imported lazily, so serial runs of tests that import this module
never initialise MPI.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def _mpi(comm: Any) -> Any:
    """The mpi4py communicator of ``comm`` (an instrumented ``Comm`` or a raw one)."""
    return getattr(comm, "mpi", comm)


def assert_all(comm: Any, ok: bool, message: str = "") -> None:
    """Collective assertion: fails on every rank if ``ok`` is false on any rank.

    Parameters
    ----------
    comm : hpcgnn.comm.Comm or mpi4py.MPI.Comm
        The ranks running the test.
    ok : bool
        This rank's verdict.
    message : str, optional
        Shown on failure, followed by the number of failing ranks.
    """
    from mpi4py import MPI

    bad = _mpi(comm).allreduce(0 if ok else 1, op=MPI.SUM)
    assert bad == 0, f"{message} (failed on {bad} rank(s))"


def _as_numpy(x: Any) -> np.ndarray:
    """``x`` as a NumPy array (torch tensors are detached and copied to the host)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _equal(a: Any, b: Any) -> bool:
    """Exact equality of nested values holding arrays, tensors, numbers and strings."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (str, bytes)) or isinstance(b, (str, bytes)):
        return type(a) is type(b) and a == b
    x, y = _as_numpy(a), _as_numpy(b)
    return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))


def assert_same_on_all_ranks(comm: Any, value: Any, message: str = "") -> None:
    """Assert that ``value`` is identical on every rank (collective).

    Each rank compares its value with rank 0's (exactly: arrays and tensors element by
    element, NaN equal to NaN; dicts, lists and tuples recursively).

    Parameters
    ----------
    comm : hpcgnn.comm.Comm or mpi4py.MPI.Comm
        The ranks running the test.
    value : object
        A picklable value meant to be replicated (weights, a loss history, a hash).
    message : str, optional
        Shown on failure.
    """
    root = _mpi(comm).bcast(value, root=0)
    assert_all(comm, _equal(value, root), message or f"value differs from rank 0's: {value!r}")


def assert_close_all(
    comm: Any,
    actual: Any,
    desired: Any,
    rtol: float = 1e-7,
    atol: float = 0.0,
    message: str = "",
) -> None:
    """Collective ``allclose``: fails on every rank if any rank's values differ.

    Parameters
    ----------
    comm : hpcgnn.comm.Comm or mpi4py.MPI.Comm
        The ranks running the test.
    actual, desired : array-like, tensor, or sequence of them
        This rank's values and the expected ones (e.g. a block's logits and the serial
        reference's rows of that block); sequences are compared element by element
        and must have the same length.
    rtol, atol : float, optional
        Tolerances, as in :func:`numpy.allclose`.
    message : str, optional
        Shown on failure.
    """
    if _is_sequence(actual) and _is_sequence(desired):
        ok = len(actual) == len(desired) and all(
            _close(a, d, rtol, atol) for a, d in zip(actual, desired, strict=True)
        )
    else:
        ok = _close(actual, desired, rtol, atol)
    assert_all(comm, ok, message or f"values differ (rtol={rtol}, atol={atol})")


def _close(a: Any, d: Any, rtol: float, atol: float) -> bool:
    x, y = _as_numpy(a), _as_numpy(d)
    return x.shape == y.shape and bool(np.allclose(x, y, rtol=rtol, atol=atol))


def _is_sequence(x: Any) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes))


def on_rank0(comm: Any, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` on rank 0 only; share its result or its failure.

    The collective replacement of ``if rank == 0: write(...)`` followed by a barrier: when
    ``fn`` raises on rank 0, every rank raises an :class:`AssertionError` naming the error
    (instead of the other ranks waiting at the barrier for ever).

    Parameters
    ----------
    comm : hpcgnn.comm.Comm or mpi4py.MPI.Comm
        The ranks running the test.
    fn : callable
        What rank 0 does, typically writing a shared input file under ``shared_tmp``.
    *args, **kwargs
        Passed to ``fn``.

    Returns
    -------
    object
        ``fn``'s result (broadcast from rank 0; it must be picklable).
    """
    mpi = _mpi(comm)
    outcome: tuple[bool, Any] = (True, None)
    error: Exception | None = None
    if mpi.Get_rank() == 0:
        try:
            outcome = (True, fn(*args, **kwargs))
        except Exception as exc:  # shared below, so every rank fails alike
            error, outcome = exc, (False, f"{type(exc).__name__}: {exc}")
    ok, value = mpi.bcast(outcome, root=0)
    if not ok:
        raise AssertionError(f"rank 0 failed: {value}") from error
    return value


#: How the command ends a collective error's line at several ranks (:mod:`hpcgnn.cli.main`).
AGREE = re.compile(r" \((all \d+ ranks agree|found on \d+ of \d+ ranks; all \d+ agree)\)$")


def error_output(comm: Any, err: str) -> str:
    """Rank 0's stderr ``err`` on every rank, with collective errors' tails cut.

    An error every rank agrees on is printed once, by rank 0, ending with how many ranks
    agree (at several ranks); the other ranks print no error line (asserted collectively).
    ``err``: this rank's, e.g. ``capsys.readouterr().err``.
    """
    rank, size = _mpi(comm).Get_rank(), _mpi(comm).Get_size()
    assert_all(comm, rank == 0 or "hpcgnn: error" not in err,
               f"rank {rank} printed an error line: {err[-2000:]!r}")
    err = _mpi(comm).bcast(err, root=0) if size > 1 else err
    lines = err.splitlines(keepends=True)
    if size > 1:
        errors = [ln for ln in lines if ln.startswith("hpcgnn: error")]
        assert all(AGREE.search(ln.rstrip("\n")) for ln in errors), errors
        lines = [AGREE.sub("", ln.rstrip("\n")) + ln[len(ln.rstrip("\n")):]
                 if ln.startswith("hpcgnn: error") else ln for ln in lines]
    return "".join(lines)
