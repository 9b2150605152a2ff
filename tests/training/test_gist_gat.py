"""GIST trains GAT with whole heads: each sub-GAT is an ordinary GAT of its heads.

- ``M = 1, K = 1`` is ordinary full-batch GAT training step for step (``--algo 1d``,
  ``halo``, ``1.5d``, ``2d``, ``3d``);
- after a round each sub-GAT equals the serial GAT of its heads trained ``K`` steps from
  the global model's slice (the global dropout masks at its units, the global attention
  dropout at its heads), the merged model holds every sub-GAT's slice, the output layer's
  score vectors are the mean of the sub-GATs' copies, and the merged model's loss is the
  serial loss of the merged weights (the model-parallel evaluation);
- every byte is the cost model's (sub-models, score vectors, evaluation, the groups' GAT);
- ``--subnets M`` above ``--heads`` and ``--gist-rescale`` are refused in one line.
"""

import numpy as np
import pytest
import torch

from hpcgnn.config import TrainConfig
from hpcgnn.kinds.gat import GATLayer
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.subnets import cut, model_params, subnets
from hpcgnn.models.serial import SerialGCN
from hpcgnn.nn.init import init_weights
from hpcgnn.training.checkpoint import SHARD_FILE
from hpcgnn.training.fullbatch import FullBatchTrainer
from tests.robustness.harness import expect_error
from tests.training.test_gist import _train

SEED, FEATURES, CLASSES, LAYERS, HIDDEN, HEADS = 2, 6, 3, 3, 6, 3
BASE = ["--hidden", str(HIDDEN), "--layers", str(LAYERS), "--dropout", "0.3", "--seed", str(SEED),
        "--quiet", "--threads", "1", "--model", "gat"]


def _subnets(size):
    """``M`` at ``size`` ranks: 3 sub-GATs of one head each at 3 ranks, else 2 (2 + 1 heads)."""
    return 3 if size == 3 else 2


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 4)
@pytest.mark.parametrize(
    ("algo", "heads"),
    [(["--algo", "1d"], 1), (["--algo", "1d"], 3), (["--algo", "halo"], 1),
     (["--algo", "1.5d", "--replication", "2"], 1), (["--algo", "2d"], 3),
     (["--algo", "3d", "--grid", "1x2x2"], 3)],
    ids=["1d", "1d-3-heads", "halo", "1.5d", "2d-3-heads", "3d-3-heads"],
)
def test_one_subnet_one_iteration_is_full_batch_gat_step_for_step(
    graph_file, shared_tmp, world, algo, heads
):
    if len(algo) > 2 and world.size != 4:
        pytest.skip("1.5D with replication 2, 3D on 1 x 2 x 2: at 4 ranks")
    path = graph_file(n=50, seed=4, features=FEATURES, classes=CLASSES)
    flags = [*algo, "--heads", str(heads), "--output-heads", str(min(heads, 2)),
             "--epochs", "3", "--dtype", "float64"]
    full = _train(world, path, shared_tmp / "full.json", *flags, base=BASE)
    gist = _train(world, path, shared_tmp / "gist.json", *flags, "--mode", "gist",
                  "--subnets", "1", "--local-iters", "1", base=BASE)
    assert [e["loss"] for e in gist["epochs"]] == [e["loss"] for e in full["epochs"]]
    assert gist["params_sha256"] == full["params_sha256"]
    # the model-parallel evaluation: the same model, its sums in another order
    assert gist["final"]["loss"] == pytest.approx(full["final"]["loss"], rel=1e-10)
    for key in ("train_acc", "val_acc", "test_acc"):
        assert gist["final"][key] == full["final"][key]


def _checkpoint(ckpt, ranks):
    """Every rank's file of the one-round checkpoint: the W rows and the replicated vectors."""
    return [dict(np.load(ckpt / SHARD_FILE.format(epoch=1, rank=r, ranks=ranks)))
            for r in range(ranks)]


