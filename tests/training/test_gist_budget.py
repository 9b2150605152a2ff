"""GIST's epoch budget: ``--epochs E`` split across ``M`` sub-GCNs, ``E / M`` epochs of work each.

An epoch of work is ``S`` optimizer steps of a group (one full batch; a group's steps over
the training set with ``--sampler``); a round is ``K`` of them, so ``R = ceil(E S / (M K))``.
The optimizer steps each sub-GCN took are read from the checkpoint's Adam step count.
"""

import json

import pytest

from hpcgnn.cli.main import main
from hpcgnn.training.checkpoint import MANIFEST
from hpcgnn.training.gist import GistOptions, gist_budget
from tests.mpi import assert_all

BASE = ["--hidden", "8", "--dropout", "0.5", "--seed", "2", "--quiet", "--threads", "1",
        "--mode", "gist", "--eval-every", "0"]
SAGE = ["--sampler", "sage", "--fanout", "4,3", "--batch-size", "8"]


def _subnets(size):
    return max(m for m in (1, 2, 3, 4) if size % m == 0)


def _run(world, capsys, path, out, *flags):
    """Train with a checkpoint; the metrics, the Adam step count and rank 0's first line."""
    ckpt, metrics = out / "ckpt", out / "m.json"
    rc = main(["train", str(path), *BASE, "--metrics", str(metrics),
               "--checkpoint-dir", str(ckpt), *flags])
    printed = capsys.readouterr().out.splitlines()
    assert_all(world, rc == 0, f"train {flags} failed")
    world.mpi.Barrier()
    manifest = json.loads((ckpt / MANIFEST).read_text())
    first = printed[0] if world.rank == 0 and printed else ""
    return json.loads(metrics.read_text()), manifest["adam_step"], first


def test_the_rounds_of_a_budget_round_up():
    opts = GistOptions(subnets=2, local_iters=3)
    exact = gist_budget(12, opts, 1)  # 12 epochs over 2 sub-GCNs: 6 steps each
    assert (exact.rounds, exact.epochs_of_work(), exact.derived) == (2, 6.0, True)
    up = gist_budget(13, opts, 1)  # 6.5 epochs of work each: 3 rounds, 9 steps
    assert (up.rounds, up.epochs_of_work()) == (3, 9.0)
    sampled = gist_budget(4, opts, 5)  # S = 5: 4 * 5 / 2 = 10 steps each, 4 rounds of 3
    assert (sampled.rounds, sampled.epochs_of_work()) == (4, 12 / 5)
    given = gist_budget(100, opts, 5, rounds=7)
    assert (given.rounds, given.epochs, given.derived) == (7, None, False)
    assert gist_budget(0, opts, 1).rounds == 0
    assert gist_budget(1, GistOptions(subnets=4, local_iters=8), 1).rounds == 1


@pytest.mark.mpi
@pytest.mark.parametrize("extra", [0, 1], ids=["whole", "rounded-up"])
def test_each_full_batch_sub_gcn_trains_its_share_of_the_epochs(
    graph_file, shared_tmp, world, capsys, extra
):
    m, k = _subnets(world.size), 2
    epochs = 4 * m + extra  # E / M = 4 epochs (steps) each, or 4 + 1/M
    path = graph_file(n=40, seed=3)
    doc, adam_step, first = _run(world, capsys, path, shared_tmp / f"fb{extra}",
                                 "--layers", "3", "--subnets", str(m), "--local-iters", str(k),
                                 "--epochs", str(epochs))
    rounds = -(-epochs // (m * k))
    section = doc["gist"]
    assert (section["rounds"], section["rounds_planned"]) == (rounds, rounds)
    assert len(doc["epochs"]) == rounds and doc["config"]["epochs"] == rounds
    assert section["epochs_budget"] == epochs and section["rounds_derived"] is True
    assert section["steps_per_epoch"] == 1
    assert adam_step == rounds * k == section["subnet_epochs_of_work"]
    if extra == 0:
        assert section["subnet_epochs_of_work"] == epochs / m
    else:  # rounded up by less than a round
        assert epochs / m < section["subnet_epochs_of_work"] < epochs / m + k
    words = f"{rounds} rounds (--epochs {epochs} / {m}: {rounds * k:.4g} epochs of work"
    assert_all(world, world.rank != 0 or words in first, first)


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 4)
def test_each_sampled_sub_model_trains_its_share_of_the_epochs(
    graph_file, shared_tmp, world, capsys
):
    m, k, epochs = (2 if world.size % 2 == 0 else 1), 2, 3
    path = graph_file(n=80, seed=4)
    doc, adam_step, _ = _run(world, capsys, path, shared_tmp / "sage", *SAGE,
                             "--subnets", str(m), "--local-iters", str(k),
                             "--epochs", str(epochs))
    section = doc["gist"]
    steps = section["steps_per_epoch"]
    assert steps == section["sampler"]["optimizer_steps_per_epoch"] > 1
    rounds = -(-epochs * steps // (m * k))
    assert section["rounds"] == rounds == len(doc["epochs"])
    assert adam_step == rounds * k  # each sub-model's optimizer steps
    assert section["subnet_epochs_of_work"] == pytest.approx(rounds * k / steps, rel=1e-15)
    assert epochs / m <= section["subnet_epochs_of_work"] < epochs / m + k / steps


@pytest.mark.mpi
def test_given_rounds_keep_their_meaning(graph_file, shared_tmp, world, capsys):
    m = _subnets(world.size)
    path = graph_file(n=40, seed=5)
    doc, adam_step, first = _run(world, capsys, path, shared_tmp / "given",
                                 "--layers", "3", "--subnets", str(m), "--local-iters", "2",
                                 "--epochs", "50", "--rounds", "3")
    section = doc["gist"]
    assert section["rounds"] == 3 and adam_step == 6
    assert section["epochs_budget"] is None and section["rounds_derived"] is False
    assert section["subnet_epochs_of_work"] == 6
    assert doc["config"]["rounds"] == 3
    assert_all(world, world.rank != 0 or "3 rounds (--rounds: 6 epochs of work" in first, first)
