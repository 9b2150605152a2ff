"""``--loss bce``: multi-label targets on every full-batch layout, offload and minibatch.

The loss is the binary cross-entropy with logits over every (train vertex, class) entry,
summed over the ranks and divided by the global ``num_train * C``: on one process it is
``torch.nn.functional.binary_cross_entropy_with_logits`` (mean) of the whole graph's train
rows, and with ``--dtype float64 --dropout 0`` every layout at 1-4 ranks gives the one-rank
run's losses and scores with every byte predicted. A multi-label file needs ``--loss
bce``, a file of class ids refuses it, and a mode without it refuses it in one line. GIST
with full-batch groups trains it: ``M = 1`` is full-batch training step for step, ``M = 2``
its one-rank run.

Minibatch mode (every sampler, both graph layouts): a sampled batch's loss is
``binary_cross_entropy_with_logits`` (mean) of its seeds' label rows, a step's the mean
over every (seed, class) entry of the step across ranks; with ``--bulk 1`` (one batch per
step at any rank count) a run at 1-4 ranks is the one-rank run with every byte predicted,
the label rows' ``C`` bytes included. GIST's sampled groups train it: ``M = 1`` is
minibatch training step for step.
"""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from hpcgnn.cli.main import main
from hpcgnn.errors import ConfigError
from hpcgnn.nn import Graph
from hpcgnn.training.modes import FullBatchMode
from tests.graphs import write_random_graph
from tests.mpi import assert_all
from tests.runs import LAYOUTS, assert_equal_run, layout_flags, layout_id
from tests.training.test_gist_sampler import BASE as GIST_BASE
from tests.training.test_gist_sampler import SAGE

COMMON = ["--layers", "2", "--hidden", "8", "--epochs", "3", "--dropout", "0", "--dtype",
          "float64", "--quiet", "--loss", "bce", "--threads", "1"]
#: Every layout, and HongTu's offload.
ALGOS = [*LAYOUTS, ["--mode", "offload", "--chunks", "3"]]
#: The scores of ``final`` every layout must give as one rank does.
SCORES = [f"{s}_{k}" for s in ("train", "val", "test") for k in ("acc", "f1_macro", "f1_micro")]


def _reference(graph):
    """The one-rank run (1D on one process)."""
    from mpi4py import MPI

    import hpcgnn.api

    return hpcgnn.api.train(graph, comm=MPI.COMM_SELF, layers=2, hidden=8, epochs=3,
                            dropout=0, dtype="float64", quiet=True, loss="bce", threads=1)


def test_the_loss_is_torchs_mean_bce_of_the_train_rows(tmp_path):
    import hpcgnn

    path = write_random_graph(tmp_path / "ml.h5", n=70, classes=5, seed=3, multi_label=True)
    got = hpcgnn.train(path, loss="bce", epochs=1, lr=0.0, dropout=0, dtype="float64",
                       hidden=8, quiet=True)  # lr 0: the weights are the initial ones
    assert got.metrics["config"]["loss"] == "bce"
    g = Graph.read(path, dtype="float64")
    assert g.y.shape == (70, 5) and g.num_classes == 5
    with torch.no_grad():
        logits = got.model()(g)
    m = g.train_mask
    want = torch.nn.functional.binary_cross_entropy_with_logits(logits[m], g.y[m].double())
    assert abs(got.metrics["epochs"][0]["loss"] - float(want)) <= 1e-12
    assert abs(got.metrics["final"]["loss"] - float(want)) <= 1e-12
    v = g.val_mask
    val = torch.nn.functional.binary_cross_entropy_with_logits(logits[v], g.y[v].double())
    assert abs(got.metrics["final"]["val_loss"] - float(val)) <= 1e-12
    pred = (logits[v] > 0).numpy()
    true = g.y[v].numpy().astype(bool)
    assert got.metrics["final"]["val_acc"] == (pred == true).mean()


