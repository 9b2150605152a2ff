"""Ultra-wide GIST: it runs under a memory limit that ordinary training of the model exceeds.

The limit (``HPCGNN_MEMORY_LIMIT``, bytes per node) is set between the two estimates the
memory check uses: ordinary full-batch training of the global model on all ranks, and a
GIST rank (its group's sub-model of ``hidden / M``, its rows of the global model, the
model-parallel evaluation). Runs at 4 ranks and more (``make test`` runs it at 4 and 8).
"""

import json
import math

import pytest
from mpi4py import MPI

from hpcgnn.cli.main import main
from hpcgnn.config import TrainConfig
from hpcgnn.cost.ranking import memory_estimate
from hpcgnn.io.reader import GraphFile
from hpcgnn.layout.shapes import choose_shape
from hpcgnn.training.modes import FullBatchMode, GistMode
from tests.mpi import assert_all
from tests.robustness.harness import expect_error

HIDDEN, LAYERS = 384, 3
FLAGS = ["--hidden", str(HIDDEN), "--layers", str(LAYERS), "--seed", "1", "--quiet",
         "--threads", "1"]


def _ranks_on_this_node(world):
    node = world.mpi.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_size()
    finally:
        node.Free()


@pytest.mark.mpi(min_size=4)
def test_gist_runs_where_ordinary_training_does_not_fit(
    graph_file, shared_tmp, world, capfd, monkeypatch
):
    p = world.size
    m = next((m for m in (8, 4) if p % m == 0), None)
    if p < 4 or m is None:
        pytest.skip("needs 4 or 8 ranks (or a multiple)")
    path = graph_file(n=40, features=6, seed=12)
    cfg = TrainConfig(layers=LAYERS, hidden=HIDDEN, epochs=2)
    with GraphFile(path) as gf:
        meta = gf.meta
    ordinary = memory_estimate(meta, cfg, choose_shape("1d", p, None, None))
    mode = GistMode(subnets=m, local_iters=1, group=FullBatchMode())
    gist = mode.memory(cfg, meta, choose_shape("1d", p, None, None)).bytes
    assert gist < ordinary / 2, (gist, ordinary)
    here = _ranks_on_this_node(world)
    limit = int(math.sqrt(gist * ordinary) * here)  # per node, between the two
    monkeypatch.setenv("HPCGNN_MEMORY_LIMIT", str(limit))

    expect_error(world, capfd, ["train", path, *FLAGS, "--epochs", "2"],
                 "not enough memory for 1d on grid", f"hidden {HIDDEN},")
    metrics = shared_tmp / "gist.json"
    rc = main(["train", str(path), *FLAGS, "--mode", "gist", "--subnets", str(m),
               "--rounds", "2", "--metrics", str(metrics)])
    assert_all(world, rc == 0, f"gist --subnets {m} under the limit failed")
    world.mpi.Barrier()
    section = json.loads(metrics.read_text())["gist"]
    assert section["full_model_estimate_bytes"] == pytest.approx(ordinary)
    assert section["gist_estimate_bytes"] == pytest.approx(gist)
    assert len(section["peak_memory_bytes"]) == p and min(section["peak_memory_bytes"]) > 0
    assert section["subnet_hidden"] == [HIDDEN // m] * m
    ev = section["eval_bytes_per_evaluation"]
    assert ev["measured"] == pytest.approx(ev["predicted"], rel=1e-12)
