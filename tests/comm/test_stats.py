"""CommStats: counters per category, compute phases and trace spans on one clock."""

from __future__ import annotations

import pytest

from hpcgnn.backend import cpu
from hpcgnn.comm import CommStats


class Ticks:
    """A fake clock: 10.0, 11.0, 12.0, ... one second per reading."""

    def __init__(self) -> None:
        self.now = 9.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_default_clock_is_the_cpu_devices():
    stats = CommStats()
    assert stats.clock == cpu().clock
    assert stats.origin <= cpu().clock()


def test_record_accumulates_calls_bytes_seconds():
    stats = CommStats()
    stats.record("halo", 100, 0.5)
    stats.record("halo", 10.6, 0.25)  # bytes are rounded per call
    stats.record("allreduce", 2 * 80 * 3 / 4, 1.0)
    assert stats.snapshot() == {
        "allreduce": {"calls": 1, "bytes": 120, "seconds": 1.0},
        "halo": {"calls": 2, "bytes": 111, "seconds": 0.75},
    }
    assert stats.total_bytes() == 231
    assert stats.total_seconds() == pytest.approx(1.75)
    assert list(stats.snapshot()) == ["allreduce", "halo"]  # sorted


def test_phase_uses_the_stats_clock():
    stats = CommStats(clock=Ticks())
    assert stats.origin == 10.0
    with stats.phase("local_spmm"):
        pass
    with stats.phase("local_spmm"):
        pass
    with stats.phase("epoch", kind="epoch"):  # timed for the trace only
        pass
    assert stats.compute == {"local_spmm": 2.0}
    stats.record("halo", 8, 0.5)
    assert stats.seconds_by_phase() == {"halo": 0.5, "local_spmm": 2.0}


def test_phase_records_even_when_the_body_raises():
    stats = CommStats(clock=Ticks())
    with pytest.raises(RuntimeError), stats.phase("gemm"):
        raise RuntimeError("boom")
    assert stats.compute == {"gemm": 1.0}


def test_tracing_keeps_spans_relative_to_origin():
    stats = CommStats(clock=Ticks(), tracing=True, max_spans=3)
    with stats.phase("gemm"):  # reads 11, 12
        pass
    stats.record("halo", 8, 0.5)  # ends at 13
    spans = [(s.name, s.start, s.end, s.kind) for s in stats.spans]
    assert spans == [("gemm", 1.0, 2.0, "compute"), ("halo", 2.5, 3.0, "comm")]
    for _ in range(5):
        stats.record("halo", 8, 0.1)
    assert len(stats.spans) == 3  # capped


def test_reset_restarts_counters_and_clock():
    stats = CommStats(clock=Ticks(), tracing=True)
    stats.record("halo", 8, 0.5)
    with stats.phase("gemm"):
        pass
    stats.reset()
    assert stats.snapshot() == {} and stats.compute == {} and stats.spans == []
    assert stats.origin == 14.0
