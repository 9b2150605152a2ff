import re

import pytest

from hpcgnn.errors import ConfigError
from hpcgnn.sampling.spec import check_training_set, make_spec


def spec(sampler="sage", fanout=None, layer_size=None, layers=None, batch_size=8, bulk=2, seed=0):
    return make_spec(sampler, fanout=fanout, layer_size=layer_size, layers=layers,
                     batch_size=batch_size, bulk=bulk, seed=seed)


def test_sizes_and_layers():
    assert spec(fanout="15,10,5").sizes == (15, 10, 5)
    assert spec(fanout="15,10,5", layers=3).layers == 3
    assert spec(layers=3).sizes == (10, 10, 10)
    assert spec("ladies", layer_size="512").sizes == (512,)
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
    (dict(batch_size=0), "--batch-size must be >= 1"),
    (dict(layer_size="4"), "--layer-size applies to --sampler ladies"),
    (dict(sampler="ladies", layer_size="4,4", layers=3), "--layer-size has 2 entries"),
    (dict(sampler="ladies", fanout="4"), "--fanout applies to --sampler sage"),
])
def test_bad_parameters(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        spec(**kwargs)


def test_batch_larger_than_training_set():
    with pytest.raises(ConfigError, match="--batch-size 8 is larger than the training set"):
        check_training_set(spec(), 5)
