"""Every mode's metrics record each rank's peak memory by phase (the ``memory`` section).

Host: the peak resident set of each rank's process, never falling from one phase to the
next; on a GPU also the device's peak of allocated bytes (``null`` on the CPU and on the
emulated GPU, whose memory is host memory). See ``docs/metrics.md``.
"""

from __future__ import annotations

import json

import pytest

from hpcgnn.cli.main import main
from tests.comm.test_memory import PHASES, rising
from tests.mpi import assert_all

pytestmark = [pytest.mark.mpi, pytest.mark.ranks(1, 2), pytest.mark.timeout(240)]

BASE = ["--epochs", "2", "--hidden", "4", "--quiet", "--threads", "1"]
MODES = {
    "1d": ["--algo", "1d"],
    "offload": ["--mode", "offload", "--chunks", "2"],
    "minibatch": ["--mode", "minibatch", "--batch-size", "8", "--fanout", "3,3"],
    "gist": ["--mode", "gist"],
}


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_records_each_ranks_peak_memory_by_phase(
    graph_file, shared_tmp, world, device, mode
):
    path = graph_file(n=48, seed=2)
    out = shared_tmp / f"{mode}.json"
    rc = main(["train", str(path), *BASE, *MODES[mode], "--device", device.kind,
               "--metrics", str(out)])
    assert_all(world, rc == 0, f"train {mode} failed")
    world.mpi.Barrier()
    doc = json.loads(out.read_text())
    mem = doc["memory"]
    assert_all(world, rising(mem["phases"], world.size, PHASES), str(mem))
    assert_all(world, mem["peak_bytes"] == mem["phases"]["evaluation"], str(mem))
    predicted = mem["predicted_bytes"]  # every mode's memory check has an estimate
    assert_all(world, len(predicted) == world.size and all(b > 0 for b in predicted),
               str(mem))
    counts_device = device.is_cuda and not device.emulated
    if counts_device:  # a real GPU: torch's allocator's peak
        assert_all(world, rising(mem["device"]["phases"], world.size, PHASES), str(mem))
    else:  # the CPU; the emulated GPU's memory is host memory
        assert_all(world, mem["device"] is None, str(mem))


@pytest.mark.parametrize("algo, grid", [("1d", None), ("1.5d", "1x{p}"), ("2d", "{p}x1")])
def test_the_recorded_prediction_is_what_hpcgnn_model_prints(
    graph_file, shared_tmp, world, capsys, algo, grid
):
    """``memory.predicted_bytes`` of a run = ``hpcgnn model``'s memory for its algo and grid."""
    p = world.size
    path = graph_file(n=64, seed=4, features=12)
    out, model = shared_tmp / f"run-{algo}.json", shared_tmp / f"model-{algo}.json"
    flags = ["--grid", grid.format(p=p)] if grid else []
    rc = main(["train", str(path), *BASE, "--algo", algo, *flags, "--metrics", str(out)])
    assert_all(world, rc == 0, f"train {algo} failed")
    if world.rank == 0:
        assert main(["model", str(path), "--procs", str(p), "--hidden", "4", "--out",
                     str(model)]) == 0
    capsys.readouterr()
    world.mpi.Barrier()
    doc = json.loads(out.read_text())
    (result,) = json.loads(model.read_text())["results"]
    (choice,) = [c for c in result["choices"]
                 if (c["algo"], c["grid"]) == (algo, doc["config"]["grid"])]
    recorded = doc["memory"]["predicted_bytes"]
    assert_all(world, recorded == [int(choice["memory_per_rank_bytes"])] * p,
               f"{recorded} vs {choice['memory_per_rank_bytes']}")
