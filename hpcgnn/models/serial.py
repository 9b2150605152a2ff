"""The serial reference: one process, the whole graph, the same GCN and optimiser.

Every distributed algorithm is tested against this: same initial weights from the seed,
same dropout masks (counter-based, see :mod:`hpcgnn.rng`), same loss (mean cross-entropy
over all training vertices), same Adam steps.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from mpi4py import MPI

from hpcgnn.comm.communicator import Comm
from hpcgnn.config import TrainConfig
from hpcgnn.graph.normalize import operator_block
from hpcgnn.io.memory import GraphReader, GraphSource, open_graph
from hpcgnn.kernels.spmm import spmm, to_torch_csr
from hpcgnn.kinds import GCN, LayerKind
from hpcgnn.models.base import GCNModel
from hpcgnn.models.share import read_vertex_data
from hpcgnn.nn.gcn import LayerOps


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


def load_normalized(
    gf: GraphReader, dtype: np.dtype | type, adjoint: bool = True, kind: LayerKind = GCN
) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
    """Read the whole graph and return ``(Â^T, Â)`` as SciPy CSR matrices.

    ``adjoint=False`` (a forward pass only) skips ``Â`` and returns ``(Â^T, None)``;
    a kind with the mean operator (GraphSAGE) returns the mean ``D_in^-1 A^T`` and its
    adjoint instead (:func:`~hpcgnn.graph.normalize.operator_block`).
    """
    n = gf.meta.num_nodes
    a = gf.read_csr(0, n)
    a_t = gf.read_csr(0, n, transpose=True) if gf.meta.directed else a
    norm_t = operator_block(a_t, 0, True, a_t.indptr, a.indptr, kind, dtype)
    norm = operator_block(a, 0, False, a.indptr, a_t.indptr, kind, dtype) if adjoint else None
    return norm_t, norm


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
        assert norm is not None
        ops = LayerOps(LocalAggregation(to_torch_csr(norm_t, dtype), to_torch_csr(norm, dtype)))
        self.layers = [ops] * cfg.layers
        self._init_weights(weights)

    def reduce_gradients(self) -> None:
        """Nothing to reduce on one process."""
