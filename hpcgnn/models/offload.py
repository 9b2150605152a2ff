"""HongTu's full-batch training of any layer: parts x chunks, host-resident vertex data.

Rank ``i`` owns part ``i`` (the file's partition of ``P`` parts, or of a multiple of ``P``
coarsened; an even split of a file without a partition) cut into ``--chunks`` range-based
chunks balanced by nonzeros. Every vertex value (layer inputs, exchange inputs and
outputs, values kept for later layers, their gradients) lives on the host; the device
holds one batch (the chunks the schedule puts together, one per rank). A layer runs as
:mod:`hpcgnn.layout.chunks` plans it: its forward on a chunk's own rows
(:class:`~hpcgnn.nn.chunk.ChunkPrimitives`), one sweep over the chunks per exchange, each
chunk loading its neighbour rows of the exchange's input through the deduplicated path
(:class:`hpcgnn.exchange.offload.OffloadExchange`; GCN: load ``H``'s rows, aggregate,
update, one sweep). An exchange's output is kept on the host where the backward needs it
(HongTu's recomputation-caching hybrid: within ``--device-memory``,
:func:`hpcgnn.planning.dedup.cached_layers`; else the backward reloads the rows through
the same path). The backward re-runs each chunk's forward under autograd, exchange by
exchange in reverse, and pushes the loaded rows' gradients to their owners' host buffers.
``--exchange planned`` runs the fetches and pushes along DGCL SPST plans
(:meth:`hpcgnn.exchange.offload.RowTable.plan`); sparse features multiply first
(:mod:`hpcgnn.models.offload_input`). The result equals the serial reference up to float
rounding: dropout masks are keyed by global row ids, attention dropout by edge ids.
"""


from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.comm.collective import collective
from hpcgnn.config import TrainConfig
from hpcgnn.cost.estimate import Estimate
from hpcgnn.cost.offload import load_widths, predict_offload, recomputed
from hpcgnn.errors import ConfigError
from hpcgnn.exchange.offload import (
    DEDUP_LEVELS,
    SETUP,
    DevicePaths,
    OffloadExchange,
    build_tables,
    planned_transfers,
    rows_to_device,
    rows_to_host,
    table_volumes,
)
from hpcgnn.exchange.reorganize import reorganize_distributed
from hpcgnn.exchange.staged import EXCHANGES
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.kernels.attention import AttentionDrop
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.kinds import split_bias
from hpcgnn.layout.chunks import (
    ChunkLayer,
    chunk_plan,
    kept_at,
    leaf_width,
    leaves,
    stage_leaves,
    stage_outputs,
    stages,
    stored,
    sweep_outputs,
    sweeps,
)
from hpcgnn.models.base import RowBlockModel
from hpcgnn.models.exchange_report import offload_report
from hpcgnn.models.offload_input import SparseInput
from hpcgnn.models.share import RowShare
from hpcgnn.nn.chunk import ChunkOps, ChunkPrimitives, ChunkRun, Products, Stop
from hpcgnn.nn.gcn import BlockMasks, block_dropout, dropout
from hpcgnn.planning.dedup import cached_layers, chunk_bounds, column_set, identity_schedule
from hpcgnn.planning.reorganization import Reorganization
from hpcgnn.planning.topology import Topology, uniform_topology