def _serial_sub_gat(path, weights, net, heads, k, lr):
    """The serial GAT of ``net``'s heads trained ``k`` steps from the global ``weights``."""
    sub_heads = len(net.ids[1]) // (HIDDEN // HEADS)
    cfg = TrainConfig(layers=LAYERS, hidden=len(net.ids[1]), dropout=0.3, seed=SEED, lr=lr,
                      dtype="float64", model="gat", heads=sub_heads, output_heads=heads)
    chained = cut(model_params(net.widths, GATLayer(HEADS, heads)), net)  # W's rows, columns
    sliced = []
    for layer in range(LAYERS):
        w, a_src, a_dst = weights[3 * layer : 3 * layer + 3]
        sliced.append(w[np.ix_(chained.rows(layer), chained.cols(layer))])
        cols = chained.cols(layer)
        sliced += [a.reshape(-1)[cols].reshape(-1, a.shape[1]) for a in (a_src, a_dst)]
    model = SerialGCN(path, cfg, weights=[torch.tensor(w, requires_grad=True) for w in sliced])
    model.subnet = net  # the global dropout masks at its units, attention dropout at its heads
    trainer = FullBatchTrainer(model, cfg, model.comm)
    for step in range(k):
        trainer.step(step)
    return chained, [w.detach().numpy() for w in model.weights]


