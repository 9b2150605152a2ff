"""The serial reference: one process, the whole graph, the same model and optimiser.

Every distributed algorithm is tested against this: same initial weights from the seed,
same dropout masks (counter-based, see :mod:`hpcgnn.rng`), same loss (mean
cross-entropy over all training vertices), same Adam steps.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp
import torch
from mpi4py import MPI

from hpcgnn.comm.communicator import Comm
from hpcgnn.config import TrainConfig
from hpcgnn.graph.normalize import degrees_from_indptr, normalize_block
from hpcgnn.io.reader import GraphFile
from hpcgnn.kernels.spmm import spmm, to_torch_csr
from hpcgnn.layout.order import layer_sizes
from hpcgnn.nn.gcn import cross_entropy_sum, gcn_forward
from hpcgnn.rng import dropout_keep
from hpcgnn.train.model_state import init_weights


class LocalAggregation:
    """``Â^T H`` and ``Â G`` with both matrices held locally."""

    def __init__(self, a_t: torch.Tensor, a: torch.Tensor) -> None:
        self.a_t = a_t
        self.a = a

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Return ``Â^T h``."""
        return spmm(self.a_t, h)

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        """Return ``Â g``."""
        return spmm(self.a, g)


def load_normalized(gf: GraphFile, dtype: np.dtype | type) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Read the whole graph and return ``(Â^T, Â)`` as SciPy CSR matrices."""
    n = gf.meta.num_nodes
    a = gf.read_csr(0, n)
    a_t = gf.read_csr(0, n, transpose=True) if gf.meta.directed else a
    out_deg = degrees_from_indptr(a.indptr)
    in_deg = degrees_from_indptr(a_t.indptr)
    norm_t = normalize_block(a_t, 0, in_deg, out_deg, dtype)
    norm = normalize_block(a, 0, out_deg, in_deg, dtype)
    return norm_t, norm


class SerialGCN:
    """Full-batch GCN on one process.

    Parameters
    ----------
    path
        Graph file.
    cfg
        Training configuration.

    """

    def __init__(self, path: str | os.PathLike, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.comm = Comm(MPI.COMM_SELF, name="self")
        dtype = cfg.torch_dtype
        with GraphFile(path) as gf:
            meta = gf.meta
            n = meta.num_nodes
            np_dtype = np.float64 if cfg.dtype == "float64" else np.float32
            norm_t, norm = load_normalized(gf, np_dtype)
            self.x = torch.from_numpy(gf.read_features(0, n).astype(np_dtype))
            self.y = torch.from_numpy(gf.read_labels(0, n))
            self.masks = {
                m: torch.from_numpy(gf.read_mask(m, 0, n)) for m in ("train", "val", "test")
            }
        self.meta = meta
        op = LocalAggregation(to_torch_csr(norm_t, dtype), to_torch_csr(norm, dtype))
        self.ops = [op] * cfg.layers
        self.widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        self.weights = init_weights(meta.num_features, meta.num_classes, cfg)
        self.num_train = int(self.masks["train"].sum())

    def logits(self, epoch: int | None) -> torch.Tensor:
        """Forward pass; ``epoch=None`` evaluates without dropout."""
        n = self.meta.num_nodes
        keep = None
        if epoch is not None:

            def keep(layer: int) -> np.ndarray:
                w = self.widths[layer]
                return dropout_keep(
                    self.cfg.seed, epoch, layer, (0, n), (0, w), w, self.cfg.dropout
                )

        return gcn_forward(self.x, self.weights, self.ops, self.cfg.dropout, keep)

    def loss(self, logits: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over the training vertices."""
        return cross_entropy_sum(logits, self.y, self.masks["train"]) / max(1, self.num_train)

    def reduce_gradients(self) -> None:
        """Nothing to reduce on one process."""
