"""Helpers shared by sub-commands."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def add_device_argument(p: argparse.ArgumentParser) -> None:
    """Add ``--device {cpu,cuda}`` (``train`` and ``sample``)."""
    p.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="where each rank computes: cpu, or cuda (one GPU per rank: node-local "
                        "rank modulo the visible GPUs; needs CuPy). Default: $HPCGNN_DEVICE, "
                        "else cuda when a GPU and CuPy are visible, else cpu")


def add_head_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """GAT's ``--heads`` and ``--output-heads`` (``train``, ``predict`` and ``model``)."""
    p.add_argument("--heads", type=int, default=1,
                   help="GAT's attention heads of the hidden layers, concatenated: --hidden is "
                        "their total width (--model gat; default: 1)")
    p.add_argument("--output-heads", type=int, default=1,
                   help="GAT's attention heads of the last layer, averaged (--model gat; "
                        "default: 1)")


def launched_by_mpi() -> bool:
    """Whether this process was started by an MPI launcher (mpiexec, mpirun, srun)."""
    return any(v in os.environ for v in _LAUNCHER_VARS)


def run_on_root(task: Callable[[], T]) -> T | None:
    """Run a single-process tool on rank 0 only, with the outcome shared by every rank.

    Without an MPI launcher the task just runs (MPI is not even initialised, which keeps
    ``prepare`` and ``info`` usable on login nodes). Under ``mpiexec -n P`` rank 0 runs
    it and an error there is raised on every rank, so all ranks exit the same way.
    Returns the task's result on rank 0 and ``None`` elsewhere.
    """
    if not launched_by_mpi():
        return task()
    from hpcgnn.comm import Comm, collective

    world = Comm.world()
    result: T | None = None
    try:
        with collective(world):
            if world.rank == 0:
                result = task()
    finally:
        world.free()
    return result
