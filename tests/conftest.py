"""Test harness shared by serial and MPI runs.

Run serially with ``pytest`` or at N ranks with
``mpiexec -n N python -m mpi4py -m pytest --with-mpi``. Under MPI only rank 0 reports to
the terminal; the other ranks write their reports to ``$HPCGNN_TEST_LOGDIR`` (default:
the system temp dir) so a rank-local failure can still be read. The collective assertion
helpers and the rules for using them (which data is rank-local, which is replicated) are
in :mod:`tests.mpi`.

The device: ``HPCGNN_TEST_DEVICE=cuda`` runs the suite on the GPU (default ``cpu``): every
``hpcgnn`` command a test runs takes it as its default ``--device`` (through
``$HPCGNN_DEVICE``), and the ``device`` fixture is this rank's device of that kind. Tests
marked ``gpu`` skip, with the reason, where no GPU or no CuPy is visible, unless the emulated
GPU is asked for (``HPCGNN_EMULATE_CUDA=1``: :mod:`hpcgnn.backend.emulation`), which runs
them too except those marked ``cupy`` (they hand CuPy arrays to the kernels).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from tests.graphs import write_random_graph
from tests.mpi import assert_all, on_rank0

__all__ = ["assert_all"]  # re-exported for old imports; import from tests.mpi


def _rank_and_size() -> tuple[int, int]:
    """This process's rank and the world size (0 and 1 when pytest runs without MPI)."""
    if not {"--with-mpi", "--only-mpi"} & set(sys.argv):
        return 0, 1
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``--only-mpi`` skip importing test files that hold no MPI test (faster runs)."""
    if (
        config.getoption("--only-mpi", default=False)
        and collection_path.is_file()
        and collection_path.name.startswith("test_")
        and collection_path.suffix == ".py"
        and "mark.mpi" not in collection_path.read_text()
    ):
        return True
    return None


#: the device kind of the suite (``$HPCGNN_TEST_DEVICE``; default cpu)
TEST_DEVICE = os.environ.get("HPCGNN_TEST_DEVICE", "cpu")
os.environ["HPCGNN_DEVICE"] = TEST_DEVICE  # the default --device of every command a test runs

#: world sizes at which the robustness cases run (the hardening issue asks for 1 and 4)
ROBUSTNESS_RANKS = (1, 4)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip MPI tests at world sizes their ``ranks`` marker (or folder) does not name, and
    ``gpu`` tests where no GPU or no CuPy is visible."""
    from hpcgnn.backend import cuda_unavailable, emulation

    _, size = _rank_and_size()
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            reason = cuda_unavailable()
            if reason is None and item.get_closest_marker("cupy") and emulation.requested():
                reason = "takes CuPy arrays: a real GPU only, not the emulated one"
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=f"gpu test: {reason}"))
        if item.get_closest_marker("mpi") is None:
            continue
        mark = item.get_closest_marker("ranks")
        if mark is not None:
            sizes = mark.args
        elif "robustness" in item.path.parts:
            sizes = ROBUSTNESS_RANKS
        else:
            continue
        if size not in sizes:
            item.add_marker(pytest.mark.skip(reason=f"runs at {sizes} ranks"))


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    rank, _ = _rank_and_size()
    if rank == 0:
        return
    from _pytest.terminal import TerminalReporter

    logdir = Path(os.environ.get("HPCGNN_TEST_LOGDIR", tempfile.gettempdir()))
    logdir.mkdir(parents=True, exist_ok=True)
    log = open(logdir / f"hpcgnn-pytest-rank{rank}.log", "w")
    old = config.pluginmanager.get_plugin("terminalreporter")
    if old is not None:
        config.pluginmanager.unregister(old, "terminalreporter")
    config.pluginmanager.register(TerminalReporter(config, log), "terminalreporter")


@pytest.fixture
def world():
    """A duplicate of COMM_WORLD wrapped in the instrumented layer (freed after the test)."""
    from hpcgnn.comm import Comm

    comm = Comm.world()
    yield comm
    comm.free()


@pytest.fixture
def device(world):
    """This rank's device of the suite's kind (``$HPCGNN_TEST_DEVICE``; collective)."""
    from hpcgnn.grid.device import choose_device

    return choose_device(world.mpi, TEST_DEVICE)


@pytest.fixture
def shared_tmp(tmp_path: Path, world) -> Path:
    """A temporary directory that every rank of the run sees (rank 0's ``tmp_path``)."""
    return Path(world.mpi.bcast(str(tmp_path), root=0))


@pytest.fixture
def graph_file(shared_tmp: Path, world):
    """Factory: ``graph_file(n=..., directed=..., seed=...)`` writes a small graph on rank 0."""

    def make(name: str = "g.h5", **kwargs) -> Path:
        path = shared_tmp / name
        on_rank0(world, write_random_graph, path, **kwargs)
        return path

    return make
