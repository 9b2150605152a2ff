import numpy as np
import pytest

from hpcgnn.exchange.offload import SETUP
from hpcgnn.exchange.reorganize import reorganize_distributed
from hpcgnn.planning.reorganization import choose_schedule
from tests.devices import device_world
from tests.mpi import assert_all
from tests.planning.test_dedup import random_sets


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 3, 4)
@pytest.mark.parametrize(("seed", "chunks", "nv"), [(0, 3, 40), (1, 5, 23), (2, 1, 30), (3, 6, 90)])
def test_distributed_schedule_equals_serial(world, device, seed, chunks, nv):
    # host arrays only, on a communicator of the suite's device (as the offload model's)
    with device_world(device) as comm:
        _check_schedule(comm, seed, chunks, nv)


def _check_schedule(comm, seed, chunks, nv) -> None:
    p = comm.size
    # every rank draws every part's sets (the serial reference) and keeps its own;
    # uneven vertex ranges, some possibly empty
    rng = np.random.default_rng(100 + seed)
    cuts = np.sort(rng.integers(0, nv + 1, p - 1))
    offsets = np.concatenate([[0], cuts, [nv]]).astype(np.int64)
    sets = random_sets(p, chunks, nv, nv // 2, seed)
    comm.stats.reset()
    sched, reorg = reorganize_distributed(comm, sets[comm.rank], offsets)
    expected, expected_reorg = choose_schedule(sets)
    assert_all(comm, np.array_equal(sched, expected), f"{sched} != {expected}")
    assert_all(comm, reorg == expected_reorg, f"{reorg} != {expected_reorg}")
    # every byte counted: the keys received from other ranks and the p all-reduces
    mine = sum(
        int(((s >= offsets[comm.rank]) & (s < offsets[comm.rank + 1])).sum())
        for i in range(p) if i != comm.rank for s in sets[i]
    )
    score_bytes = (p - 1) * 8 * chunks**2 + 16 * chunks**2 + 8
    expect = 8 * mine + round(2 * score_bytes * (p - 1) / p)
    got = comm.stats.categories[SETUP].bytes
    assert_all(comm, abs(got - expect) <= p, f"{SETUP} bytes {got} != {expect}")
