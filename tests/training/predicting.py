"""Prediction from a checkpoint on one process, as every rank of a test runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tests.mpi import assert_all


def assert_predicts_alone(world: Any, path: Path, mode: Any, settings: dict[str, Any],
                          checkpoint: Path, out: Path, shape: tuple[int, int]) -> None:
    """Every rank predicts alone from ``checkpoint`` into its ``out``: logits of ``shape``."""
    import h5py
    from mpi4py import MPI

    from hpcgnn.training.run import configure
    from hpcgnn.training.run import train as run

    cfg, opts = configure(str(path), mode, {**settings, "resume": str(checkpoint),
                                            "predict_out": str(out), "summary": False})
    run(opts, cfg, MPI.COMM_SELF)
    with h5py.File(out) as f:
        logits = np.asarray(f["logits"]) if "logits" in f else None
    assert_all(world, logits is not None and logits.shape == shape, str(out))
