"""``--sync-comm``: each collective's wait for its ranks timed apart; no result changes."""

import pytest

from tests.training.test_gist import _train

BASE = ["--epochs", "2", "--hidden", "8", "--quiet", "--threads", "1", "--eval-every", "0"]


@pytest.mark.mpi
@pytest.mark.ranks(2, 4)
@pytest.mark.parametrize("algo", ["1d", "2d"])
def test_waits_are_timed_apart_and_change_nothing(graph_file, shared_tmp, world, algo):
    path = graph_file(n=60, seed=3)
    plain = _train(world, path, shared_tmp / "plain.json", "--algo", algo, base=BASE)
    synced = _train(world, path, shared_tmp / "sync.json", "--algo", algo, "--sync-comm",
                    base=BASE)
    assert synced["params_sha256"] == plain["params_sha256"]
    assert synced["comm"]["measured_bytes"] == plain["comm"]["measured_bytes"]
    assert synced["config"]["sync_comm"] and not plain["config"]["sync_comm"]
    assert synced["time"]["phases"]["wait"] > 0 and "wait" not in plain["time"]["phases"]
