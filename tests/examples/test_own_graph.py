"""``examples/own_graph/write_inputs.py``: the inputs ``make wheel-check`` prepares and trains."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np

from hpcgnn.prepare.benchmark_npz import npz_graph
from hpcgnn.prepare.pyg import pyg_graph
from hpcgnn.prepare.splits import SplitSpec

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "own_graph" / "write_inputs.py"


def test_both_files_hold_the_same_graph(tmp_path: Path) -> None:
    runpy.run_path(str(SCRIPT))["main"](str(tmp_path))
    pyg = pyg_graph(tmp_path / "data.pt", SplitSpec())
    npz = npz_graph(tmp_path / "graph.npz", SplitSpec("per-class", val_size=100,
                                                      test_size=200))
    n = pyg.meta.num_nodes
    assert (pyg.read_csr(0, n) != npz.read_csr(0, n)).nnz == 0
    np.testing.assert_array_equal(pyg.read_features(0, n), npz.read_features(0, n))
    assert [int(npz.read_mask(m, 0, n).sum()) for m in ("train", "val", "test")] == [80, 100, 200]
