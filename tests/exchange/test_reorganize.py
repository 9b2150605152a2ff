import numpy as np
import pytest

from hpcgnn.exchange.offload import SETUP
from hpcgnn.exchange.reorganize import reorganize_distributed
from hpcgnn.planning.reorganization import choose_schedule
from tests.mpi import assert_all
from tests.planning.test_dedup import random_sets


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 3, 4)
@pytest.mark.parametrize(("seed", "chunks", "nv"), [(0, 3, 40), (1, 5, 23), (2, 1, 30), (3, 6, 90)])
def test_distributed_schedule_equals_serial(world, seed, chunks, nv):
    p = world.size
    # every rank draws every part's sets (the serial reference) and keeps its own;
    # uneven vertex ranges, some possibly empty
    rng = np.random.default_rng(100 + seed)
    cuts = np.sort(rng.integers(0, nv + 1, p - 1))
    offsets = np.concatenate([[0], cuts, [nv]]).astype(np.int64)
    sets = random_sets(p, chunks, nv, nv // 2, seed)
    world.stats.reset()
    sched, reorg = reorganize_distributed(world, sets[world.rank], offsets)
    expected, expected_reorg = choose_schedule(sets)
    assert_all(world, np.array_equal(sched, expected), f"{sched} != {expected}")
    assert_all(world, reorg == expected_reorg, f"{reorg} != {expected_reorg}")
    # every byte counted: the keys received from other ranks and the p all-reduces
    mine = sum(
        int(((s >= offsets[world.rank]) & (s < offsets[world.rank + 1])).sum())
        for i in range(p) if i != world.rank for s in sets[i]
    )
    score_bytes = (p - 1) * 8 * chunks**2 + 16 * chunks**2 + 8
    expect = 8 * mine + round(2 * score_bytes * (p - 1) / p)
    got = world.stats.categories[SETUP].bytes
    assert_all(world, abs(got - expect) <= p, f"{SETUP} bytes {got} != {expect}")
