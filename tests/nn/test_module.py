"""The Python API on one process trains the model ``hpcgnn train`` trains on one rank."""

import json

import pytest
import torch

from hpcgnn.cli.main import main
from hpcgnn.nn import GCN, Graph
from hpcgnn.nn.gcn import cross_entropy_sum
from hpcgnn.training.loop import params_sha256
from tests.graphs import write_random_graph

#: Each model's settings beyond the layer kind, as GCN's keywords and as CLI flags.
EXTRA = {"gat": ({"heads": 2, "output_heads": 2}, ["--heads", "2", "--output-heads", "2"])}


def train_script(path, model, epochs, sparse):
    """What a user's script does (the module docstring's loop, with the CLI's loss sum)."""
    g = Graph.read(path, model=model, sparse_features=sparse)
    net = GCN(g.num_features, 8, g.num_classes, model=model, seed=2,
              **EXTRA.get(model, ({}, []))[0])
    opt = net.optimizer(lr=0.01, weight_decay=5e-4)
    n_train = int(g.train_mask.sum())
    for _ in range(epochs):
        net.train()
        opt.zero_grad()
        loss = cross_entropy_sum(net(g), g.y, g.train_mask) / n_train
        loss.backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        acc = float((net(g).argmax(1) == g.y)[g.test_mask].float().mean())
    return net, acc


@pytest.mark.parametrize("model", ["gcn", "sage", "gin", "gat"])
@pytest.mark.parametrize("sparse", ["off", "on"])
def test_a_script_trains_what_the_cli_trains(tmp_path, model, sparse):
    path = tmp_path / "g.h5"
    write_random_graph(path, n=60, features=20, feature_density=0.2, seed=5)
    net, acc = train_script(path, model, 5, sparse)
    out = tmp_path / "m.json"
    assert main(["train", str(path), "--epochs", "5", "--hidden", "8", "--seed", "2",
                 "--model", model, "--sparse-features", sparse, "--quiet", "--eval-every", "0",
                 "--metrics", str(out), *EXTRA.get(model, ({}, []))[1]]) == 0
    doc = json.loads(out.read_text())
    assert params_sha256(list(net.weights)) == doc["params_sha256"]
    assert acc == pytest.approx(doc["final"]["test_acc"])


def test_the_graph_says_its_sizes(tmp_path):
    path = tmp_path / "g.h5"
    write_random_graph(path, n=30, features=7, classes=4, seed=1)
    g = Graph.read(path)
    assert (g.num_nodes, g.num_features, g.num_classes) == (30, 7, 4)
    assert GCN(7, 5, 4, layers=3)(g).shape == (30, 4)
