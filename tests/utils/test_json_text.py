"""Strict JSON: no NaN or Infinity in what hpcgnn writes."""

import json
import math

import pytest

from hpcgnn.utils.json_text import dumps


def test_non_finite_floats_become_null_everywhere():
    doc = {"a": math.nan, "b": [1.5, math.inf, {"c": -math.inf}], "d": (2, "x")}
    text = dumps(doc, indent=1)
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [1.5, None, {"c": None}], "d": [2, "x"]}


@pytest.mark.parametrize("content, words", [
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
    ('{"ranks": 1' + "0" * 5000 + "}", "digits"),
    (b'{"name": "\xff"}', "not UTF-8"),
    ("{", "not valid JSON"),
])
def test_json_inputs_are_read_with_bounds(tmp_path, content, words):
    from hpcgnn.utils.json_text import read_json

    path = tmp_path / "x.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ValueError, match=words):
        read_json(path)


def test_pipes_devices_and_huge_files_are_not_read(tmp_path):
    import os

    from hpcgnn.utils.json_text import read_json

    os.mkfifo(tmp_path / "fifo.json")
    for path in (tmp_path / "fifo.json", "/dev/zero", tmp_path):
        with pytest.raises(ValueError, match="not a regular file"):
            read_json(path)
    (tmp_path / "big.json").write_text("[" + "0," * 100 + "0]")
    with pytest.raises(ValueError, match="more than the 64"):
        read_json(tmp_path / "big.json", max_bytes=64)
