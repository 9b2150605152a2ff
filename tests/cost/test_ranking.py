"""Memory bounds of a run, from the file's sizes and the hyper-parameters alone."""

import numpy as np
import pytest

from hpcgnn.config import TrainConfig
from hpcgnn.cost.ranking import memory_estimate, minibatch_memory_estimate, weight_bytes
from hpcgnn.errors import ConfigError
from hpcgnn.io.reader import GraphMeta
from hpcgnn.layout.shapes import GridShape


def meta(n=100, features=8, classes=3):
    return GraphMeta("g.h5", n, 400, features, classes, False, "g", np.dtype(np.float32), 1,
                     None, None)


def test_weights_are_counted_five_times_plus_the_float64_draw():
    cfg = TrainConfig(layers=3, hidden=16)  # 8 -> 16 -> 16 -> 3
    sizes = [8 * 16, 16 * 16, 16 * 3]
    assert weight_bytes(meta(), cfg) == 5 * 4 * sum(sizes) + 8 * max(sizes)
    assert weight_bytes(meta(), cfg, per_layer=2) == 10 * 4 * sum(sizes) + 8 * max(sizes)


def test_estimates_grow_with_the_declared_class_count():
    cfg = TrainConfig()
    shape = GridShape("1.5d", (2, 2))
    small, huge = meta(classes=3), meta(classes=2**31 - 1)
    for estimate in (
        lambda m: memory_estimate(m, cfg, shape),
        lambda m: minibatch_memory_estimate(m, cfg, shape, 2),
    ):
        assert estimate(small) < 2**20
        assert estimate(huge) > 5 * 4 * 16 * (2**31 - 1)  # at least the last layer's weights
    assert memory_estimate(huge, cfg, shape) > weight_bytes(huge, cfg)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(layers=0), "--layers must be in [1, 4096], got 0"),
        (dict(layers=10**9), "--layers must be in [1, 4096]"),
        (dict(hidden=0), "--hidden must be in [1, 2147483647], got 0"),
        (dict(hidden=10**400), "--hidden must be in [1, 2147483647]"),
    ],
)
def test_model_sizes_are_bounded(kwargs, words):
    with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        TrainConfig(**kwargs)
