"""Halo-exchange distributed SpMM: owned rows plus point-to-point halo rows.

Rank ``r`` owns a contiguous vertex range and its rows of ``Â^T``, compressed to the
columns ``[owned | halo]`` (see :mod:`hpcgnn.exchange.halo`). Forward
``T_r = (Â^T H)_r``: gather the halo rows of ``H`` with one all-to-allv, then one local
SpMM. Backward ``(Â G)_r`` runs in one of two ways:

``push``
    the reverse of the forward: ``Â_loc^{T T} G_r`` (the transpose of the local block)
    gives contributions to the owned *and* the halo rows; the halo rows are sent back to
    their owners with one all-to-allv and scatter-added there. Moves the forward halo.
``pull``
    gather the halo rows of ``G`` for ``r``'s rows of ``Â`` (its own halo set) and
    multiply locally. For directed graphs this halo differs from the forward one.

Per layer and direction rank ``r`` receives ``|halo_fwd(r)| f`` words in the forward,
``|send_fwd(r)| f`` (push) or ``|halo_bwd(r)| f`` (pull) in the backward.

With ``exchange="planned"`` the forward gather runs a DGCL SPST plan over a topology
(:class:`hpcgnn.exchange.staged.StagedExchange`: stages, forwarding through intermediate
ranks) and the backward is always ``push``, the plan's stages in reverse with swapped
tables.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.cost.halo import choose_backward
from hpcgnn.exchange.halo import HALO_SETUP, HaloExchange, halo_sets, local_matrix
from hpcgnn.exchange.staged import EXCHANGES, StagedExchange
from hpcgnn.exchange.workspace import Workspace
from hpcgnn.kernels.attention import EdgePattern, RowReduce, edge_pattern
from hpcgnn.kernels.spmm import spmm, to_torch_csr
from hpcgnn.planning.spst import DEFAULT_BYTES_PER_VERTEX
from hpcgnn.planning.topology import Topology, uniform_topology

BACKWARD_MODES = ("auto", "push", "pull")


class HaloAggregation:
    """``Â^T H`` forward and ``Â G`` backward by halo exchange on a 1D vertex partition.

    Parameters
    ----------
    comm
        All ranks of the partition; rank ``r`` owns ``[offsets[r], offsets[r+1])``.
    a_t_rows, a_rows
        This rank's rows of ``Â^T`` and ``Â`` (all ``n`` columns, global ids).
    offsets
        Vertex offsets, ``len(offsets) == comm.size + 1``.
    dtype
        Torch dtype.
    backward
        ``"push"``, ``"pull"`` or ``"auto"`` (whichever moves fewer pairs in total; the
        halo sizes are summed over ranks once, category ``"halo_setup"``).
    exchange
        ``"p2p"`` (one all-to-allv) or ``"planned"`` (SPST stages on ``topology``).
    topology
        Topology of a planned exchange (default: all ranks on one node, equal links).
    bytes_per_vertex
        Bytes of the widest rows exchanged, for which the plan is made.
    """

    def __init__(
        self, comm: Comm, a_t_rows: sp.csr_matrix, a_rows: sp.csr_matrix,
        offsets: np.ndarray, dtype: torch.dtype, backward: str = "auto",
        exchange: str = "p2p", topology: Topology | None = None,
        bytes_per_vertex: float = DEFAULT_BYTES_PER_VERTEX,
    ) -> None:
        if backward not in BACKWARD_MODES:
            raise ValueError(f"backward must be one of {BACKWARD_MODES}, not {backward!r}")
        if exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}, not {exchange!r}")
        if exchange == "planned":
            if backward == "pull":
                raise ValueError("the planned exchange runs the backward as push")
            backward = "push"
        self.exchange = exchange
        self.dtype = dtype
        self._work = Workspace()
        self.comm = comm
        lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
        self.owned = hi - lo
        fwd = halo_sets(comm, a_t_rows, offsets)
        bwd = halo_sets(comm, a_rows, offsets)
        self.fwd_sets, self.bwd_sets = fwd, bwd
        if backward == "auto":
            pairs = np.array([len(fwd.halo), len(bwd.halo)], dtype=np.int64)
            comm.allreduce(pairs, HALO_SETUP)
            backward = choose_backward(int(pairs[0]), int(pairs[1]))
        self.mode = backward
        self._fwd_x: HaloExchange | StagedExchange
        if exchange == "planned":
            topo = topology if topology is not None else uniform_topology(comm.size)
            self._fwd_x = StagedExchange(comm, fwd, topo, bytes_per_vertex=bytes_per_vertex)
        else:
            self._fwd_x = HaloExchange(comm, fwd)
        dev = comm.device.torch_device
        a_t_loc = local_matrix(a_t_rows, lo, hi, fwd.halo)
        self._a_t_loc, self._lo = a_t_loc, lo
        self._a_t = to_torch_csr(a_t_loc, dtype, dev)
        self._bwd_x: HaloExchange | StagedExchange
        if backward == "push":
            self._bwd_x = self._fwd_x
            self._a_bwd = to_torch_csr(a_t_loc.T.tocsr(), dtype, dev)
        else:
            self._bwd_x = HaloExchange(comm, bwd)
            self._a_bwd = to_torch_csr(local_matrix(a_rows, lo, hi, bwd.halo), dtype, dev)

    @property
    def fwd_exchange(self) -> HaloExchange | StagedExchange:
        """The exchange of the forward gather (and of a pushed backward)."""
        return self._fwd_x

    def with_halo(
        self, x: torch.Tensor, exchange: HaloExchange | StagedExchange, halo: int,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``[x | its halo rows]``: the owned rows then the ``halo`` rows ``exchange`` gathers.

        The rows are received in place behind the owned ones, into ``rows`` (``owned +
        halo`` rows like ``x``, kept by the caller) or a new tensor; with no halo rows
        ``x`` itself (the exchange still runs: the other ranks may need this one's rows).
        """
        if not halo:
            exchange.gather(x, x.new_empty((0, *x.shape[1:])))
            return x
        if rows is None:
            rows = x.new_empty((self.owned + halo, *x.shape[1:]))
        rows[: self.owned] = x
        exchange.gather(x, rows[self.owned :])
        return rows

    def _product(self, a: torch.Tensor, x: torch.Tensor,
                 exchange: HaloExchange | StagedExchange, halo: int, use: str) -> torch.Tensor:
        """``a [x | halo rows]``, the rows in this aggregation's buffer for ``use``."""
        x = x.contiguous()
        rows = self._work.take(use, x, self.owned + halo) if halo else None
        rows = self.with_halo(x, exchange, halo, rows)
        with self.comm.stats.phase("local_spmm"):
            return spmm(a, rows)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """This rank's rows of ``Â^T H`` given its rows of ``H``."""
        return self._product(self._a_t, h, self._fwd_x, len(self.fwd_sets.halo), "forward")

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        """This rank's rows of ``Â G`` given its rows of ``G``."""
        if self.mode == "pull":
            return self._product(self._a_bwd, g, self._bwd_x, len(self.bwd_sets.halo), "pull")
        with self.comm.stats.phase("local_spmm"):
            full = spmm(self._a_bwd, g)
        # the halo rows' sums go to their owners; theirs are added to the owned rows in place
        return self._bwd_x.scatter_add(full[self.owned :], full[: self.owned])

    def neighbourhood(self) -> HaloNeighbourhood:
        """GAT's source rows on this partition: the owned rows and the forward halo."""
        if self.mode != "push":
            raise ValueError("GAT's gather has one adjoint, the push backward")
        return HaloNeighbourhood(self)