@pytest.mark.mpi
@pytest.mark.parametrize("algo", ALGOS, ids=layout_id)
def test_every_layout_equals_the_one_rank_run_with_every_byte_predicted(
    graph_file, shared_tmp, world, algo
):
    algo = layout_flags(algo, world.size)
    graph = graph_file("ml.h5", n=90, classes=5, seed=4, multi_label=True)
    ref = _reference(graph)
    metrics = shared_tmp / f"m-{'-'.join(algo[1::2])}.json"
    assert_all(world, main(["train", str(graph), *COMMON, *algo,
                            "--metrics", str(metrics)]) == 0)
    doc = json.loads(metrics.read_text())
    assert doc["config"]["loss"] == "bce"
    assert_equal_run(doc, [e["loss"] for e in ref.metrics["epochs"]])
    final, want = doc["final"], ref.metrics["final"]
    assert abs(final["val_loss"] - want["val_loss"]) <= 1e-10
    assert {k: final[k] for k in SCORES} == {k: want[k] for k in SCORES}


@pytest.mark.mpi
def test_gist_trains_multi_label_targets(graph_file, shared_tmp, world):
    from mpi4py import MPI

    import hpcgnn.api
    from hpcgnn.training.modes import GistMode

    graph = graph_file("ml.h5", n=90, classes=5, seed=4, multi_label=True)
    full, one, two = (shared_tmp / f"g-{k}.json" for k in ("full", "one", "two"))
    assert_all(world, main(["train", str(graph), *COMMON, "--metrics", str(full)]) == 0)
    assert_all(world, main(["train", str(graph), *COMMON, "--mode", "gist", "--subnets", "1",
                            "--metrics", str(one)]) == 0)
    docs = [json.loads(p.read_text()) for p in (full, one)]
    assert docs[0]["params_sha256"] == docs[1]["params_sha256"]
    for k in ("loss", "val_loss"):
        assert abs(docs[0]["final"][k] - docs[1]["final"][k]) <= 1e-10
    assert {k: docs[0]["final"][k] for k in SCORES} == {k: docs[1]["final"][k] for k in SCORES}
    ref = hpcgnn.api.train(graph, comm=MPI.COMM_SELF, layers=2, hidden=8, epochs=3, dropout=0,
                           dtype="float64", quiet=True, loss="bce", threads=1,
                           mode=GistMode(subnets=2, local_iters=2, rounds=3))
    assert_all(world, main(["train", str(graph), *COMMON, "--mode", "gist", "--subnets", "2",
                            "--local-iters", "2", "--rounds", "3", "--metrics", str(two)]) == 0)
    assert_equal_run(json.loads(two.read_text()), [e["loss"] for e in ref.metrics["epochs"]])


class _NoMultiLabel(FullBatchMode):
    """A mode that does not train multi-label targets (a user's, say)."""

    multi_label = False


def test_the_labels_and_the_loss_must_agree_and_other_modes_refuse(tmp_path, capsys):
    ml = write_random_graph(tmp_path / "ml.h5", n=60, multi_label=True)
    ids = write_random_graph(tmp_path / "ids.h5", n=60)
    cases = [
        ([str(ml)], "the graph has multi-label targets (a 0/1 label matrix): train it with"
                    " --loss bce"),
        ([str(ids), "--loss", "bce"], "--loss bce trains multi-label targets (a 0/1 label"
                                      " matrix); this graph has one class id per vertex"),
    ]
    for flags, words in cases:
        assert main(["train", *flags, "--epochs", "1", "--quiet"]) != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], (flags, err)
    import hpcgnn

    with pytest.raises(ConfigError, match="--loss must be one of ce, bce, got mse"):
        hpcgnn.train(ids, loss="mse")
    with pytest.raises(ConfigError, match="--loss bce is not implemented with --algo 1d yet:"
                                          " train multi-label targets with --mode"):
        hpcgnn.train(ml, loss="bce", epochs=1, quiet=True, mode=_NoMultiLabel())


