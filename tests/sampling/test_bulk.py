"""Bulk sampling in chunks of whole batches: the same samples whatever the chunk size."""

import numpy as np
import pytest

from hpcgnn.sampling import bulk
from hpcgnn.sampling.bulk import (
    chunk_batches,
    sample_depth_first,
    sample_epoch_serial,
    sample_stack,
)
from hpcgnn.sampling.spec import SamplerSpec
from tests.sampling import random_adjacency, same_batches, store_of


def test_chunks_hold_whole_batches_of_at_most_the_limit():
    ptr = np.array([0, 3, 3, 10, 12, 30, 31])
    assert chunk_batches(ptr, 10) == [(0, 3), (3, 4), (4, 5), (5, 6)]  # 18 entries: alone
    assert chunk_batches(ptr, 100) == [(0, 6)]
    assert chunk_batches(ptr, 1) == [(i, i + 1) for i in range(6)]
    assert chunk_batches(np.array([0])) == []


@pytest.mark.parametrize("sampler, sizes", [("sage", (4, 3)), ("ladies", (12, 8))])
def test_chunked_stacks_give_the_samples_of_one_stack(monkeypatch, sampler, sizes):
    a = random_adjacency(200, 5.0, seed=7)
    store = store_of(a, sampler)
    spec = SamplerSpec(sampler, sizes, batch_size=9, bulk=8, seed=3)
    train = np.arange(0, 200, 2, dtype=np.int64)
    whole = sample_epoch_serial(spec, store, train, epoch=2)
    for limit in (1, 60, 400):
        monkeypatch.setattr(bulk, "MAX_STACK_ENTRIES", limit)
        assert same_batches(sample_epoch_serial(spec, store, train, epoch=2), whole), limit


@pytest.mark.parametrize("sampler, sizes", [("sage", (4, 3)), ("ladies", (12, 8))])
def test_depth_first_gives_the_stack_samples_in_consecutive_groups(monkeypatch, sampler, sizes):
    store = store_of(random_adjacency(200, 5.0, seed=7), sampler)
    spec = SamplerSpec(sampler, sizes, batch_size=9, bulk=8, seed=3)
    ids, seeds = list(range(5, 13)), [np.arange(9 * i, 9 * i + 9) * 2 for i in range(8)]
    whole = sample_stack(spec, 2, ids, seeds, lambda _ids: store)
    for limit, count in ((1, 8), (300, None), (1 << 18, 1)):
        monkeypatch.setattr(bulk, "MAX_STACK_ENTRIES", limit)
        groups = list(sample_depth_first(spec, 2, ids, seeds, store))
        assert all(groups) and count in (None, len(groups)), limit
        assert same_batches([b for g in groups for b in g], whole), limit


def test_bulk_32_at_batch_1024_is_one_spgemm_per_hop_where_it_fits_the_budget():
    from hpcgnn.sampling.bulk import BYTES_PER_ENTRY, Chunking, default_budget

    store = store_of(random_adjacency(40_000, 4.0, seed=5), "sage")
    spec = SamplerSpec("sage", (4, 3), batch_size=1024, bulk=32, seed=1)
    order = np.random.default_rng(0).permutation(40_000)
    seeds = [order[1024 * i : 1024 * (i + 1)] for i in range(32)]
    fits, cache = Chunking(budget=2**30), Chunking(budget=default_budget(None))
    one = sample_stack(spec, 0, list(range(32)), seeds, lambda _ids: store, fits)
    assert (fits.hops, fits.chunks) == (2, 2)  # one SpGEMM per hop
    chunked = sample_stack(spec, 0, list(range(32)), seeds, lambda _ids: store, cache)
    assert cache.limit * BYTES_PER_ENTRY == default_budget(None) and cache.chunks > 2
    assert same_batches(one, chunked)
    assert default_budget(8 * 2**30) == 2 * 2**30  # a quarter of a GPU's free memory
