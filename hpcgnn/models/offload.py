"""HongTu full-batch GCN: parts x chunks, host-resident vertex data, deduplicated loads.

Rank ``i`` owns part ``i`` (the file's partition of ``P`` parts, or of a multiple of ``P``
coarsened; an even split of a file without a partition; any other partition is refused)
and cuts it into ``--chunks`` range-based chunks balanced by nonzeros. Every layer
is a sweep over batches (the chunks the schedule puts together, one per rank): load the
neighbour rows of the chunk (:class:`hpcgnn.exchange.offload.OffloadExchange`), aggregate
``A = Â^T D``, cache ``A`` on the host (HongTu's recomputation-caching hybrid: the
aggregate is the checkpoint, so the backward recomputes only the update), update
``Z = A W`` and write the chunk's output rows to the host. A layer whose aggregates do not
fit the cache budget (``--device-memory``; :func:`hpcgnn.planning.dedup.cached_layers`)
caches nothing and recomputes ``A`` in the backward from its input's neighbour rows,
reloaded through the same deduplicated path. The backward sweeps the layers
in reverse: reload (or recompute) the aggregate and the output gradient, recompute ``Z``, form the
weight gradient and the neighbour gradients ``(Â^T)^T (dZ W^T)``, and add those into the
owners' host gradient buffers through the same deduplicated path. Host buffers hold every
layer's input, aggregate and gradient; device buffers hold one batch.

With ``exchange="planned"`` (``--exchange planned``, dedup ``inter`` or ``full``) the
device-to-device fetches of the deduplicated rows and the pushes of their gradients run
along one DGCL SPST plan per table on a topology, made once at set-up for rows of the widest
layer input (:meth:`hpcgnn.exchange.offload.RowTable.plan`): staged and deduplicated in one
exchange.

GraphSAGE (``--model sage``, a kind with a self weight): the operator is the mean, and a
chunk's own rows join its neighbour rows, so the self term ``H W_self`` reads them from the
same deduplicated load (and its gradient goes back with the neighbours'); a cached layer
keeps the own rows beside the aggregate. GIN (``--model gin``, an MLP kind): the operator
is the sum ``A^T + (1 + eps) I`` and the update ``ReLU(A W_1) W_2`` runs on the chunk's
rows, recomputed from the cached aggregate in the backward like GCN's ``A W``. GAT
(``--model gat``) is :class:`~hpcgnn.models.offload_gat.OffloadGAT`: this schedule and
exchange with the edge computation inside the chunk sweep.

The result equals the serial reference up to float rounding: the layer order is
CAGNET's ``(Â^T H) W`` everywhere (sparse input features: the first layer's is
``Â^T (X W)``, :mod:`hpcgnn.models.offload_input`), and dropout masks are keyed by global
row ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.comm.collective import collective
from hpcgnn.config import TrainConfig
from hpcgnn.cost.estimate import Estimate
from hpcgnn.cost.offload import load_widths, predict_offload
from hpcgnn.errors import ConfigError
from hpcgnn.exchange.offload import (
    DEDUP_LEVELS,
    SETUP,
    OffloadExchange,
    build_tables,
    rows_to_device,
    rows_to_host,
)
from hpcgnn.exchange.reorganize import reorganize_distributed
from hpcgnn.exchange.staged import EXCHANGES
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.kernels.spmm import spmm, to_torch_csr
from hpcgnn.models.base import RowBlockModel
from hpcgnn.models.exchange_report import offload_report
from hpcgnn.models.offload_input import SparseInput
from hpcgnn.models.share import RowShare
from hpcgnn.nn.gcn import BlockMasks, activate, block_dropout, dropout
from hpcgnn.planning.dedup import (
    DedupVolumes,
    cached_layers,
    chunk_bounds,
    column_set,
    identity_schedule,
    sliding,
)
from hpcgnn.planning.reorganization import Reorganization
from hpcgnn.planning.topology import Topology, uniform_topology


@dataclass(frozen=True)
class OffloadOptions:
    """``--chunks``, ``--dedup``, ``--reorganize``, ``--device-memory``, ``--exchange``, tiers.

    ``tier_gbps``: ``--tier-gbps``, the tiers' bandwidths the reorganisation weighs
    ``C`` with (default: :data:`~hpcgnn.planning.dedup.DEFAULT_TIER_GBPS`).

    Raises
    ------
    ConfigError
        For options that contradict each other (before anything is read).
    """

    chunks: int = 4
    dedup: str = "full"
    reorganize: bool = False
    cache_budget: float | None = None
    exchange: str = "p2p"
    tier_gbps: dict[str, float] | None = None

    def __post_init__(self) -> None:
        if self.chunks < 1:
            raise ConfigError(f"--chunks must be >= 1, got {self.chunks}")
        if self.dedup not in DEDUP_LEVELS:
            raise ConfigError(f"--dedup must be one of {', '.join(DEDUP_LEVELS)}")
        if self.exchange not in EXCHANGES:
            raise ConfigError(f"--exchange must be one of {', '.join(EXCHANGES)}")
        if self.exchange == "planned" and self.dedup == "none":
            raise ConfigError(
                "--exchange planned plans the device-to-device fetches of --dedup inter or"
                " full; --dedup none loads every row from the host"
            )


class _Epoch(torch.autograd.Function):
    """The offloaded forward of one epoch; its backward is the offloaded backward."""

    @staticmethod
    def forward(ctx, model: OffloadGCN, epoch: int, *weights: torch.Tensor) -> torch.Tensor:
        ctx.model = model
        return model.forward_pass(epoch)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple:
        return (None, None, *ctx.model.backward_pass(grad.contiguous()))


class OffloadGCN(RowBlockModel):
    """GCN trained HongTu-style (``--mode offload``) on a ``1d`` grid.

    Parameters
    ----------
    share
        Rank ``i``'s rows of ``Â^T``, features, labels and masks, in host memory
        (:meth:`read`).
    grid
        A ``1d`` process grid.
    cfg
        Training configuration.
    opts
        Chunks per part, deduplication level, reorganisation, exchange.
    weights
        ``W^1 .. W^L`` to train (default: Glorot from ``cfg.seed``; GraphSAGE: per layer
        ``W_self, W_neigh``).
    topology
        Topology of a planned exchange (default: one node, equal links).
    """

    follows_partition = True
    x: torch.Tensor | SparseFeatures  # the host tier's rows: dense, or CSR
    host_resident = True
    needs_a = False

    def __init__(
        self, share: RowShare, grid: ProcessGrid, cfg: TrainConfig, opts: OffloadOptions,
        weights: list[torch.Tensor] | None = None, topology: Topology | None = None,
    ) -> None:
        if grid.kind != "1d":
            raise ValueError(f"offload training needs a 1d grid, not {grid.kind!r}")
        self.opts = opts
        self.topology: Topology | None = None
        if opts.exchange == "planned":
            self.topology = topology if topology is not None else uniform_topology(grid.size)
        super().__init__(share, grid, cfg, weights)
        a_t = share.a_t
        # the features join the host tier: page-locked, as the layers' host buffers; or
        # CSR, multiplied chunk by chunk on the device before the first sweep
        self.input: SparseInput | None = None
        self._self_rows: torch.Tensor | None = None  # sparse GraphSAGE: X W_self (host)
        if not isinstance(share.x, SparseFeatures):
            self.x = self.comm.device.pinned(share.x)
        self._setup(a_t)

    # -- set-up ------------------------------------------------------------------------
    def _setup(self, a_t: sp.csr_matrix) -> None:
        comm, opts = self.comm, self.opts
        bounds = chunk_bounds(np.diff(a_t.indptr), opts.chunks)
        first = self.rows[0]
        self_term = self.cfg.kind.self_weight
        sets = [
            column_set(a_t.indptr, a_t.indices, int(a), int(b))
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        if self_term:  # the self term's rows are loaded with the neighbours'
            sets = [
                np.union1d(s, np.arange(first + a, first + b, dtype=np.int64))
                for s, a, b in zip(sets, bounds[:-1], bounds[1:], strict=True)
            ]
        self.chunk_sets = sets
        self.schedule, self.reorganization = self._schedule(sets)
        order = self.schedule[comm.rank]
        self.chunk_rows = [(int(bounds[c]), int(bounds[c + 1])) for c in order]
        neigh = [sets[c] for c in order]
        grid, offsets = self.grid, self.offsets
        assert grid is not None and offsets is not None
        with collective(grid.world):
            tables = build_tables(
                comm, neigh, offsets, opts.dedup, self.topology,
                self.exchange_width * self.cfg.itemsize,
            )
        self.exchange = OffloadExchange(comm, tables, offsets, opts.dedup)
        self.cached = self._cache_plan(int(np.diff(offsets).max()))
        if isinstance(self.x, SparseFeatures):
            self.input = SparseInput(self.x, self.chunk_rows, comm)
        # the backward's reloads of recomputed layers keep their own reuse buffers
        self.reload = (
            None if all(self.cached)
            else OffloadExchange(comm, tables, offsets, opts.dedup)
        )
        self._blocks: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._own: list[torch.Tensor | None] = []  # positions of a chunk's rows in its load
        for (a, b), cols in zip(self.chunk_rows, neigh, strict=True):
            blk = a_t[a:b]
            local = sp.csr_matrix(
                (blk.data, np.searchsorted(cols, blk.indices), blk.indptr),
                shape=(b - a, len(cols)),
            )
            self._add_chunk(local, np.arange(first + a, first + b, dtype=np.int64), cols)
        self.volumes = self._count_volumes(tables)
        self.transfers = self._count_transfers(tables)

    def _add_chunk(self, local: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> None:
        """A chunk's operators on the device: its block of ``Â^T`` and the transpose.

        ``local``: the block, rows ``rows`` (global ids), columns the chunk's load ``cols``;
        a self term also gets its own rows' positions in the load.
        """
        dev, dtype = self.comm.device.torch_device, self.cfg.torch_dtype
        own = np.searchsorted(cols, rows) if self.cfg.kind.self_weight else None
        self._own.append(None if own is None else self.comm.device.from_numpy(own))
        self._blocks.append(
            (to_torch_csr(local, dtype, dev), to_torch_csr(local.T.tocsr(), dtype, dev))
        )

    def _cache_plan(self, largest: int) -> Sequence[bool]:
        """Per layer, whether it caches its aggregate (within ``--device-memory``).

        ``largest``: the rows of the largest part.
        """
        per = self.cfg.kind.operands  # a cached layer keeps the aggregate (and own rows)
        return cached_layers(
            largest, [per * f for f in self.load_widths], self.cfg.itemsize,
            self.opts.cache_budget,
        )

    def _schedule(self, sets: list[np.ndarray]) -> tuple[np.ndarray, Reorganization | None]:
        """Identity schedule, or HongTu's reorganisation sharded by part (collective).

        :func:`~hpcgnn.exchange.reorganize.reorganize_distributed`: rank ``r`` keeps the
        chunk membership of the vertices of part ``r`` only; traffic in ``offload_setup``.
        The reorganised schedule is kept when it does not raise ``C`` at the run's dedup
        level and tier bandwidths.
        """
        if not self.opts.reorganize:
            return identity_schedule(self.comm.size, self.opts.chunks), None
        assert self.offsets is not None
        return reorganize_distributed(self.comm, sets, self.offsets,
                                      gbps=self.opts.tier_gbps, dedup=self.opts.dedup)

    def _count_volumes(self, tables: list) -> DedupVolumes:
        """``V_ori``, ``V_p2p``, ``V_ru`` and the remote rows, summed over ranks (collective).

        Sets :attr:`remote`: rows crossing between ranks' device buffers per layer,
        ``(forward, backward)`` (zero for ``--dedup none``).
        """
        me = self.comm.rank
        mine = np.zeros(5, dtype=np.int64)
        prev = np.zeros(0, dtype=np.int64)
        for t in tables:
            mine[0] += len(t.neigh)
            mine[1] += len(t.trans)
            mine[2] += len(sliding(prev, t.trans).new)
            prev = t.trans
            if self.opts.dedup != "none":
                mine[3] += int(t.fetch.recv_counts.sum() - t.fetch.recv_counts[me])
                mine[4] += int(t.push.recv_counts.sum() - t.push.recv_counts[me])
        self.comm.allreduce(mine, SETUP)
        self.remote = (int(mine[3]), int(mine[4]))
        return DedupVolumes(int(mine[0]), int(mine[1]), int(mine[2]))

    @property
    def load_widths(self) -> list[int]:
        """Width of the rows each layer loads (:func:`~hpcgnn.cost.offload.load_widths`)."""
        return load_widths(self.widths, isinstance(self.x, SparseFeatures))

    @property
    def exchange_width(self) -> int:
        """Width of the widest rows fetched between ranks (the plans are made for them)."""
        return max(self.load_widths)

    def _count_transfers(self, tables: list) -> tuple[int, int]:
        """Rows sent between ranks' device buffers per layer, forward and backward.

        :attr:`remote` for the p2p exchange; every transfer of the plans (forwarding
        included) for the planned one. The plans are the same on every rank.
        """
        if self.topology is None:
            return self.remote
        plans = [(t.fetch.staged, t.push.staged) for t in tables]
        fwd = sum(sum(f.counts.values()) for f, _ in plans if f is not None)
        bwd = sum(sum(b.counts.values()) for _, b in plans if b is not None)
        return int(fwd), int(bwd)

    # -- training interface --------------------------------------------------------------
    def logits(self, epoch: int | None) -> torch.Tensor:
        """This rank's rows of the logits (``epoch=None``: evaluation, no dropout)."""
        if epoch is None:
            return self.forward_pass(None)
        return _Epoch.apply(self, epoch, *self.weights)

    def predict_cost(self) -> Estimate | None:
        """Bytes of one offload epoch per tier (:func:`~hpcgnn.cost.offload.predict_offload`)."""
        sparse = None
        if self.input is not None:
            counts = self.comm.allreduce(np.array([self.input.nnz, self.input.chunks]), SETUP)
            sparse = (int(counts[0]), int(counts[1]))
        return predict_offload(
            self.problem(), self.comm.size, self.volumes, self.transfers, self.opts.dedup,
            self.cached, sparse,
        )

    def exchange_report(
        self, measured: dict[str, float], predicted: dict[str, float],
        tier_gbps: dict[str, float] | None,
    ) -> dict[str, Any] | None:
        """HongTu volumes, bytes per tier and the modelled cost ``C`` (collective)."""
        return offload_report(self, measured, predicted, tier_gbps)

    # -- passes ------------------------------------------------------------------------
    def forward_pass(self, epoch: int | None) -> torch.Tensor:
        """Offloaded forward; with an epoch it applies dropout and keeps the checkpoints."""
        train = epoch is not None
        p = self.cfg.dropout
        drop = train and p > 0.0
        stats = self.comm.stats
        n_own = self.rows[1] - self.rows[0]
        self._masks: list[torch.Tensor | None] = []
        self._aggregates: dict[int, torch.Tensor] = {}  # cached layers
        self._inputs: dict[int, torch.Tensor] = {}  # recomputed layers (host rows)
        host = self.comm.device  # the host tier: page-locked on the cuda device
        keep = None
        if drop:
            assert epoch is not None
            keep = block_dropout(
                self.cfg.seed, p, epoch, self.rows, self.widths, device=self.comm.device
            )
        h = self._first_input(keep)
        last = len(self.weights) // self.cfg.kind.weights_per_layer - 1
        for layer in range(last + 1):
            ws = self._layer_weights(layer)
            w = ws[-1]
            f_in = self.load_widths[layer]
            out = host.pinned_empty((n_own, w.shape[1]), h.dtype)
            agg_host = None
            if train and self.cached[layer]:
                agg_host = host.pinned_empty((n_own, self.cfg.kind.operands * f_in), h.dtype)
            elif train:
                self._inputs[layer] = h
            mask = keep(layer + 1) if keep is not None and layer < last else None
            for j, (a, b) in enumerate(self.chunk_rows):
                neigh = self.exchange.load(h, j)
                with stats.phase("local_spmm"):
                    agg = spmm(self._blocks[j][0], neigh)
                own = self._own_rows(neigh, j, layer)
                if agg_host is not None:
                    kept = agg if own is None else torch.cat([agg, own], 1)
                    rows_to_host(self.comm, agg_host, a, b, kept)
                with stats.phase("gemm"):
                    z = self._update(agg, own, ws, layer)
                z = activate(z, layer == last)
                if mask is not None:
                    z = dropout(z, mask[a:b], p)
                rows_to_host(self.comm, out, a, b, z)
            self.exchange.end_pass()
            if agg_host is not None:
                self._aggregates[layer] = agg_host
            if layer < last:
                self._masks.append(mask)
            h = out
        return h

    def _first_input(self, keep: BlockMasks | None) -> torch.Tensor:
        """The host rows the first layer loads: ``X`` after dropout, or ``X W`` (sparse).

        Sparse features (:class:`~hpcgnn.models.offload_input.SparseInput`): ``T = X W``
        (GraphSAGE ``X W_neigh``; the self term ``S = X W_self`` kept in :attr:`_self_rows`).
        """
        p = self.cfg.dropout
        if self.input is None:
            assert isinstance(self.x, torch.Tensor)
            mask = keep(0) if keep is not None else None
            self._masks.append(mask)
            return self.x if mask is None else dropout(
                self.x, self.comm.device.host_tensor(mask), p
            )
        self._masks.append(None)
        ws = self._layer_weights(0)[: self.cfg.kind.operands]  # the weights X multiplies
        n_own, dev = self.rows[1] - self.rows[0], self.comm.device
        bufs = [dev.pinned_empty((n_own, w.shape[1]), ws[0].dtype) for w in ws]
        self.input.transform(ws, keep, p, bufs)
        self._self_rows = bufs[0] if len(bufs) > 1 else None
        return bufs[-1]

    def _layer_weights(self, layer: int) -> list[torch.Tensor]:
        """The layer's weights, detached: ``[W]``, ``[W_self, W_neigh]`` or ``[W_1, W_2]``."""
        per = self.cfg.kind.weights_per_layer
        return [w.detach() for w in self.weights[per * layer : per * (layer + 1)]]

    @property
    def _aggregated(self) -> int:
        """Index in a layer's weights of the one that multiplies the aggregate."""
        return 0 if self.cfg.kind.mlp else self.cfg.kind.weights_per_layer - 1

    def _own_rows(self, neigh: torch.Tensor, j: int, layer: int) -> torch.Tensor | None:
        """The self term's input rows of chunk ``j``, if any.

        The chunk's own rows among its loaded rows; the first layer on sparse features
        reads its ``S = X W_self`` rows from the host instead.
        """
        own = self._own[j]
        if own is None:
            return None
        if layer == 0 and self.input is not None:
            a, b = self.chunk_rows[j]
            assert self._self_rows is not None
            return rows_to_device(self.comm, self._self_rows, a, b)
        return neigh[own]

    def _update(
        self, agg: torch.Tensor, own: torch.Tensor | None, ws: list[torch.Tensor], layer: int
    ) -> torch.Tensor:
        """``Z = A W``; GraphSAGE ``A W_neigh + H W_self``; GIN ``ReLU(A W_1) W_2``.

        In the serial layer's order. The first layer on sparse features has its products
        already: ``A (+ S)``.
        """
        z = self._product(agg, own, ws, layer)
        return torch.relu(z) @ ws[1] if self.cfg.kind.mlp else z

    def _product(
        self, agg: torch.Tensor, own: torch.Tensor | None, ws: list[torch.Tensor], layer: int
    ) -> torch.Tensor:
        """``A W`` (GraphSAGE: ``+ H W_self``): the update before an MLP's second layer."""
        if layer == 0 and self.input is not None:
            return agg if own is None else agg + own
        z = agg @ ws[self._aggregated]
        return z if own is None else z + own @ ws[0]

    def backward_pass(self, grad_logits: torch.Tensor) -> list[torch.Tensor]:
        """Offloaded backward from the logits' gradient; returns the weight gradients.

        The first layer on sparse features pushes ``dT = Â dZ`` like a hidden layer's input
        gradient; its weight gradients are ``X^T dT`` (and ``X^T dZ``) after its sweep
        (:meth:`~hpcgnn.models.offload_input.SparseInput.weight_grads`).
        """
        stats = self.comm.stats
        n_own = self.rows[1] - self.rows[0]
        grads = [torch.zeros_like(w) for w in self.weights]
        g_out = grad_logits
        per = self.cfg.kind.weights_per_layer
        last = len(self.weights) // per - 1
        host = self.comm.device
        operands, mlp = self.cfg.kind.operands, self.cfg.kind.mlp
        for layer in range(last, -1, -1):
            ws = self._layer_weights(layer)
            w = ws[self._aggregated]
            f = self.load_widths[layer]
            products = layer == 0 and self.input is not None  # Z = Â^T T (+ S)
            g_in = None
            if layer > 0 or products:
                g_in = host.pinned_empty((n_own, f), w.dtype).zero_()
            g_z = host.pinned_empty((n_own, f), w.dtype) if products and operands > 1 else None
            mask = self._masks[layer + 1] if layer < last else None
            for j, (a, b) in enumerate(self.chunk_rows):
                g = rows_to_device(self.comm, g_out, a, b)
                own: torch.Tensor | None
                if self.cached[layer]:
                    kept = rows_to_device(self.comm, self._aggregates[layer], a, b)
                    agg, own = (kept, None) if operands == 1 else (kept[:, :f], kept[:, f:])
                else:  # recompute A = Â^T D from the reloaded neighbour rows
                    assert self.reload is not None
                    neigh = self.reload.load(self._inputs[layer], j)
                    with stats.phase("local_spmm"):
                        agg = spmm(self._blocks[j][0], neigh)
                    own = self._own_rows(neigh, j, layer)
                with stats.phase("gemm"):
                    if layer < last:  # recompute Z for the ReLU mask
                        if mask is not None:
                            g = dropout(g, mask[a:b], self.cfg.dropout)
                        g = g * (self._update(agg, own, ws, layer) > 0).to(g.dtype)
                    if mlp:  # through W_2 and the inner ReLU: dZ becomes d(A W_1)
                        inner = self._product(agg, own, ws, layer)
                        grads[per * layer + 1] += torch.relu(inner).T @ g
                        g = (g @ ws[1].T) * (inner > 0).to(g.dtype)
                    if not products:
                        grads[per * layer + self._aggregated] += agg.T @ g
                        if own is not None:
                            grads[per * layer] += own.T @ g
                if g_z is not None:  # dW_self = X^T dZ after the sweep
                    rows_to_host(self.comm, g_z, a, b, g)
                if g_in is None:
                    continue
                with stats.phase("gemm"):
                    g_agg = g if products else g @ w.T
                with stats.phase("local_spmm"):
                    g_neigh = spmm(self._blocks[j][1], g_agg)
                own_pos = self._own[j]
                if own_pos is not None and not products:  # the self term's gradient goes
                    with stats.phase("gemm"):  # back with its rows
                        g_neigh[own_pos] += g @ ws[0].T
                self.exchange.store(g_neigh, j, g_in)
            self.exchange.end_pass()
            if self.reload is not None:
                self.reload.end_pass()
            if products:
                assert self.input is not None and g_in is not None
                self.input.weight_grads(
                    grads[:operands], [g_z, g_in] if g_z is not None else [g_in]
                )
            elif g_in is not None:
                g_out = g_in
        self._aggregates, self._inputs, self._masks = {}, {}, []
        return grads
