"""CommStats: counters per category, compute phases and trace spans on one clock."""

from __future__ import annotations

import pytest

from hpcgnn.backend import Mark, cpu
from hpcgnn.comm import CommStats
from hpcgnn.comm.stats import SlotTimer


class Ticks:
    """A fake clock: 10.0, 11.0, 12.0, ... one second per reading or mark."""

    def __init__(self) -> None:
        self.now = 9.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now

    def mark(self) -> Mark:
        return Mark(self())

    def stats(self, **kw) -> CommStats:
        return CommStats(clock=self, mark=self.mark, **kw)


class LazyMark(Mark):
    """A mark that counts the readings of its seconds (a GPU mark waits when read)."""

    reads = 0

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)

    @property
    def seconds(self) -> float:
        LazyMark.reads += 1
        return super().seconds


def test_default_clock_is_the_cpu_devices():
    stats = CommStats()
    assert stats.clock == cpu().clock and stats.mark == cpu().mark
    assert stats.origin <= cpu().clock()


def test_phases_and_calls_are_read_when_the_counters_are():
    """Marks wait unread (no device wait) until a reader settles them, all at once."""
    ticks = Ticks()
    stats = CommStats(clock=ticks, mark=lambda: LazyMark(ticks()))
    LazyMark.reads = 0
    for _ in range(50):
        with stats.phase("gemm"):
            pass
        stats.record("halo", 8, since=stats.mark())
    assert LazyMark.reads == 0
    assert stats.seconds_by_phase() == {"gemm": 50.0, "halo": 50.0}
    assert LazyMark.reads == 200 and stats.compute == {"gemm": 50.0}


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
    stats = Ticks().stats()
    assert stats.origin == 10.0
    with stats.phase("local_spmm"):
        pass
    with stats.phase("local_spmm"):
        pass
    with stats.phase("epoch", kind="epoch"):  # timed for the trace only: not even marked
        pass
    stats.settle()
    assert stats.compute == {"local_spmm": 2.0}
    stats.record("halo", 8, 0.5)
    assert stats.seconds_by_phase() == {"halo": 0.5, "local_spmm": 2.0}


def test_phase_records_even_when_the_body_raises():
    stats = Ticks().stats()
    with pytest.raises(RuntimeError), stats.phase("gemm"):
        raise RuntimeError("boom")
    assert stats.seconds_by_phase() == {"gemm": 1.0}


def test_tracing_keeps_spans_relative_to_origin():
    stats = Ticks().stats(tracing=True, max_spans=3)
    with stats.phase("gemm"):  # marks 11, 12
        pass
    stats.record("halo", 8, 0.5)  # ends at 13
    stats.settle()
    spans = [(s.name, s.start, s.end, s.kind) for s in stats.spans]
    assert spans == [("gemm", 1.0, 2.0, "compute"), ("halo", 2.5, 3.0, "comm")]
    for _ in range(5):
        stats.record("halo", 8, 0.1)
    stats.settle()
    assert len(stats.spans) == 3  # capped


def test_reset_restarts_counters_and_clock():
    stats = Ticks().stats(tracing=True)
    stats.record("halo", 8, 0.5)
    with stats.phase("gemm"):
        pass
    stats.reset()
    assert stats.snapshot() == {} and stats.compute == {} and stats.spans == []
    assert stats.origin == 14.0


def test_slot_timer_reads_its_marks_lazily():
    timer = SlotTimer(3)
    LazyMark.reads = 0
    timer.add(1, LazyMark(2.0), LazyMark(5.0))
    timer.add(1, LazyMark(6.0), LazyMark(6.5))
    assert LazyMark.reads == 0
    assert timer.seconds.tolist() == [0.0, 3.5, 0.0] and LazyMark.reads == 4
    timer.reset()
    assert timer.seconds.tolist() == [0.0, 0.0, 0.0]