class HaloNeighbourhood:
    """GAT's source rows on a partition: ``[owned | halo]`` of ``[z | s_src]``; push back.

    The rank's edges are its rows of ``A^T + I`` compressed to the columns ``[owned |
    halo]`` of the forward exchange (:class:`hpcgnn.nn.gat.Neighbourhood`); the halo rows
    come by the forward exchange (p2p or planned) and their gradients go back by its
    push, scatter-added at their owners, so each layer moves ``|halo| (K f' + K)`` words
    each way.
    """

    def __init__(self, agg: HaloAggregation) -> None:
        self.agg = agg
        self.split: RowReduce | None = None
        halo = agg.fwd_sets.halo
        owned = np.arange(agg._lo, agg._lo + agg.owned)
        self.pattern: EdgePattern = edge_pattern(
            agg._a_t_loc, owned, np.concatenate([owned, np.asarray(halo, dtype=np.int64)]),
            agg.comm.device.torch_device, agg.dtype,
        )

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's rows of ``x`` followed by its halo rows.

        A new tensor (autograd keeps it, so it is not the aggregation's kept buffer); ``x``
        itself where this rank has no halo rows.
        """
        agg = self.agg
        return agg.with_halo(x, agg.fwd_exchange, len(agg.fwd_sets.halo))

    def scatter(self, g: torch.Tensor) -> torch.Tensor:
        """The owned rows of ``g`` plus the halo rows' gradients pushed back by their users."""
        owned = self.agg.owned
        return self.agg.fwd_exchange.scatter_add(g[owned:].contiguous(), g[:owned].clone())