@pytest.mark.mpi
@pytest.mark.ranks(2, 3, 4)
@pytest.mark.parametrize(
    "algo", [["--algo", "1d"], ["--algo", "2d", "--grid", "1x2"]], ids=["1d", "2d-1x2"]
)
def test_each_sub_gat_is_the_serial_gat_of_its_heads(graph_file, shared_tmp, world, algo):
    m, k, out_heads, lr = _subnets(world.size), 2, 2, 0.05
    if algo[1] == "2d" and world.size // m != 2:
        pytest.skip("groups of 2 ranks on a 1 x 2 grid (its 2 processes split the heads)")
    path = graph_file(n=50, seed=5, features=FEATURES, classes=CLASSES)
    ckpt = shared_tmp / "ckpt"
    doc = _train(world, path, shared_tmp / "m.json", "--mode", "gist", "--subnets", str(m),
                 *algo,
                 "--local-iters", str(k), "--rounds", "1", "--heads", str(HEADS), "--output-heads",
                 str(out_heads), "--dtype", "float64", "--lr", str(lr), "--checkpoint-dir",
                 str(ckpt), base=BASE)
    assert doc["gist"]["subnet_hidden"] == ([2, 2, 2] if m == 3 else [4, 2])
    files = _checkpoint(ckpt, world.size)
    merged = [np.concatenate([f[f"w{i}"] for f in files]) for i in range(LAYERS)]
    vectors = [files[0][f"w{LAYERS + i}"] for i in range(2 * LAYERS)]  # replicated
    for f in files[1:]:
        for i in range(2 * LAYERS):
            np.testing.assert_array_equal(f[f"w{LAYERS + i}"], vectors[i])

    widths = layer_sizes(FEATURES, HIDDEN, CLASSES, LAYERS)
    merged_cfg = TrainConfig(layers=LAYERS, hidden=HIDDEN, seed=SEED, dtype="float64",
                             model="gat", heads=HEADS, output_heads=out_heads)
    initial = init_weights(widths, SEED, "float64", merged_cfg.kind)
    initial = [w.detach().numpy() for w in initial]
    per_head = HIDDEN // HEADS
    nets = subnets(SEED, 0, widths, m, block=per_head)
    heads_of = [tuple(net.ids[1][::per_head] // per_head) for net in nets]
    assert sorted(h for hs in heads_of for h in hs) == [0, 1, 2]  # whole heads, disjoint
    out_src, out_dst = [], []
    for net in nets:
        chained, trained = _serial_sub_gat(path, initial, net, out_heads, k, lr)
        for layer in range(LAYERS):  # the merged model holds each sub-GAT's slice
            got = merged[layer][np.ix_(chained.rows(layer), chained.cols(layer))]
            np.testing.assert_allclose(got, trained[3 * layer], rtol=1e-9, atol=1e-12)
        for layer in range(LAYERS - 1):  # a hidden layer's score vectors: its heads' rows
            for j in range(2):
                got = vectors[2 * layer + j].reshape(-1)[chained.cols(layer)]
                np.testing.assert_allclose(got, trained[3 * layer + 1 + j].reshape(-1),
                                           rtol=1e-9, atol=1e-12)
        out_src.append(trained[3 * LAYERS - 2])
        out_dst.append(trained[3 * LAYERS - 1])
    # the output layer's score vectors: every sub-GAT's, averaged
    np.testing.assert_allclose(vectors[-2], np.mean(out_src, axis=0), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(vectors[-1], np.mean(out_dst, axis=0), rtol=1e-9, atol=1e-12)
    # the blocks of W^2 no sub-GAT holds (rows of one's heads, columns of another's)
    for a in range(m):
        for b in range(m):
            if a != b:
                block = np.ix_(nets[a].ids[1], nets[b].ids[2])
                np.testing.assert_array_equal(merged[1][block], initial[3][block])
    # the model-parallel evaluation is the serial GAT of the merged weights
    full = [t for layer in range(LAYERS)
            for t in (merged[layer], *vectors[2 * layer : 2 * layer + 2])]
    with torch.no_grad():
        serial = SerialGCN(path, merged_cfg, weights=[torch.from_numpy(w) for w in full])
        loss = FullBatchTrainer(serial, merged_cfg, serial.comm).evaluate()["loss"]
    assert doc["final"]["loss"] == pytest.approx(loss, rel=1e-10)
    world.mpi.Barrier()


@pytest.mark.mpi
@pytest.mark.ranks(2, 3, 4)
@pytest.mark.parametrize("algo", ["1d", "halo", "2d"])
def test_gat_traffic_equals_the_cost_model(graph_file, shared_tmp, world, algo):
    m = _subnets(world.size)
    path = graph_file(n=50, seed=6, features=FEATURES, classes=CLASSES)
    doc = _train(world, path, shared_tmp / "t.json", "--mode", "gist", "--algo", algo,
                 "--subnets", str(m), "--local-iters", "2", "--rounds", "3", "--heads", "3",
                 "--output-heads", "2", "--eval-every", "1", base=BASE)
    section = doc["gist"]
    assert len(section["per_round"]) == 3
    for rec in section["per_round"]:
        assert rec["sent_bytes"] == rec["predicted_sent_bytes"]
        assert rec["returned_bytes"] == rec["predicted_returned_bytes"]
        assert rec["attention_bytes"] == rec["predicted_attention_bytes"] > 0
    measured, predicted = doc["comm"]["measured_bytes"], doc["comm"]["predicted_bytes"]
    assert "gist_attention" in predicted
    for cat, value in predicted.items():  # the groups' GAT, the sub-models, the vectors
        assert measured.get(cat, 0.0) == pytest.approx(value, rel=1e-12), cat
    sub = section["submodel_bytes_per_round"]
    assert sub["measured"] == pytest.approx(sub["predicted"], rel=1e-12)
    ev = section["eval_bytes_per_evaluation"]
    assert ev["evaluations"] == 4 and ev["measured"] == pytest.approx(ev["predicted"], rel=1e-12)


@pytest.mark.mpi
@pytest.mark.ranks(2, 4)
def test_gat_settings_gist_cannot_run_give_one_line_on_every_rank(graph_file, world, capfd):
    path = graph_file(n=30, seed=7, features=FEATURES, classes=CLASSES)
    gist = ["train", path, *BASE, "--mode", "gist", "--epochs", "2"]
    m = str(world.size)
    expect_error(world, capfd, [*gist, "--subnets", m, "--heads", "1"],
                 f"--subnets {m} splits --model gat's --hidden", "it needs --subnets <= 1")
    expect_error(world, capfd, [*gist, "--subnets", "2", "--heads", "3", "--gist-rescale"],
                 "--gist-rescale is not available with --model gat")
    # sampled groups keep heads whole too
    expect_error(world, capfd, [*gist, "--sampler", "sage", "--fanout", "4,3,2", "--subnets", m,
                                "--heads", "1"], f"--subnets {m} splits --model gat's --hidden")

