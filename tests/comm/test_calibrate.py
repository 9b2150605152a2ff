"""The calibration's busy collectives: broadcast rounds run as a 1D SpMM runs its stages."""

from __future__ import annotations

import pytest

from hpcgnn.comm import calibrate
from hpcgnn.comm.calibrate import (
    COLLECTIVE_BYTES,
    STAGE_DEGREE,
    busy_collectives,
    group_sizes,
)
from tests.mpi import assert_all

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(120)]


def test_stage_block_holds_the_ranks_share_of_a_rows_neighbours(world):
    rows, p = 1000, 4
    block = calibrate._stage_block(world, rows, p)
    nnz = block.values().numel()
    # rows * degree / p drawn at random positions; coalescing merges a few repeats
    ok = tuple(block.shape) == (rows, rows) and 0.95 * rows * STAGE_DEGREE / p <= nnz \
        <= rows * STAGE_DEGREE / p
    assert_all(world, ok, f"shape {tuple(block.shape)}, {nnz} nonzeros")


def test_busy_collectives_are_in_the_cost_models_accounting(world):
    samples = busy_collectives(world, repeats=1)
    p = world.size
    # a round: P broadcasts, (P - 1) m bytes received by a rank; the same numbers on every rank
    ok = [(m, b) for m, b, _ in samples] == [(p, float((p - 1) * m)) for m in COLLECTIVE_BYTES]
    ok = ok and all(s > 0 for _, _, s in samples)
    assert_all(world, ok, f"{samples}")
    same = world.allgather_obj(samples)
    assert_all(world, all(s == samples for s in same), "samples differ between ranks")


def test_group_sizes_are_the_divisors_from_two_with_the_job_last():
    assert group_sizes(1) == [] and group_sizes(2) == [2] and group_sizes(7) == [7]
    assert group_sizes(8) == [2, 4, 8] and group_sizes(12) == [2, 3, 4, 6, 12]


def test_group_rounds_are_in_the_groups_accounting(world):
    """Groups of ``q`` ranks at once: ``q`` messages and ``(q - 1) m`` bytes a round."""
    q = 2 if world.size % 2 == 0 else world.size
    samples = busy_collectives(world, repeats=1, group=q)
    ok = [(m, b) for m, b, _ in samples] == [(q, float((q - 1) * m)) for m in COLLECTIVE_BYTES]
    ok = ok and all(s > 0 for _, _, s in samples)
    assert_all(world, ok, f"{samples}")
    same = world.allgather_obj(samples)
    assert_all(world, all(s == samples for s in same), "samples differ between ranks")
    if world.size > 2:
        with pytest.raises(ValueError, match="does not divide"):
            busy_collectives(world, repeats=1, group=world.size - 1)
