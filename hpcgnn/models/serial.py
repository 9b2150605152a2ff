"""The serial reference: one process, the whole graph, the same GCN and optimiser.

Every distributed algorithm is tested against this: same initial weights from the seed,
same dropout masks (counter-based, see :mod:`hpcgnn.rng`), same loss (mean cross-entropy
over all training vertices), same Adam steps.
"""

from __future__ import annotations

import numpy as np
import torch
from mpi4py import MPI

from hpcgnn.comm.communicator import Comm
from hpcgnn.config import TrainConfig
from hpcgnn.graph.normalize import load_normalized
from hpcgnn.io.memory import GraphSource, open_graph
from hpcgnn.kernels.attention import edge_pattern
from hpcgnn.kernels.spmm import to_torch_csr
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.trace import ATTENTION, uses
from hpcgnn.models.base import GCNModel
from hpcgnn.models.share import read_vertex_data
from hpcgnn.nn.gat import LocalNeighbourhood
from hpcgnn.nn.gcn import LayerOps, LocalAggregation


class SerialGCN(GCNModel):
    """Full-batch GCN (or GraphSAGE-mean, ``cfg.kind``) on one process (``COMM_SELF``).

    Nothing is reduced.

    Parameters
    ----------
    path
        Graph file, or a graph in memory (:class:`~hpcgnn.io.memory.MemoryGraph`).
    cfg
        Training configuration.
    weights
        ``W^1 .. W^L`` to train (default: Glorot from ``cfg.seed``; sage: per layer
        ``W_self, W_neigh``).

    """

    def __init__(
        self, path: GraphSource, cfg: TrainConfig,
        weights: list[torch.Tensor] | None = None,
    ) -> None:
        self.grid = None
        self.cfg = cfg
        self.comm = Comm(MPI.COMM_SELF, name="self")
        self.stats = None
        self.offsets = None
        dtype = cfg.torch_dtype
        with open_graph(path) as gf:
            self.meta = meta = gf.meta
            n = meta.num_nodes
            norm_t, norm = load_normalized(gf, cfg.numpy_dtype, kind=cfg.kind)
            self.x, self.y, self.masks = read_vertex_data(
                gf, (0, n), cfg.numpy_dtype, device=self.comm.device
            )
        self.rows = (0, n)
        self.row_ids = np.arange(n)
        assert norm is not None
        nbh = None
        widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        if uses(widths, cfg.kind, ATTENTION):  # the edges: the pattern, every row local
            ids = np.arange(n)
            nbh = LocalNeighbourhood(edge_pattern(norm_t, ids, ids, "cpu", dtype))
        ops = LayerOps(LocalAggregation(to_torch_csr(norm_t, dtype), to_torch_csr(norm, dtype)),
                       neighbourhood=nbh)
        self.layers = [ops] * cfg.layers
        self._init_weights(weights)

    def reduce_gradients(self) -> None:
        """Nothing to reduce on one process."""