@dataclass(frozen=True)
class OffloadOptions:
    """``--chunks``, ``--dedup``, ``--reorganize``, ``--device-memory``, ``--exchange``, tiers.

    ``tier_gbps``: ``--tier-gbps``, the tiers' bandwidths the reorganisation weighs
    ``C`` with (default: :data:`~hpcgnn.planning.dedup.DEFAULT_TIER_GBPS`). ``in_place``,
    ``interleave``, ``zero_copy``, ``merged``: how the exchange moves rows on the device
    (:class:`~hpcgnn.exchange.offload.DevicePaths`; the results are the same).

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
    in_place: bool = True
    interleave: bool = False
    zero_copy: bool = False
    merged: bool = False

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
        if self.interleave and (self.exchange == "planned" or self.dedup == "none"):
            raise ConfigError("interleaved rounds carry the device-to-device rows of the p2p "
                              "exchange with --dedup inter or full")
        if self.zero_copy and not self.in_place:
            raise ConfigError("zero-copy loads write into the in-place buffers: in_place too")
        if self.merged and (not self.in_place or self.dedup == "none"):
            raise ConfigError("--merged-buffer merges the in-place transition and neighbour "
                              "buffers of --dedup inter or full (not with --no-in-place)")

    @property
    def paths(self) -> DevicePaths:
        """The exchange's :class:`~hpcgnn.exchange.offload.DevicePaths`."""
        return DevicePaths(self.in_place, self.interleave, self.zero_copy, self.merged)


class _Epoch(torch.autograd.Function):
    """The offloaded forward of one epoch; its backward is the offloaded backward."""

    @staticmethod
    def forward(ctx, model: OffloadModel, epoch: int, *weights: torch.Tensor) -> torch.Tensor:
        ctx.model = model
        return model.forward_pass(epoch)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple:
        return (None, None, *ctx.model.backward_pass(grad.contiguous()))


@dataclass
class _LayerHost:
    """A layer's host buffers in one step: input ``h``, exchange inputs ``x``, outputs ``a``."""

    h: Any
    x: dict[int, torch.Tensor] = field(default_factory=dict)
    a: dict[int, torch.Tensor] = field(default_factory=dict)


