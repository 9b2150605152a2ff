"""GIST with ``--sampler``: the groups train sampled minibatches instead of full batches."""

import numpy as np
import pytest

from tests.robustness.harness import expect_error
from tests.training.test_gist import _train as train_gist

BASE = ["--hidden", "8", "--dropout", "0.5", "--seed", "2", "--batch-size", "8", "--quiet",
        "--threads", "1"]
SAGE = ["--sampler", "sage", "--fanout", "4,3"]
LADIES = ["--sampler", "ladies", "--layer-size", "16,16"]
#: GAT of 2 heads, with attention dropout (a sub-GAT draws the global model's at its heads).
GAT = ["--model", "gat", "--heads", "2", "--output-heads", "2", "--attention-dropout", "0.3"]
#: The sampler's own layers, GIN's (its bias after ``W_2``, chain link ``2 l + 1``) or GAT's
#: (``a_src, a_dst`` and a bias per layer, the output layer's ``C`` entries after the mean).
MODELS = pytest.mark.parametrize("model", [[], ["--model", "gin"], GAT],
                                 ids=["own", "gin", "gat"])


def _train(world, path, metrics, *flags):
    return train_gist(world, path, metrics, *flags, base=BASE)


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 4)
@MODELS
@pytest.mark.parametrize("sampler", [SAGE, LADIES], ids=["sage", "ladies"])
def test_one_subnet_is_minibatch_training_step_for_step(
    graph_file, shared_tmp, world, sampler, model
):
    """K = the steps of an epoch and R rounds: R epochs of ``--mode minibatch``."""
    path = graph_file(n=80, seed=4)
    mb = _train(world, path, shared_tmp / "mb.json", "--mode", "minibatch", "--epochs", "3",
                *sampler, *model)
    steps = mb["sampling"]["optimizer_steps_per_epoch"]
    gist = _train(world, path, shared_tmp / "gist.json", "--mode", "gist", "--subnets", "1",
                  "--local-iters", str(steps), "--rounds", "3", *sampler, *model)
    np.testing.assert_allclose(
        [e["loss"] for e in gist["epochs"]], [e["loss"] for e in mb["epochs"]], rtol=1e-6
    )
    assert gist["params_sha256"] == mb["params_sha256"]
    # the global model's sharded full-graph forward is the sampled model's (GIN: b after W_2)
    assert gist["final"] == pytest.approx(mb["final"], rel=1e-5)
    assert gist["config"]["model"] == mb["config"]["model"]
    section = gist["gist"]["sampler"]
    assert section["sampler"] == sampler[1] and section["optimizer_steps_per_epoch"] == steps
    assert section["batch_epochs_started"] == 3


@pytest.mark.mpi
@pytest.mark.ranks(2, 4)
@MODELS
@pytest.mark.parametrize("sampler", [SAGE, LADIES], ids=["sage", "ladies"])
def test_two_subnets_train_and_move_what_the_cost_model_says(
    graph_file, shared_tmp, world, sampler, model
):
    path = graph_file(n=80, seed=6)
    doc = _train(world, path, shared_tmp / "m2.json", "--mode", "gist", "--subnets", "2",
                 "--local-iters", "3", "--rounds", "5", "--hidden", "16", "--lr", "0.02",
                 *sampler, *model)
    losses = [e["loss"] for e in doc["epochs"]]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    section = doc["gist"]
    assert section["subnets"] == 2 and len(section["per_round"]) == 5
    for rec in section["per_round"]:
        assert rec["sent_bytes"] == rec["predicted_sent_bytes"]
        assert rec["returned_bytes"] == rec["predicted_returned_bytes"]
        for label in ("bias", "attention") if model == GAT else ("bias",):  # each category
            want = rec[f"predicted_{label}_bytes"]
            assert want > 0 and rec[f"{label}_bytes"] == pytest.approx(want, rel=1e-12)
        assert rec["val_acc"] is not None
    assert section["submodel_bytes_per_round"]["measured"] == pytest.approx(
        section["submodel_bytes_per_round"]["predicted"], rel=1e-12
    )
    # every category: the sub-model traffic and the groups' own minibatch traffic
    measured, predicted = doc["comm"]["measured_bytes"], doc["comm"]["predicted_bytes"]
    assert {"gist_scatter", "gist_gather", "gist_bias"} <= set(predicted)
    assert ("gist_attention" in predicted) == (model == GAT)
    if world.size // 2 > 1:  # groups of several ranks fetch features and all-reduce
        assert {"feature_fetch", "allreduce"} <= set(predicted)
    for cat in set(measured) | set(predicted):
        assert measured.get(cat, 0) == pytest.approx(predicted.get(cat, 0), rel=1e-9), cat
    assert doc["config"]["group_algo"] == "minibatch"


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 4)
@MODELS
def test_resume_mid_epoch_of_the_batch_stream_is_bit_identical(
    graph_file, shared_tmp, world, model
):
    """Round 2 ends inside an epoch: inside a bulk, or after one that is then not sampled.

    40 training vertices, batches of 8, bulks of 4: 5 batches per epoch in bulks of 4 and
    1; K = 4. Groups of 1 rank take 4 + 1 steps per epoch (step 8 is step 3 of bulk 0 of
    epoch 1), groups of 2 ranks 2 + 1 (step 8 is the first of bulk 1 of epoch 2).
    """
    path = graph_file(n=80, seed=9)
    m = 2 if world.size % 2 == 0 else 1
    run = ["--mode", "gist", "--subnets", str(m), "--local-iters", "4", "--bulk", "4", *SAGE,
           *model]
    straight = _train(world, path, shared_tmp / "s.json", *run, "--rounds", "4")
    ckpt = shared_tmp / "ckpt"
    _train(world, path, shared_tmp / "a.json", *run, "--rounds", "2",
           "--checkpoint-dir", str(ckpt), "--checkpoint-every", "2")
    resumed = _train(world, path, shared_tmp / "r.json", *run, "--rounds", "4",
                     "--resume", str(ckpt))
    steps = straight["gist"]["sampler"]["optimizer_steps_per_epoch"]
    assert steps == (5 if world.size == m else 3)
    assert resumed["params_sha256"] == straight["params_sha256"]
    history = [[(e["loss"], e["val_acc"]) for e in d["epochs"]] for d in (resumed, straight)]
    assert history[0] == history[1]
    assert resumed["final"] == straight["final"]


@pytest.mark.mpi
@pytest.mark.ranks(1, 2)
def test_flags_that_contradict_the_sampler_give_one_line(graph_file, shared_tmp, world, capfd):
    path = graph_file(n=40, seed=7)
    gist = ["train", path, *BASE, "--mode", "gist"]
    cases = [
        ([*SAGE, "--algo", "2d"], "--algo 2d names a full-batch algorithm"),
        ([*SAGE, "--model", "gcn"], "--model gcn does not exist with --sampler sage"),
        (["--fanout", "4,3"], "--fanout needs --sampler"),
    ]
    for flags, words in cases:
        expect_error(world, capfd, [*gist, *flags], words)
    expect_error(world, capfd, ["train", path, *BASE, *SAGE], "--sampler applies to --mode")
