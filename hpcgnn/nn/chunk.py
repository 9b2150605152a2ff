"""The graph primitives on one offload chunk's own rows (HongTu, ``--mode offload``).

A layer's forward runs on a chunk's own rows (:class:`ChunkPrimitives`); its exchanges
(``g.aggregate``, ``g.attention``) are where the chunk reads other rows. One run of the
forward is told (:class:`ChunkRun`) which exchange it stops at (``stop``: it records that
exchange's input rows ``X_i`` and ends), which exchange it computes from the neighbour
rows loaded for it (``live``: the chunk's block of the operator times the loaded rows, or
GAT's edge computation on them), and takes every other exchange's output ``A_i`` from
the host. :mod:`hpcgnn.layout.chunks` has the sweeps and stages that chain such runs.

``g.propagate`` aggregates first (``(Â^T H) W``: the chunk loads the layer input's rows,
as HongTu's GCN), and multiplies sparse input features first (``Â^T (X W)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.backend import Device
from hpcgnn.comm.stats import CommStats
from hpcgnn.kernels.attention import AttentionDrop, EdgePattern, edge_pattern, head_scores
from hpcgnn.kernels.gemm import matmul
from hpcgnn.kernels.spmm import to_torch_csr
from hpcgnn.nn.gat import LocalNeighbourhood, _Attend
from hpcgnn.nn.gcn import LocalAggregation, aggregate


class Stop(Exception):
    """A run of the forward reached the exchange it stops at."""


class Products:
    """Sparse input features of a chunk: each product ``X W`` is read from the host."""


@dataclass
class ChunkOps:
    """A chunk's operators: its block of the operator, its edges and its rows' positions.

    ``own``: the positions of the chunk's rows among its loaded rows (attention's
    destination terms).
    """

    block: LocalAggregation
    pattern: EdgePattern | None
    own: torch.Tensor

    @classmethod
    def of(cls, a_t: sp.csr_matrix, rows: tuple[int, int], first: int, cols: np.ndarray,
           attends: bool, device: Device, dtype: torch.dtype,
           at: np.ndarray | None = None, loaded: int = 0) -> ChunkOps:
        """The operators of the chunk of the rank's rows ``rows`` whose load is ``cols``.

        ``a_t``: the rank's rows of the operator (global columns); ``first``: the global id
        of its first row; ``attends``: build the edge pattern too. ``at``: the loaded
        buffer's row of each of ``cols`` in a buffer of ``loaded`` rows (HongTu's merged
        buffer, :func:`~hpcgnn.planning.dedup.merged_positions`), else ``None``: the rows
        of ``cols`` in order. The edges keep their order either way (only the column ids
        change), so each output row sums the same products in the same order.
        """
        a, b = rows
        blk = a_t[a:b]
        local = sp.csr_matrix((blk.data, np.searchsorted(cols, blk.indices), blk.indptr),
                              shape=(b - a, len(cols)))
        ids = np.arange(first + a, first + b, dtype=np.int64)
        dev = device.torch_device
        own = np.searchsorted(cols, ids)
        read = local if at is None else sp.csr_matrix(
            (local.data, at[local.indices], local.indptr), shape=(b - a, loaded))
        block = LocalAggregation(to_torch_csr(read, dtype, dev),
                                 to_torch_csr(read.T.tocsr(), dtype, dev))
        pattern = None
        if attends:  # (edge_pattern sorts ``local``'s edges in place: after the block)
            pattern = (edge_pattern(local, ids, cols, dev, dtype) if at is None
                       else _read_at(local, ids, cols, at, loaded, dev, dtype))
            if at is not None:  # an attending chunk's own rows are among its loaded ones
                own = at[own]
        return cls(block, pattern, device.from_numpy(own))


def _read_at(local: sp.csr_matrix, ids: np.ndarray, cols: np.ndarray, at: np.ndarray,
             loaded: int, dev: torch.device, dtype: torch.dtype) -> EdgePattern:
    """:func:`edge_pattern` of ``local`` (its edges sorted, as there) read at rows ``at``.

    The buffer rows that hold none of ``cols`` have the id ``-1``.
    """
    s = local.copy()
    s.sort_indices()
    col_ids = np.full(loaded, -1, dtype=np.int64)
    col_ids[at] = cols
    csr = torch.sparse_csr_tensor(torch.from_numpy(s.indptr.astype(np.int64)),
                                  torch.from_numpy(at[s.indices]),
                                  torch.ones(s.nnz, dtype=dtype), size=(s.shape[0], loaded),
                                  check_invariants=False).to(dev)
    return edge_pattern(csr, ids, col_ids, dev, dtype)


@dataclass
class ChunkRun:
    """What one run of a layer's forward on a chunk does at its exchanges.

    ``stop``: the exchange whose input ends the run (``None``: run to the output);
    ``live``: the exchange computed from ``load(i)``, the chunk's neighbour rows of its
    input (requiring a gradient where ``grad``); ``kept(i)``: an exchange output's own
    rows from the host; ``leaf(name)``: an earlier layer's value (``"s:<key>"``) or a
    sparse product (``"p<weight>"``) from the host; ``grad``: leaves require gradients.
    """

    stop: int | None
    live: int | None
    load: Callable[[int], torch.Tensor]
    kept: Callable[[int], torch.Tensor]
    leaf: Callable[[str], torch.Tensor]
    grad: bool = False


class _State(dict):
    """``g.state`` of a chunk: earlier layers' values read from the host when first used."""

    def __init__(self, g: ChunkPrimitives) -> None:
        super().__init__()
        self.g = g

    def __getitem__(self, key: str) -> Any:
        if not dict.__contains__(self, key):
            return self.g.leaf(f"s:{key}")
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key: str, value: Any) -> None:
        self.g.sets[key] = value
        dict.__setitem__(self, key, value)


