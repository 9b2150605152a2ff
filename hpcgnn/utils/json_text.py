"""JSON in and out: strict JSON written, JSON inputs read safely.

Written JSON has no ``NaN`` or ``Infinity`` (strict JSON has neither, every parser reads
it); :func:`read_json` reads a JSON input with bounds.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

#: Largest JSON input read (topologies, machine files, metrics, manifests are kilobytes).
MAX_JSON_BYTES = 64 << 20


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


def read_json(path: str | os.PathLike, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The parsed JSON file ``path``, or ``ValueError`` with a one-line reason.

    Refused before reading: a path that is not a regular file (a named pipe would block,
    ``/dev/zero`` never ends) or larger than ``max_bytes``; then text that is not UTF-8,
    not JSON, nested too deeply for the parser or holding an integer too long to convert.
    """
    p = Path(path)
    try:
        if not p.exists():
            raise ValueError("cannot read: No such file or directory")
        if not p.is_file():
            raise ValueError("not a regular file (a directory, pipe or device)")
        size = p.stat().st_size
        if size > max_bytes:
            raise ValueError(f"{size} bytes, more than the {max_bytes} a JSON input may have")
        text = p.read_bytes()[: max_bytes + 1].decode("utf-8")
    except OSError as err:
        raise ValueError(f"cannot read: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"not UTF-8 text: {err.reason} at byte {err.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not valid JSON: {err.msg} at line {err.lineno}") from None
    except RecursionError:
        raise ValueError("not valid JSON: nested too deeply") from None
    except ValueError as err:  # an integer of more digits than Python converts
        raise ValueError(f"not valid JSON: {err}".split(";")[0]) from None
