"""GAT's attention dropout: one decision per global (destination, source, head)."""

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.kernels.attention import edge_pattern
from hpcgnn.nn.gat import AttentionDrop


def test_a_gist_sub_gat_draws_the_global_models_decisions_of_its_heads():
    a = sp.random(11, 11, density=0.3, random_state=1, format="csr") + sp.eye(11)
    pattern = edge_pattern(a.tocsr(), np.arange(11), np.arange(11), "cpu", torch.float64)
    whole = AttentionDrop(0.5, seed=3, epoch=2).keep(1, pattern, 5)  # K = 5 heads
    assert whole.shape == (pattern.edges, 5) and 0 < float(whole.double().mean()) < 1
    mine = np.array([1, 3, 4])  # a sub-GAT of global heads 1, 3, 4
    sub = AttentionDrop(0.5, seed=3, epoch=2, heads=lambda layer: (5, mine))
    assert torch.equal(sub.keep(1, pattern, 3), whole[:, mine])
    # and a SUMMA process of that sub-GAT holding its heads 0 and 2 (global 1 and 4)
    assert torch.equal(sub.keep(1, pattern, 3, [0, 2]), whole[:, [1, 4]])
    # a layer whose heads are all the model's (the output layer: None) is as without
    both = AttentionDrop(0.5, seed=3, epoch=2, heads=lambda layer: None)
    assert torch.equal(both.keep(1, pattern, 5), whole)
