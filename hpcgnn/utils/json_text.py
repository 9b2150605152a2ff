"""JSON that every parser reads: no ``NaN`` or ``Infinity`` (strict JSON has neither)."""

from __future__ import annotations

import json
import math
from typing import Any


def strict_json(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`strict_json` of ``value`` (``null`` for a non-finite float)."""
    return json.dumps(strict_json(value), allow_nan=False, **kwargs)
