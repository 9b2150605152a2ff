"""Helpers of the host-build tests: the built sources, the launch settings, poisoned buffers.

Host-build tests skip, with the reason, where no C++ compiler exists. :data:`SETTINGS`
(the ``settings`` fixture of ``conftest.py``) are every thread order (natural, reversed,
shuffled) with the grid as launched and capped at 1 and 3 blocks, so that a kernel that
depends on the order of its threads, or skips work past a capped grid, fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from hpcgnn.errors import ConfigError
from hpcgnn.kernels import host_build
from hpcgnn.kernels.host_build import ORDERS, HostModule, LaunchSettings

#: Every order, with the grid as launched and capped at 1 and 3 blocks.
SETTINGS = [
    LaunchSettings(order, seed=7 if order == "shuffled" else 0, max_blocks=cap)
    for order in ORDERS for cap in (None, 1, 3)
]


def need_compiler() -> None:
    """Skip the test, with the reason, where there is no C++ compiler."""
    try:
        host_build.compiler()
    except ConfigError as err:
        pytest.skip(f"host build: {err}")


def host(source: str) -> HostModule:
    """The host build of ``source`` (skips the test where there is no C++ compiler)."""
    need_compiler()
    return host_build.module(source)


def poisoned(shape: tuple[int, ...] | int, dtype: type) -> np.ndarray:
    """An output buffer of all-ones bytes (NaN for floats, -1 for ints, 0xFF for bools)."""
    out = np.empty(shape, dtype=dtype)
    out.view(np.uint8).fill(0xFF)
    return out


def same_bytes(got: np.ndarray, want: np.ndarray) -> bool:
    """Whether two arrays have the same shape, dtype and bytes."""
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()
