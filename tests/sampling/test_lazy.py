"""LazyShare: a bulk sampled group by group as it is read, each group released after use."""

import gc
import weakref

import numpy as np
import pytest
from mpi4py import MPI

from hpcgnn.grid import ProcessGrid
from hpcgnn.io import GraphFile
from hpcgnn.sampling import bulk, memory
from hpcgnn.sampling.bulk import BulkSampler, my_share, read_train_ids, sample_stack
from hpcgnn.sampling.lazy import LazyShare
from hpcgnn.sampling.rows import read_pattern
from hpcgnn.sampling.sampled import SampledBatch
from hpcgnn.sampling.shuffle import minibatches
from hpcgnn.sampling.spec import SamplerSpec
from tests.mpi import assert_all
from tests.sampling import same_batches


def fake_share(size: int, group: int):
    """A share whose groups are ``group`` batches (batch ``i`` has ``i`` seeds, no hops)."""
    calls, new = [], []

    def groups(start):
        calls.append(start)
        for lo in range(start, size, group):
            yield [SampledBatch(i, np.arange(i)) for i in range(lo, min(lo + group, size))]

    return LazyShare(size, groups, lambda b: new.extend(x.batch for x in b)), calls, new


def test_groups_are_sampled_on_first_access_and_released_after():
    share, calls, new = fake_share(7, 3)
    assert len(share) == 7 and share.sampled == [] and calls == []
    first = weakref.ref(share[0])
    assert share[2].batch == 2 and share.sampled == [(0, 3)]
    assert share[3].batch == 3 and share.sampled == [(0, 3), (3, 6)] and calls == [0]
    gc.collect()
    assert first() is None
    assert [b.batch for b in share] == list(range(7)) and calls == [0, 0]  # re-read from 0
    assert share[-1].batch == 6 and [b.batch for b in share[5:1:-2]] == [5, 3]
    assert new == list(range(7))  # every batch counted once
    with pytest.raises(IndexError):
        share[7]


def test_a_jump_samples_from_the_batch_read_not_from_the_start():
    share, calls, new = fake_share(10, 4)
    assert share[5].batch == 5 and calls == [5] and share.sampled == [(5, 9)]
    assert share[9].batch == 9 and calls == [5] and new == [5, 6, 7, 8, 9]
    assert [b.batch for b in share] == list(range(10)) and calls == [5, 0]
    assert sorted(new) == list(range(10)) and len(new) == 10


@pytest.mark.mpi
@pytest.mark.parametrize("spec", [SamplerSpec("sage", (3, 2), batch_size=8, bulk=5, seed=5),
                                  SamplerSpec("ladies", (10, 6), batch_size=8, bulk=5, seed=5)],
                         ids=["sage", "ladies"])
def test_replicated_share_is_the_eager_samples_a_group_at_a_time(
    graph_file, world, monkeypatch, spec
):
    path = graph_file(n=150, avg_degree=6, seed=3)
    with GraphFile(path) as gf:
        store = read_pattern(gf, 0, gf.meta.num_nodes, spec.method)
    batches = minibatches(read_train_ids(path), spec.batch_size, spec.seed, 1)[:5]
    share = my_share(5, world.size, world.rank)
    eager = sample_stack(spec, 1, [3 + i for i in share], [batches[i] for i in share],
                         lambda _ids: store)
    with ProcessGrid.create(MPI.COMM_WORLD, "1.5d", replication=1) as grid:
        for limit, groups in ((1 << 18, min(1, len(share))), (1, len(share))):
            monkeypatch.setattr(bulk, "MAX_STACK_ENTRIES", limit)
            monkeypatch.setattr(memory, "MAX_STACK_ENTRIES", limit)  # the sampler's budget
            sampler = BulkSampler(spec, grid, path, "replicated")
            grid.stats.reset()
            mine = sampler.sample(1, batches, 3)
            ok = isinstance(mine, LazyShare) and mine.sampled == [] and sampler.edges_sampled == 0
            refs = [weakref.ref(b) for b in mine]
            gc.collect()
            ok &= groups < 2 or refs[0]() is None  # released once a later group is read
            ok &= len(mine.sampled) == groups
            ok &= same_batches(list(mine), eager)  # read again: sampled again, counted once
            ok &= sampler.edges_sampled == sum(b.nnz for b in eager)
            ok &= not share or grid.stats.seconds_by_phase().get("sample", 0.0) > 0
            assert_all(world, ok, f"limit {limit}")
