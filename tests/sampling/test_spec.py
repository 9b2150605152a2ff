import re

import pytest

from hpcgnn.errors import ConfigError
from hpcgnn.sampling.bulk import my_share
from hpcgnn.sampling.spec import (
    batch_and_bulk,
    capped_note,
    fit_training_set,
    make_spec,
    optimizer_steps,
)


def spec(sampler="sage", fanout=None, layer_size=None, layers=None, batch_size=8, bulk=2, seed=0):
    return make_spec(sampler, fanout=fanout, layer_size=layer_size, layers=layers,
                     batch_size=batch_size, bulk=bulk, seed=seed)


def test_sizes_and_layers():
    assert spec(fanout="15,10,5").sizes == (15, 10, 5)
    assert spec(fanout="15,10,5", layers=3).layers == 3
    assert spec(layers=3).sizes == (10, 10, 10)
    assert spec("ladies", layer_size="512").sizes == (512,)
    assert spec("ladies").sizes == (512, 512)  # the default model has 2 layers, as sage's
    assert spec("ladies", layers=3).sizes == (512, 512, 512)
    assert spec("ladies", layer_size="64", layers=2).sizes == (64, 64)
    assert spec("ladies", layer_size="64,32").layers == 2


@pytest.mark.parametrize("kwargs, message", [
    (dict(fanout="15,10,5", layers=2), "--fanout has 3 entries but the model has 2 layers"),
    (dict(fanout="5,x"), "--fanout must be a comma-separated list of integers"),
    (dict(fanout="5,0"), "--fanout entries must be in [1, 2147483647], got '5,0'"),
    (dict(fanout=str(2**63)), "--fanout entries must be in [1, 2147483647]"),
    (dict(sampler="ladies", layer_size=f"8,{2**31}"), "--layer-size entries must be in [1, "),
    (dict(bulk=0), "--bulk must be in [1, 2147483647]"),
    (dict(bulk=10**20), "--bulk must be in [1, 2147483647] (minibatches sampled at once), got 1"),
    (dict(seed=-1), "--seed must be in [0, 2^63), got -1"),
    (dict(seed=2**63), "--seed must be in [0, 2^63)"),
    (dict(batch_size=0), "--batch-size must be in [1, 2147483647], got 0"),
    (dict(layer_size="4"), "--layer-size applies to --sampler ladies"),
    (dict(sampler="ladies", layer_size="4,4", layers=3), "--layer-size has 2 entries"),
    (dict(sampler="ladies", fanout="4"), "--fanout applies to --sampler sage"),
])
def test_bad_parameters(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        spec(**kwargs)


def test_a_batch_larger_than_the_training_set_is_capped_at_it():
    asked = spec()
    used = fit_training_set(asked, 5)
    assert used.batch_size == 5 and used.sizes == asked.sizes and used.bulk == asked.bulk
    assert capped_note(asked, used) == " (--batch-size 8 capped at the 5 training vertices)"
    assert fit_training_set(asked, 8) == asked and capped_note(asked, asked) == ""
    with pytest.raises(ConfigError, match="no training vertices"):
        fit_training_set(asked, 0)


def test_batch_size_is_per_rank_and_global_batch_is_split_over_the_ranks():
    assert batch_and_bulk(None, None, None, 4) == (1024, 16)
    assert batch_and_bulk(100, None, 3, 4) == (100, 3)
    assert batch_and_bulk(None, 1024, None, 4) == (256, 16)
    assert batch_and_bulk(None, 999, None, 3) == (333, 18)  # the bulk: 16 up to a multiple
    assert batch_and_bulk(None, 6, 9, 3) == (2, 9)


@pytest.mark.parametrize(("args", "message"), [
    ((8, 16, None, 2), "give --batch-size (seeds per minibatch on each rank) or --global-batch"),
    ((None, 1000, None, 3), "--global-batch must be a multiple of the 3 ranks in [3, 2147483647]"),
    ((None, 2, None, 4), "(each rank trains G/4 seeds per step), got 2"),
    ((None, 8, 6, 4), "--bulk 6 is not a multiple of the 4 ranks"),
    ((None, 2**31, None, 1), "--global-batch must be a multiple of the 1 ranks in [1, 2147483647]"),
])
def test_bad_batch_flags(args, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        batch_and_bulk(*args)


@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("bulk", [1, 3, 4, 16])
def test_optimizer_steps_count_the_steps_of_the_shared_out_bulks(ranks, bulk):
    for batches in range(0, 40):
        steps = sum(
            max(len(my_share(len(range(first, min(first + bulk, batches))), ranks, r))
                for r in range(ranks))
            for first in range(0, batches, bulk)
        )
        assert optimizer_steps(batches, bulk, ranks) == steps
