"""``@pytest.mark.gpu`` tests skip, with the reason, when no GPU or no CuPy is visible."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def gpu_missing() -> str | None:
    """Why the GPU tests cannot run here, or ``None`` when a GPU and CuPy are visible."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    import torch

    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as err:
        return f"no CUDA device: {err}"
    if not count or not torch.cuda.is_available():
        return "no GPU visible"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("gpu") is not None and gpu_missing():
            item.add_marker(pytest.mark.skip(reason=gpu_missing()))