class ChunkPrimitives:
    """The primitives (:class:`~hpcgnn.kinds.Primitives`) of a layer on a chunk's own rows.

    Parameters
    ----------
    run
        What the run does at its exchanges.
    ops
        The chunk's operators.
    layer, last
        The layer's index and whether it is the output layer.
    weights
        The layer's weights (leaves of the run); an attention computed live scores its
        destinations with a copy of ``a_dst`` of its own (:attr:`exchange_leaves`).
    stats, drop
        Where products are timed; the step's attention dropout (or ``None``).
    bias
        The layer's bias (``--bias``, a leaf of the run like the weights), else ``None``.
    """

    def __init__(self, run: ChunkRun, ops: ChunkOps, layer: int, last: bool,
                 weights: Sequence[torch.Tensor], stats: CommStats | None = None,
                 drop: AttentionDrop | None = None, bias: torch.Tensor | None = None) -> None:
        self.run, self.ops, self.layer, self.last = run, ops, layer, last
        self.weights, self.stats, self.drop, self.b = weights, stats, drop, bias
        self.state: dict[str, Any] = _State(self)
        self.xs: dict[int, torch.Tensor] = {}  # the exchanges' inputs (own rows)
        self.outs: dict[int, torch.Tensor] = {}  # the exchanges' outputs (own rows)
        self.sets: dict[str, Any] = {}
        self.leaves: dict[str, torch.Tensor] = {}
        self.neigh: torch.Tensor | None = None  # the live exchange's loaded rows
        self.exchange_leaves: list[tuple[int, torch.Tensor]] = []
        self._calls = 0

    def leaf(self, name: str) -> torch.Tensor:
        """An own-row leaf from the host, read once per run."""
        if name not in self.leaves:
            t = self.run.leaf(name)
            self.leaves[name] = t.requires_grad_() if self.run.grad else t
        return self.leaves[name]

    def _exchange(self, x: torch.Tensor, live: Callable[[torch.Tensor], torch.Tensor]
                  ) -> torch.Tensor:
        i, self._calls = self._calls, self._calls + 1
        self.xs[i] = x
        if i == self.run.stop:
            raise Stop
        if i == self.run.live:
            neigh = self.run.load(i)
            self.neigh = neigh.requires_grad_() if self.run.grad else neigh
            out = live(self.neigh)
        else:
            out = self.run.kept(i)
            if self.run.grad:
                out.requires_grad_()
        self.outs[i] = out
        return out

    def aggregate(self, h: Any) -> torch.Tensor:
        """The chunk's block of the operator times the loaded rows of ``h``."""
        if isinstance(h, Products):
            raise ValueError("offload multiplies sparse input features before aggregating")
        return self._exchange(h, lambda n: aggregate(n, self.ops.block, self.stats, self.layer))

    def dense(self, h: Any, w: torch.Tensor) -> torch.Tensor:
        """``H W`` on the chunk's rows; on sparse features the product from the host."""
        if isinstance(h, Products):
            index = next(i for i, t in enumerate(self.weights) if t is w)
            return self.leaf(f"p{index}")
        return matmul(h, w, self.stats)

    def own(self, h: Any) -> Any:
        """``h`` itself: the run holds the chunk's own rows only."""
        return h

    def bias(self, z: Any) -> Any:
        """``z`` plus the layer's bias on the chunk's rows (``z`` itself without one)."""
        return z if self.b is None else z + self.b

    def propagate(self, h: Any, w: torch.Tensor, self_weight: torch.Tensor | None = None
                  ) -> torch.Tensor:
        """``(Â^T H) W`` (sparse features: ``Â^T (X W)``) plus ``H W_self``."""
        if isinstance(h, Products):
            z = self.aggregate(self.dense(h, w))
        else:
            z = self.dense(self.aggregate(h), w)
        return z if self_weight is None else z + self.dense(self.own(h), self_weight)

    def attention(self, h: Any, w: torch.Tensor, a_src: torch.Tensor, a_dst: torch.Tensor
                  ) -> torch.Tensor:
        """GAT's layer: the own rows' ``[z | s_src]`` exchanged, the edges scored on them."""
        heads, width = a_src.shape
        z = self.dense(h, w)
        s_src = head_scores(z.view(-1, heads, width), a_src)

        def attend(neigh: torch.Tensor) -> torch.Tensor:
            a = a_dst.detach().requires_grad_() if self.run.grad else a_dst
            index = next(i for i, t in enumerate(self.weights) if t is a_dst)
            self.exchange_leaves.append((index, a))
            z_all = neigh[:, : heads * width].reshape(-1, heads, width)
            s_dst = head_scores(z_all[self.ops.own], a)
            pattern = self.ops.pattern
            assert pattern is not None
            keep = None if self.drop is None else self.drop.keep(self.layer, pattern, heads)
            p = 0.0 if self.drop is None else self.drop.p
            out = _Attend.apply(z_all, s_dst, neigh[:, heads * width:],
                                LocalNeighbourhood(pattern), keep, p)
            out = out.mean(dim=1) if self.last else out.reshape(-1, heads * width)
            out = self.bias(out)
            return out if self.last else torch.nn.functional.elu(out)

        return self._exchange(torch.cat([z, s_src], dim=1), attend)
