"""``hpcgnn/config.py``: settings checked, and held as the command's parser gives them."""

import numpy as np
import pytest

from hpcgnn.config import TrainConfig
from hpcgnn.errors import ConfigError


def test_numbers_are_held_as_pythons():
    cfg = TrainConfig(epochs=np.int64(3), lr=1, attention_dropout=None)
    assert type(cfg.epochs) is int and cfg.epochs == 3
    assert type(cfg.lr) is float and cfg.lr == 1.0
    assert cfg.as_dict()["lr"] == 1.0 and TrainConfig(lr=np.float32(0.5)).lr == 0.5


@pytest.mark.parametrize(("settings", "words"), [
    ({"epochs": "ten"}, "--epochs must be an integer, got 'ten'"),
    ({"epochs": 2.0}, "--epochs must be an integer, got 2.0"),
    ({"hidden": True}, "--hidden must be an integer, got True"),
    ({"lr": "0.1"}, "--lr must be a number, got '0.1'"),
    ({"dtype": 32}, "--dtype must be text, got 32"),
    ({"attention_dropout": "x"}, "--attention-dropout must be a number or none, got 'x'"),
])
def test_a_value_of_another_type_is_one_line(settings, words):
    with pytest.raises(ConfigError) as err:
        TrainConfig(**settings)
    assert str(err.value) == words
