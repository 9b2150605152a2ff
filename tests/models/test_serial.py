"""The serial reference model (host only: ``SerialGCN`` runs on ``COMM_SELF`` and the CPU
device by design, it is what the distributed models on the suite's device are compared
with in :mod:`tests.models.reference`)."""

import numpy as np
import pytest
import torch

from hpcgnn.config import TrainConfig
from hpcgnn.io import GraphFile
from hpcgnn.models.serial import SerialGCN
from hpcgnn.nn.init import glorot_weights
from tests.graphs import write_random_graph


@pytest.mark.parametrize("directed", [False, True])
def test_serial_sage_is_self_term_plus_in_neighbour_mean(tmp_path, directed):
    path = write_random_graph(tmp_path / "g.h5", n=40, avg_degree=1.5, directed=directed,
                              seed=3, features=5, classes=3)
    cfg = TrainConfig(layers=2, hidden=4, dtype="float64", seed=2, model="sage")
    model = SerialGCN(path, cfg)
    with GraphFile(path) as gf:
        a = gf.read_csr(0, 40).toarray()
        x = gf.read_features(0, 40).astype(np.float64)
    a_t = a.T
    in_deg = a_t.sum(axis=1, keepdims=True)
    assert (in_deg == 0).any()  # the case of an empty mean is covered
    mean = np.divide(a_t, in_deg, out=np.zeros_like(a_t), where=in_deg > 0)
    w_self = glorot_weights(model.widths, 2, np.float64)
    w_neigh = glorot_weights(model.widths, 3, np.float64)
    h = np.maximum(x @ w_self[0] + mean @ x @ w_neigh[0], 0.0)
    want = h @ w_self[1] + mean @ h @ w_neigh[1]
    assert len(model.weights) == 4
    assert torch.allclose(model.logits(None).detach(), torch.from_numpy(want), atol=1e-12)


def test_gcn_model_keeps_one_weight_per_layer(tmp_path):
    path = write_random_graph(tmp_path / "g.h5", n=20, seed=1)
    model = SerialGCN(path, TrainConfig(layers=3, hidden=4))
    assert len(model.weights) == 3