def test_predict_writes_the_logits_and_the_0_1_matrix(tmp_path):
    path = write_random_graph(tmp_path / "ml.h5", n=60, classes=4, multi_label=True)
    ckpt, out = tmp_path / "ck", tmp_path / "p.h5"
    assert main(["train", str(path), "--loss", "bce", "--epochs", "2", "--quiet",
                 "--checkpoint-dir", str(ckpt)]) == 0
    assert main(["predict", str(path), "--checkpoint", str(ckpt), "--out", str(out)]) == 0
    with h5py.File(out) as h5:
        logits, pred = h5["logits"][()], h5["predictions"][()]
    assert logits.shape == (60, 4) and pred.shape == (60, 4) and pred.dtype == np.uint8
    np.testing.assert_array_equal(pred, (logits > 0).astype(np.uint8))


def test_a_bce_checkpoint_resumes_and_one_without_the_setting_is_ce(tmp_path):
    import hpcgnn
    from hpcgnn.training.checkpoint import MANIFEST

    ml = write_random_graph(tmp_path / "ml.h5", n=60, multi_label=True)
    whole = hpcgnn.train(ml, loss="bce", epochs=4, dtype="float64", quiet=True)
    hpcgnn.train(ml, loss="bce", epochs=2, dtype="float64", quiet=True,
                 checkpoint_dir=tmp_path / "ck", checkpoint_every=2)
    resumed = hpcgnn.train(ml, loss="bce", epochs=4, dtype="float64", quiet=True,
                           resume=tmp_path / "ck")
    assert resumed.metrics["params_sha256"] == whole.metrics["params_sha256"]
    ids = write_random_graph(tmp_path / "ids.h5", n=60)  # written before --loss: no key
    hpcgnn.train(ids, epochs=2, quiet=True, checkpoint_dir=tmp_path / "old",
                 checkpoint_every=2)
    manifest = tmp_path / "old" / MANIFEST
    doc = json.loads(manifest.read_text())
    del doc["fingerprint"]["loss"]
    manifest.write_text(json.dumps(doc))
    assert hpcgnn.train(ids, epochs=3, quiet=True, resume=tmp_path / "old").metrics["epochs"]


# -- minibatch mode and GIST's sampled groups -------------------------------------------------
#: Minibatch runs (``MinibatchMode``'s options, the flags of the same names): ``--bulk 1``,
#: one batch per optimizer step at any rank count, so a run at P ranks is the 1-rank run's.
SAMPLED = {
    "sage": {"sampler": "sage", "fanout": "3,2", "batch_size": 8},
    "sage-partitioned": {"sampler": "sage", "fanout": "3,2", "batch_size": 8,
                         "graph_layout": "partitioned"},
    "ladies": {"sampler": "ladies", "layer_size": "16,16", "batch_size": 8},
    "cluster": {"sampler": "cluster", "clusters": 6, "clusters_per_batch": 1},
}


def _flags(options: dict) -> list[str]:
    """``options`` as ``hpcgnn train`` flags."""
    return [a for k, v in options.items() for a in (f"--{k.replace('_', '-')}", str(v))]


@pytest.mark.mpi
@pytest.mark.parametrize("name", list(SAMPLED))
def test_minibatch_equals_the_one_rank_run_with_every_byte_predicted(
    graph_file, shared_tmp, world, name
):
    from mpi4py import MPI

    import hpcgnn.api
    from hpcgnn.training.modes import MinibatchMode

    options = {**SAMPLED[name], "bulk": 1}
    graph = graph_file("ml.h5", n=90, classes=5, seed=4, multi_label=True)
    ref = hpcgnn.api.train(graph, comm=MPI.COMM_SELF, layers=2, hidden=8, epochs=3,
                           dropout=0, dtype="float64", quiet=True, loss="bce", threads=1,
                           mode=MinibatchMode(**options))
    metrics = shared_tmp / f"mb-{name}.json"
    assert_all(world, main(["train", str(graph), *COMMON, "--mode", "minibatch",
                            *_flags(options), "--metrics", str(metrics)]) == 0)
    doc = json.loads(metrics.read_text())
    assert doc["config"]["loss"] == "bce"
    # minibatch mode predicts its control messages too (the samples' counts)
    assert_equal_run(doc, [e["loss"] for e in ref.metrics["epochs"]], control=True)
    if world.size > 1:  # the label rows came with the features, C bytes each
        assert doc["comm"]["measured_bytes"]["feature_fetch"] > 0
    final, want = doc["final"], ref.metrics["final"]
    for k in ("loss", "val_loss"):
        assert abs(final[k] - want[k]) <= 1e-10
    assert {k: final[k] for k in SCORES} == {k: want[k] for k in SCORES}


