"""The serial reference: one process, the whole graph, the same GCN and optimiser.

Every distributed algorithm is tested against this: same initial weights from the seed,
same dropout masks (counter-based, see :mod:`hpcgnn.rng`), same loss (mean cross-entropy
over all training vertices), same Adam steps.
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
from hpcgnn.models.base import GCNModel, read_vertex_data
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
    gf: GraphFile, dtype: np.dtype | type, adjoint: bool = True
) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
    """Read the whole graph and return ``(Â^T, Â)`` as SciPy CSR matrices.

    ``adjoint=False`` (a forward pass only) skips ``Â`` and returns ``(Â^T, None)``.
    """
    n = gf.meta.num_nodes
    a = gf.read_csr(0, n)
    a_t = gf.read_csr(0, n, transpose=True) if gf.meta.directed else a
    out_deg = degrees_from_indptr(a.indptr)
    in_deg = degrees_from_indptr(a_t.indptr)
    norm_t = normalize_block(a_t, 0, in_deg, out_deg, dtype)
    norm = normalize_block(a, 0, out_deg, in_deg, dtype) if adjoint else None
    return norm_t, norm


class SerialGCN(GCNModel):
    """Full-batch GCN on one process (``comm`` is ``COMM_SELF``; nothing is reduced).

    Parameters
    ----------
    path
        Graph file.
    cfg
        Training configuration.
    weights
        ``W^1 .. W^L`` to train (default: Glorot from ``cfg.seed``).

    """

    def __init__(
        self, path: str | os.PathLike, cfg: TrainConfig,
        weights: list[torch.Tensor] | None = None,
    ) -> None:
        self.grid = None
        self.cfg = cfg
        self.comm = Comm(MPI.COMM_SELF, name="self")
        self.stats = None
        self.offsets = None
        dtype = cfg.torch_dtype
        with GraphFile(path) as gf:
            self.meta = meta = gf.meta
            n = meta.num_nodes
            norm_t, norm = load_normalized(gf, cfg.numpy_dtype)
            self.x, self.y, self.masks = read_vertex_data(gf, (0, n), cfg.numpy_dtype)
        self.rows = (0, n)
        assert norm is not None
        ops = LayerOps(LocalAggregation(to_torch_csr(norm_t, dtype), to_torch_csr(norm, dtype)))
        self.layers = [ops] * cfg.layers
        self._init_weights(weights)

    def reduce_gradients(self) -> None:
        """Nothing to reduce on one process."""
