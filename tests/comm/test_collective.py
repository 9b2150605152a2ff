"""Collective error handling: an error on some ranks becomes the same error on every rank."""

from __future__ import annotations

import pytest

from hpcgnn.comm import check, collective
from hpcgnn.errors import ConfigError, GridError, HpcgnnError, InputError
from tests.mpi import assert_all

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(60)]


def _run(world, body) -> BaseException | None:
    """Run ``body`` inside ``collective(world)``; return what it raised on this rank."""
    try:
        with collective(world):
            body()
    except Exception as exc:  # compared collectively below
        return exc
    return None


def test_error_on_one_rank_is_raised_on_every_rank(world):
    last = world.size - 1

    def body():
        if world.rank == last:
            raise InputError("block 7 is corrupt")

    err = _run(world, body)
    ok = type(err) is InputError and str(err) == "block 7 is corrupt" and err.collective
    assert_all(world, ok, f"got {err!r}")
    # the failing rank keeps its own error as the cause
    assert_all(world, (err.__cause__ is not None) == (world.rank == last), "cause")


def test_lowest_failing_rank_wins(world):
    def body():
        if world.rank >= min(1, world.size - 1):
            raise GridError(f"rank {world.rank} has no block")

    err = _run(world, body)
    first = min(1, world.size - 1)
    ok = type(err) is GridError and str(err) == f"rank {first} has no block"
    assert_all(world, ok, f"got {err!r}")


def test_unexpected_exception_becomes_an_internal_error_everywhere(world):
    def body():
        if world.rank == 0:
            raise ValueError("shapes (3,) and (4,) differ")

    err = _run(world, body)
    ok = type(err) is HpcgnnError and err.collective
    ok = ok and str(err) == "internal error on rank 0 (ValueError): shapes (3,) and (4,) differ"
    assert_all(world, ok, f"got {err!r}")


def test_no_error_passes_and_the_body_runs(world):
    ran = []
    err = _run(world, lambda: ran.append(world.rank))
    assert_all(world, err is None and ran == [world.rank], "clean body")
    # the agreement is control traffic: one all-reduce, no broadcast
    assert_all(world, world.stats.snapshot()["control"]["calls"] == 1, "one all-reduce")


def test_check_is_a_collective_assertion(world):
    try:
        check(world, world.rank != world.size - 1, "bad --grid", ConfigError)
    except Exception as exc:  # compared collectively below
        err = exc
    else:
        err = None
    assert_all(world, type(err) is ConfigError and str(err) == "bad --grid", f"got {err!r}")
    check(world, True, "never raised")  # passes on every rank