def test_a_sampled_step_is_torchs_mean_bce_of_its_seed_rows(tmp_path):
    from mpi4py import MPI

    from hpcgnn.config import TrainConfig
    from hpcgnn.grid.process_grid import ProcessGrid
    from hpcgnn.layout.shapes import choose_shape
    from hpcgnn.sampling.spec import SamplerSpec
    from hpcgnn.training.minibatch import MinibatchTrainer

    path = write_random_graph(tmp_path / "ml.h5", n=70, classes=5, seed=3, multi_label=True)
    with h5py.File(path) as h5:
        y = h5["labels"][()]
    spec = SamplerSpec("sage", (3, 2), batch_size=8, bulk=1, seed=2)
    cfg = TrainConfig(hidden=8, dropout=0.0, dtype="float64", seed=1, loss="bce",
                      model="sage")
    with ProcessGrid(MPI.COMM_SELF, choose_shape("1.5d", 1)) as grid:
        trainer = MinibatchTrainer(str(path), spec, "replicated", cfg, grid)
        assert trainer.fetcher.label_bytes == 5  # a row of C uint8 entries on the wire
        first = trainer.sampler.batches(0)[0]
        (batch,) = trainer.sampler.sample(0, [first], 0)
        x, labels = trainer.fetcher.fetch(batch.input_ids)
        assert labels.shape == (len(batch.input_ids), 5) and labels.dtype == np.uint8
        with torch.no_grad():  # the initial weights, before the step updates them
            logits = trainer.model.forward_batch(batch, torch.from_numpy(x), 0.0, None)
        loss, trained = next(trainer.steps(0))
    seeds = np.asarray(batch.seeds)
    want = torch.nn.functional.binary_cross_entropy_with_logits(
        logits, torch.from_numpy(y[seeds]).double())
    assert trained == 1 and len(seeds) == 8
    assert abs(float(loss) - float(want)) <= 1e-12


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 4)
def test_gist_with_one_sampled_subnet_is_minibatch_training_step_for_step(
    graph_file, shared_tmp, world
):
    graph = graph_file("ml.h5", n=90, classes=5, seed=4, multi_label=True)
    base = [*GIST_BASE, "--loss", "bce", "--dtype", "float64", *SAGE]
    mb_path, gist_path = shared_tmp / "mb.json", shared_tmp / "gist.json"
    assert_all(world, main(["train", str(graph), *base, "--mode", "minibatch", "--epochs", "3",
                            "--metrics", str(mb_path)]) == 0)
    mb = json.loads(mb_path.read_text())
    steps = mb["sampling"]["optimizer_steps_per_epoch"]
    assert_all(world, main(["train", str(graph), *base, "--mode", "gist", "--subnets", "1",
                            "--local-iters", str(steps), "--rounds", "3",
                            "--metrics", str(gist_path)]) == 0)
    gist = json.loads(gist_path.read_text())
    assert gist["config"]["loss"] == mb["config"]["loss"] == "bce"
    np.testing.assert_allclose(
        [e["loss"] for e in gist["epochs"]], [e["loss"] for e in mb["epochs"]], rtol=1e-10
    )
    assert gist["params_sha256"] == mb["params_sha256"]
    # the global model's sharded full-graph forward scores as the sampled model's
    assert gist["final"] == pytest.approx(mb["final"], rel=1e-9)