class OffloadModel(RowBlockModel):
    """Any layer trained HongTu-style (``--mode offload``) on a ``1d`` grid.

    Parameters
    ----------
    share
        Rank ``i``'s rows of ``Â^T``, features, labels and masks, in host memory
        (:meth:`read`).
    grid
        A ``1d`` process grid.
    cfg
        Training configuration (its ``kind``: the layer).
    opts
        Chunks per part, deduplication level, reorganisation, exchange.
    weights
        The weights to train (default: Glorot from ``cfg.seed``).
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
        self.input: SparseInput | None = None
        sparse = isinstance(share.x, SparseFeatures)
        if not isinstance(share.x, SparseFeatures):  # the host tier, page-locked
            self.x = self.comm.device.pinned(share.x)
        try:
            self.plans: list[ChunkLayer] = chunk_plan(self.widths, cfg.kind, sparse)
        except ValueError as err:
            raise ConfigError(f"--model {cfg.kind} in --mode offload: {err}") from None
        self.slices = cfg.kind.weight_slices(len(self.plans), cfg.bias)  # biases last
        self._setup(share.a_t)

    def _setup(self, a_t: sp.csr_matrix) -> None:
        comm, opts = self.comm, self.opts
        bounds = chunk_bounds(np.diff(a_t.indptr), opts.chunks)
        first = self.rows[0]
        attends = any(e.primitive == "attention" for p in self.plans for e in p.exchanges)
        sets = [
            column_set(a_t.indptr, a_t.indices, int(a), int(b))
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        if attends:  # the destination terms are read from the chunk's own loaded rows
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
                self.exchange_width * self.cfg.itemsize, opts.paths,
            )
        # the backward's reloads keep their own reuse buffers beside the pushes'
        self.exchange, self.reload = (
            OffloadExchange(comm, tables, offsets, opts.dedup, opts.paths, self.exchange_width)
            for _ in range(2)
        )
        one = [p.exchanges[0].width if stored(p, True) == [True] else 0 for p in self.plans]
        self.cached = [c and f > 0 for c, f in zip(cached_layers(
            int(np.diff(offsets).max()), one, self.cfg.itemsize, opts.cache_budget), one,
            strict=True)]
        if isinstance(self.x, SparseFeatures):
            self.input = SparseInput(self.x, self.chunk_rows, comm)
        # the merged buffer (exchange.merged): the operators read the loaded rows there
        self._ops = [ChunkOps.of(a_t, rows, first, cols, attends, comm.device,
                                 self.cfg.torch_dtype,
                                 t.merged if self.exchange.merged else None, t.merged_rows)
                     for rows, cols, t in zip(self.chunk_rows, neigh, tables, strict=True)]
        self.volumes, self.remote = table_volumes(comm, tables, opts.dedup)
        self.transfers = self.remote if self.topology is None else planned_transfers(tables)

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

    @property
    def load_widths(self) -> list[int]:
        """Width of each load of an epoch (:func:`~hpcgnn.cost.offload.load_widths`)."""
        return load_widths(self.plans, self.cached)

    @property
    def exchange_width(self) -> int:
        """Width of the widest rows fetched between ranks (the plans are made for them)."""
        return max((e.width for p in self.plans for e in p.exchanges), default=1)

    def logits(self, epoch: int | None) -> torch.Tensor:
        """This rank's rows of the logits (``epoch=None``: evaluation, no dropout)."""
        if epoch is None:
            with torch.no_grad():
                return self.forward_pass(None)
        return _Epoch.apply(self, epoch, *self.weights)

    def predict_cost(self) -> Estimate | None:
        """Bytes of one offload epoch per tier (:func:`~hpcgnn.cost.offload.predict_offload`)."""
        sparse = None
        if self.input is not None:
            counts = self.comm.allreduce(np.array([self.input.nnz, self.input.chunks]), SETUP)
            sparse = (int(counts[0]), int(counts[1]))
        return predict_offload(self.problem(), self.comm.size, self.volumes, self.transfers,
                               self.opts.dedup, self.cached, sparse)

    def exchange_report(
        self, measured: dict[str, float], predicted: dict[str, float],
        tier_gbps: dict[str, float] | None,
    ) -> dict[str, Any] | None:
        """HongTu volumes, bytes per tier and the modelled cost ``C`` (collective)."""
        return offload_report(self, measured, predicted, tier_gbps)

    def _pinned(self, cols: int, zero: bool = False) -> torch.Tensor:
        t = self.comm.device.pinned_empty((self.rows[1] - self.rows[0], cols),
                                          self.cfg.torch_dtype)
        return t.zero_() if zero else t

    def _buffer(self, bufs: dict[Any, torch.Tensor], key: Any, cols: int) -> torch.Tensor:
        return bufs[key] if key in bufs else bufs.setdefault(key, self._pinned(cols))

    def _run(self, layer: int, j: int, host: _LayerHost, ws: list[torch.Tensor],
             stop: int | None, live: int | None, outputs: list[str], grad: bool
             ) -> tuple[ChunkPrimitives, Any, Any]:
        """Layer ``layer``'s forward on chunk ``j``: its primitives, output (or ``None``), input.

        Reads the own rows of the leaves ``outputs`` depend on (:func:`leaves`); any
        other leaf is zeros (what depends on it is unused).
        """
        plan, (a, b) = self.plans[layer], self.chunk_rows[j]
        loader = self.reload if grad else self.exchange
        needed = set(leaves(plan, outputs, live, isinstance(host.h, Products)))

        def source(i: int) -> torch.Tensor:
            if i or plan.raw is None:
                return host.x[i]
            return host.h if plan.raw == "h" else self._products[int(plan.raw[1:])]

        def own(name: str) -> torch.Tensor:
            if name not in needed:
                return self.comm.device.zeros((b - a, leaf_width(plan, name)),
                                              self.cfg.torch_dtype)
            if name[0] in "ap":
                buf = (host.a if name[0] == "a" else self._products)[int(name[1:])]
            else:
                buf = host.h if name == "h" else self._state[name[2:]]
            return rows_to_device(self.comm, buf, a, b)

        run = ChunkRun(stop, live, lambda i: loader.load(source(i), j),
                       lambda i: own(f"a{i}"), own, grad)
        h = host.h if isinstance(host.h, Products) else own("h")
        if grad and not isinstance(h, Products):
            h.requires_grad_()
        last = layer == len(self.plans) - 1
        weights, bias = split_bias(ws, self.cfg.bias)
        g = ChunkPrimitives(run, self._ops[j], layer, last, weights, self.stats, self._drop, bias)
        try:
            out = self.cfg.kind.forward(g, h, weights)
        except Stop:
            return g, None, h
        mask = self._masks[layer]
        return g, out if mask is None else dropout(out, mask[a:b], self.cfg.dropout), h

    def _layer_weights(self, layer: int) -> list[torch.Tensor]:
        return [w.detach() for w in self.weights[self.slices[layer]]]

    def forward_pass(self, epoch: int | None) -> torch.Tensor:
        """Offloaded forward; with an epoch it applies dropout and keeps the host buffers."""
        train, cfg = epoch is not None, self.cfg
        keep: BlockMasks | None = None
        self._drop: AttentionDrop | None = None
        if train and cfg.dropout > 0.0:
            assert epoch is not None
            keep = block_dropout(cfg.seed, cfg.dropout, epoch, self.rows, self.widths,
                                 device=self.comm.device)
        if train and cfg.attention_p > 0.0:
            assert epoch is not None
            self._drop = AttentionDrop(cfg.attention_p, cfg.seed, epoch)
        last = len(self.plans) - 1
        self._masks = [keep(layer + 1) if keep is not None and layer < last else None
                       for layer in range(last + 1)]
        self._state: dict[str, torch.Tensor] = {}
        self._hosts: list[_LayerHost] = []
        h = self._first_input(keep)
        for layer, plan in enumerate(self.plans):
            ws, host = self._layer_weights(layer), _LayerHost(h)
            k_all, kept = len(plan.exchanges), stored(plan, self.cached[layer])
            out = self._pinned(plan.f_out)
            for s in sweeps(plan):
                for j, (a, b) in enumerate(self.chunk_rows):
                    g, z, _ = self._run(layer, j, host, ws, s if s < k_all else None,
                                        s - 1 if s else None, sweep_outputs(plan, s), False)
                    if s < k_all:
                        buf = self._buffer(host.x, s, plan.exchanges[s].width)
                        rows_to_host(self.comm, buf, a, b, g.xs[s])
                    if s and kept[s - 1] and (train or k_all > 1):
                        buf = self._buffer(host.a, s - 1, plan.exchanges[s - 1].out)
                        rows_to_host(self.comm, buf, a, b, g.outs[s - 1])
                    for key in kept_at(plan, s):
                        buf = self._buffer(self._state, key, plan.sets[key][0])
                        rows_to_host(self.comm, buf, a, b, g.sets[key])
                    if s == k_all:
                        rows_to_host(self.comm, out, a, b, z)
                if s:
                    self.exchange.end_pass()
            self._hosts.append(host)
            h = out
        if not train:
            self._hosts, self._state = [], {}
        return h

    def _first_input(self, keep: BlockMasks | None) -> Any:
        """The host rows of the first layer: ``X`` after dropout, or the products ``X W``."""
        p = self.cfg.dropout
        if self.input is None:
            assert isinstance(self.x, torch.Tensor)
            return self.x if keep is None else dropout(
                self.x, self.comm.device.host_tensor(keep(0)), p)
        ws = self._layer_weights(0)
        products = self.plans[0].products
        self._products = {c: self._pinned(f) for c, f in products.items()}
        self.input.transform([ws[c] for c in products], keep, p, list(self._products.values()))
        return Products()

    def backward_pass(self, grad_logits: torch.Tensor) -> list[torch.Tensor]:
        """Offloaded backward from the logits' gradient; returns the weight gradients.

        Per layer its stages (:func:`~hpcgnn.layout.chunks.stages`) over the chunks; the
        host gradient buffers by name: ``out`` (the layer output's), ``h`` (its input's),
        ``x<i>`` (exchange inputs'), ``s:<key>`` (kept values'), ``p<c>`` (products').
        """
        grads = [torch.zeros_like(w) for w in self.weights]
        bufs: dict[str, Any] = {f"p{c}": self._pinned(f, True)
                                for c, f in self.plans[0].products.items()}
        bufs |= {f"s:{k}": self._pinned(t.shape[1], True) for k, t in self._state.items()}
        bufs["h"] = grad_logits
        for layer in range(len(self.plans) - 1, -1, -1):
            plan = self.plans[layer]
            bufs["out"], bufs["h"] = bufs["h"], self._pinned(plan.f_in, True) if layer else None
            for i, e in enumerate(plan.exchanges):
                bufs[f"x{i}"] = bufs[plan.raw] if i == 0 and plan.raw else self._pinned(
                    e.width, True)
            for stage in stages(plan):
                for j in range(len(self.chunk_rows)):
                    self._stage(layer, j, stage, grads, bufs)
                self.exchange.end_pass()
                self.reload.end_pass()
        if self.input is not None:
            products = self.plans[0].products
            self.input.weight_grads([grads[c] for c in products],
                                    [bufs[f"p{c}"] for c in products])
        self._hosts, self._state, self._masks = [], {}, []
        return grads

    def _stage(self, layer: int, j: int, stage: int | None, grads: list[torch.Tensor],
               bufs: dict[str, Any]) -> None:
        """Backward stage ``stage`` of a layer on chunk ``j`` (:func:`stage_outputs`).

        Stage ``k``: the gradient of exchange ``k``'s loaded rows (from the reloaded rows,
        or a kept aggregate's adjoint) pushed to their owners; stages ``0`` and ``None``:
        the weights' gradients and the leaves' (added to their host buffers).
        """
        plan, host, (a, b) = self.plans[layer], self._hosts[layer], self.chunk_rows[j]
        k = stage if plan.exchanges else None
        live = recomputed(plan, stage, self.cached[layer])
        ws = [w.requires_grad_() for w in self._layer_weights(layer)]
        with torch.enable_grad():
            tags = stage_outputs(plan, stage)
            g, out, h = self._run(layer, j, host, ws, 0 if stage is None else None, live, tags,
                                  True)
            values = [out if t == "out" else g.xs[int(t[1:])] if t[0] == "x" else g.sets[t[2:]]
                      for t in tags]
            douts = [rows_to_device(self.comm, bufs[t], a, b) for t in tags]
            pairs = [(v, d) for v, d in zip(values, douts, strict=True) if v.requires_grad]
            loaded = [] if k is None else [g.outs[k] if g.neigh is None else g.neigh]
            weights = list(g.exchange_leaves)
            weights += list(enumerate(ws)) if stage in (0, None) else []
            leaves = [(t, h if t == "h" else g.leaves[t])
                      for t in stage_leaves(plan, stage, layer)]
            wrt: list[torch.Tensor] = [*loaded, *(w for _, w in weights), *(t for _, t in leaves)]
            got = (torch.autograd.grad([v for v, _ in pairs], wrt, [d for _, d in pairs],
                                       allow_unused=True) if pairs else [None] * len(wrt))
        res = [torch.zeros_like(t) if r is None else r for r, t in zip(got, wrt, strict=True)]
        if k is not None:
            d = res.pop(0)
            if live is None:  # a kept aggregate: its adjoint gives the loaded rows' gradient
                d = self._ops[j].block.backward(d)
            if bufs[f"x{k}"] is not None:
                self.exchange.store(d, j, bufs[f"x{k}"])
        start = self.slices[layer].start
        for (index, _), dw in zip(weights, res, strict=False):
            grads[start + index] += dw
        for (name, _), dl in zip(leaves, res[len(weights):], strict=True):
            rows_to_host(self.comm, bufs[name], a, b, dl, add=True)
