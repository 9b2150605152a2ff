"""Each rank's peak memory by phase, gathered on rank 0 (the metrics' ``memory`` section)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pytest

from hpcgnn.backend import Device, emulation
from hpcgnn.comm.memory import MemoryPeaks, memory_section
from tests.mpi import assert_all

pytestmark = [pytest.mark.mpi, pytest.mark.ranks(1, 2), pytest.mark.timeout(60)]

PHASES = ("start", "setup", "training", "evaluation")


def rising(phases: dict[str, list[Any]], size: int, names: list[str] | tuple[str, ...]) -> bool:
    """The ``names`` phases in order, one positive int per rank, none below the one before."""
    values = list(phases.values())
    return (
        list(phases) == list(names)
        and all(len(v) == size and all(type(b) is int and b > 0 for b in v) for v in values)
        and all(a[r] <= b[r] for a, b in pairwise(values) for r in range(size))
    )


def _marked(device: Device) -> MemoryPeaks:
    peaks = MemoryPeaks()
    held = []
    for phase in PHASES:
        held.append(np.ones(1 << 18))  # 2 MiB touched before each mark: the peaks may rise
        peaks.mark(phase, device)
    return peaks


def test_the_peaks_of_every_rank_reach_rank_0_in_one_control_gather(world):
    peaks = _marked(Device("cpu"))
    before = world.stats.snapshot()
    section = memory_section(world, peaks, predicted=1234.5)
    after = world.stats.snapshot()
    calls = {c: after[c]["calls"] - before.get(c, {}).get("calls", 0) for c in after}
    assert_all(world, {c: n for c, n in calls.items() if n} == {"control": 1}, str(calls))
    if world.rank != 0:
        assert_all(world, section is None, "only rank 0 has the section")
        return
    assert section is not None
    host = section["phases"]
    ok = (
        rising(host, world.size, PHASES)
        and section["peak_bytes"] == host["evaluation"]
        and section["predicted_bytes"] == [1234] * world.size
        and section["source"] == "getrusage(RUSAGE_SELF).ru_maxrss"
        and section["device"] is None  # the CPU has no device count
    )
    assert_all(world, ok, str(section))


def test_a_mode_without_an_estimate_predicts_nothing(world):
    section = memory_section(world, _marked(Device("cpu")))
    assert_all(world, world.rank != 0 or "predicted_bytes" not in section, str(section))


def test_the_emulated_gpu_has_no_count_of_its_own(world):
    # its tensors are host memory: in the host peak, and the device entry is null
    dev = Device("cuda", emulated=True)
    assert dev.peak_bytes() is None
    section = memory_section(world, _marked(dev))
    assert_all(world, world.rank != 0 or section["device"] is None, str(section))


def test_a_device_that_counts_its_memory_has_a_device_entry(world, monkeypatch):
    # what a GPU's runtime gives (torch.cuda.max_memory_allocated), through the same path
    counts = iter(range(1000, 1000 + 10 * len(PHASES), 10))
    monkeypatch.setattr(emulation.EmulatedRuntime, "peak_bytes",
                        lambda self, index: next(counts) + world.rank)
    section = memory_section(world, _marked(Device("cuda", emulated=True)))
    if world.rank == 0:
        dev = section["device"]
        want = {p: [1000 + 10 * i + r for r in range(world.size)]
                for i, p in enumerate(PHASES)}
        ok = (dev["phases"] == want and dev["peak_bytes"] == want["evaluation"]
              and dev["source"] == "torch.cuda.max_memory_allocated")
        assert_all(world, ok, str(dev))
    else:
        assert_all(world, True)
