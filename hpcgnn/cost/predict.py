"""Every algorithm's cost model by name: what training reports and ``hpcgnn model`` ranks."""

from __future__ import annotations

from collections.abc import Callable

from hpcgnn.cost.block_row import predict_block_row
from hpcgnn.cost.estimate import Estimate, Problem
from hpcgnn.cost.summa import predict_2d, predict_3d
from hpcgnn.layout.shapes import GridShape

#: The full-batch SpMM algorithms whose cost depends only on sizes (not on the partition).
PREDICTORS: dict[str, Callable[[Problem, GridShape], Estimate]] = {
    "1d": predict_block_row,
    "1.5d": predict_block_row,
    "2d": predict_2d,
    "3d": predict_3d,
}


def predict(algo: str, problem: Problem, shape: GridShape) -> Estimate:
    """Predicted communication of one epoch of ``algo`` on ``shape``."""
    return PREDICTORS[algo](problem, shape)
