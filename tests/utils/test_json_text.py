"""Strict JSON: no NaN or Infinity in what hpcgnn writes."""

import json
import math

from hpcgnn.utils.json_text import dumps


def test_non_finite_floats_become_null_everywhere():
    doc = {"a": math.nan, "b": [1.5, math.inf, {"c": -math.inf}], "d": (2, "x")}
    text = dumps(doc, indent=1)
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [1.5, None, {"c": None}], "d": [2, "x"]}
