"""What every robustness case asserts, at any number of ranks.

A case runs one ``hpcgnn`` command in process (:func:`hpcgnn.cli.main.main`) on every rank
of the test run and checks, collectively:

* the exit status is 1 on every rank;
* rank 0 printed exactly one line to stderr, ``hpcgnn: error: <message>``, followed at
  several ranks by how many ranks agree, and the other ranks printed nothing (an error that
  only one rank saw would abort the job, which fails the test run loudly rather than
  hanging it);
* nothing printed a traceback;
* no file was created, changed or removed outside the places the command may write (see
  :class:`Snapshot`), and a previous good output is byte for byte intact.

The suite runs serially and at 1, 2, 3 and 4 ranks (``make test``); the acceptance of the
hardening issue asks for 1 and 4.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hpcgnn.cli.main import main
from tests.mpi import _mpi, assert_all, error_output

PREFIX = "hpcgnn: error: "


def run_cli(world: Any, capfd: pytest.CaptureFixture, argv: Sequence[str]) -> tuple[int, str, str]:
    """Run ``hpcgnn argv`` on every rank; return this rank's (status, stdout, stderr)."""
    capfd.readouterr()  # drop what earlier steps of the test printed
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as stop:  # argparse
        rc = stop.code if isinstance(stop.code, int) else 1
    out, err = capfd.readouterr()
    return rc, out, error_output(world, err)


def expect_error(
    world: Any, capfd: pytest.CaptureFixture, argv: Sequence[str], *words: str
) -> str:
    """Run ``hpcgnn argv``; assert a collective one-line failure containing ``words``.

    Returns
    -------
    str
        The message after ``hpcgnn: error:`` (identical on every rank).
    """
    rc, out, err = run_cli(world, capfd, argv)
    assert_all(world, rc == 1, f"exit status {rc}, expected 1; stderr: {err[-2000:]!r}")
    assert "Traceback" not in err, f"a traceback was printed: {err[-2000:]}"
    assert_all(world, "Traceback" not in out, f"a traceback was printed: {out[-2000:]}")
    message = one_error_line(world, err)
    for w in words:
        assert w in message, f"{w!r} not in {message!r}"
    return message


def one_error_line(world: Any, err: str) -> str:
    """Assert ``err`` (rank 0's, :func:`~tests.mpi.error_output`) is one error line; its message."""
    lines = err.splitlines()
    line = lines[0] if len(lines) == 1 else ""
    assert line.startswith(PREFIX), f"stderr is not one error line: {err[-2000:]!r}"
    return line[len(PREFIX):]


class Snapshot:
    """The content of every file under some directories, to compare before and after.

    ``Snapshot(dirs).changes(allowed)`` lists the paths created, changed or removed since
    the snapshot was taken, except those under one of ``allowed``.
    """

    def __init__(self, *dirs: Path) -> None:
        self.dirs = [Path(d) for d in dirs]
        self.before = self._take()

    def _take(self) -> dict[str, str]:
        state = {}
        for d in self.dirs:
            for p in sorted(d.rglob("*")):
                if p.is_symlink():
                    state[str(p)] = "link:" + str(p.readlink())
                elif p.is_file():
                    state[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
        return state

    def changes(self, *allowed: Path) -> list[str]:
        """Paths whose content differs from the snapshot (outside ``allowed``)."""
        after = self._take()
        keep = [str(Path(a)) for a in allowed]
        diff = sorted(
            p for p in set(self.before) | set(after)
            if self.before.get(p) != after.get(p)
            and not any(p == a or p.startswith(a + "/") for a in keep)
        )
        return diff


def expect_error_untouched(
    world: Any, capfd: pytest.CaptureFixture, watch: Sequence[Path], argv: Sequence[str],
    *words: str,
) -> str:
    """:func:`expect_error`, and nothing under ``watch`` changed (checked on rank 0's view)."""
    world_mpi = _mpi(world)
    world_mpi.Barrier()
    snap = Snapshot(*watch) if world_mpi.Get_rank() == 0 else None
    message = expect_error(world, capfd, argv, *words)
    changed = snap.changes() if snap is not None else []
    changed = world_mpi.bcast(changed, root=0)
    assert not changed, f"files changed by a failed command: {changed}"
    return message
