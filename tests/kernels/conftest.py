"""Fixtures of the kernel tests (helpers: :mod:`tests.kernels.host`)."""

from __future__ import annotations

import pytest

from hpcgnn.kernels import host_build
from tests.kernels.host import SETTINGS


@pytest.fixture(params=SETTINGS, ids=lambda s: f"{s.order}-cap{s.max_blocks}")
def settings(request):
    """Run the test's host launches under each of :data:`tests.kernels.host.SETTINGS`."""
    with host_build.launch_settings(request.param):
        yield request.param
