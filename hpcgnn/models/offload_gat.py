"""HongTu's chunked GAT: the edge computation inside the chunk sweep (``--mode offload``).

HongTu (section 7) trains GAT as GCN's partition x chunk schedule with host-resident
vertex data and deduplicated neighbour loads; only what a chunk computes differs. A layer
of :mod:`hpcgnn.nn.gat` runs as two sweeps over the chunks of the rank's part:

1. **transform** (own rows, no communication): ``z = H W`` and the source score terms
   ``s_src = z . a_src`` per head; the rows ``[z | s_src]`` (``K f' + K`` wide) go to a
   host buffer;
2. **attend**: load the chunk's neighbour rows of ``[z | s_src]`` through the
   deduplicated path (:class:`~hpcgnn.exchange.offload.OffloadExchange`; the pattern of
   ``A^T + I`` holds every vertex's own row, so the destination terms ``s_dst = z . a_dst``
   come from the loaded rows too), compute the chunk's coefficients and outputs
   (:func:`hpcgnn.nn.gat.attend`: a chunk holds whole rows, so each row's softmax is
   local), activate, drop out and write the chunk's output rows to the host.

So the score terms travel with the rows they belong to, ``K`` more columns, as in every
other layout. The host tier keeps each layer's input and ``[z | s_src]`` rows. The
backward sweeps the layers in reverse: reload the chunk's rows, recompute its
coefficients (nothing is cached on the device: the coefficients are ``E K`` values; the
loaded rows are what HongTu's recomputation reloads) and push the gradients of the
neighbour rows, ``[d z | d s_src]``, into the owners' host buffers through the same
deduplicated path (:func:`hpcgnn.nn.gat.attend_backward`); then, on the own rows, add
the destination terms' gradient, form the weight gradients and the input gradient
``dZ W^T``, which stays on its rank (``H W`` is row-local). Attention dropout draws the
serial run's decisions (keyed by global edge and head), so the result equals the serial
reference up to float rounding.

Sparse input features are refused (the first layer's ``X W`` would be an SpMM on the
host tier's CSR; GCN and GraphSAGE offload have it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.cost.estimate import Estimate
from hpcgnn.cost.offload import predict_offload_gat
from hpcgnn.errors import ConfigError
from hpcgnn.exchange.offload import OffloadExchange, rows_to_device, rows_to_host
from hpcgnn.kernels.attention import EdgePattern, edge_pattern
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.models.offload import OffloadGCN
from hpcgnn.nn.gat import AttentionDrop, attend, attend_backward
from hpcgnn.nn.gcn import block_dropout, dropout


class OffloadGAT(OffloadGCN):
    """GAT trained HongTu-style (``--mode offload``).

    :class:`OffloadGCN`'s schedule and exchange, the attention of :mod:`hpcgnn.nn.gat`
    inside the chunk sweep (see the module docstring).
    """

    def _setup(self, a_t: Any) -> None:
        if isinstance(self.x, SparseFeatures):
            raise ConfigError(
                "--model gat in --mode offload takes dense input features (use"
                " --sparse-features off, or another --algo)"
            )
        self._patterns: list[EdgePattern] = []
        self._own_pos: list[torch.Tensor] = []
        super()._setup(a_t)
        if self.reload is None:  # the backward reloads every layer's rows
            assert self.offsets is not None
            self.reload = OffloadExchange(self.comm, self.exchange.tables, self.offsets,
                                          self.opts.dedup)

    def _add_chunk(self, local: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> None:
        """A chunk's edges (:class:`EdgePattern`) and its own rows' positions in its load.

        The pattern of ``A^T + I`` holds every own row, so ``s_dst`` comes from the load.
        """
        dev = self.comm.device.torch_device
        self._patterns.append(edge_pattern(local, rows, cols, dev, self.cfg.torch_dtype))
        self._own_pos.append(torch.from_numpy(np.searchsorted(cols, rows)).to(dev))

    def _cache_plan(self, largest: int) -> Sequence[bool]:
        """Nothing is cached: the backward recomputes every chunk's coefficients."""
        return [False] * (len(self.widths) - 1)

    def _heads(self, layer: int) -> tuple[int, int]:
        """``(K, f')`` of layer ``layer``: its heads and the width of each."""
        last = layer == len(self.widths) - 2
        shapes = self.cfg.kind.layer_shapes(self.widths[layer], self.widths[layer + 1], layer,
                                            last)
        return shapes[1]

    @property
    def load_widths(self) -> list[int]:
        """Width of the rows each layer loads: ``[z | s_src]``, ``K f' + K``."""
        return [k * f + k for k, f in (self._heads(i) for i in range(len(self.widths) - 1))]

    def predict_cost(self) -> Estimate | None:
        """Bytes of one epoch per tier (:func:`~hpcgnn.cost.offload.predict_offload_gat`)."""
        heads = [self._heads(i) for i in range(len(self.widths) - 1)]
        return predict_offload_gat(self.problem(), self.comm.size, self.volumes,
                                   self.transfers, self.opts.dedup, heads)

    # -- passes ----------------------------------------------------------------------------
    def _transform(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Sweep 1: the host rows ``[H W | s_src]`` of this rank's part."""
        w, a_src, _ = self._layer_weights(layer)
        heads, width = a_src.shape
        n_own = self.rows[1] - self.rows[0]
        zs = self.comm.device.pinned_empty((n_own, heads * width + heads), w.dtype)
        for a, b in self.chunk_rows:
            with self.comm.stats.phase("gemm"):
                z = rows_to_device(self.comm, h, a, b) @ w
                s_src = (z.view(-1, heads, width) * a_src).sum(dim=2)
            rows_to_host(self.comm, zs, a, b, torch.cat([z, s_src], dim=1))
        return zs

    def _attend(self, neigh: torch.Tensor, j: int, layer: int) -> tuple:
        """Chunk ``j``'s attention on its loaded rows: ``(out, saved, z, keep)``."""
        _, a_src, a_dst = self._layer_weights(layer)
        heads, width = a_src.shape
        pattern = self._patterns[j]
        z = neigh[:, : heads * width].reshape(-1, heads, width)
        s_dst = (z[self._own_pos[j]] * a_dst).sum(dim=2)
        drop = self._drop
        keep = None if drop is None else drop.keep(layer, pattern, heads)
        p = 0.0 if drop is None else drop.p
        with self.comm.stats.phase("attention"):
            out, saved = attend(pattern, z, s_dst, neigh[:, heads * width :].contiguous(), keep,
                                p)
        return out, saved, z, keep

    def forward_pass(self, epoch: int | None) -> torch.Tensor:
        """Offloaded forward; with an epoch it applies both dropouts and keeps the inputs."""
        train, cfg = epoch is not None, self.cfg
        p = cfg.dropout
        n_own = self.rows[1] - self.rows[0]
        self._masks = []
        self._inputs = {}
        self._rows: dict[int, torch.Tensor] = {}  # each layer's [z | s_src], for the backward
        keep = None
        if train and p > 0.0:
            assert epoch is not None
            keep = block_dropout(cfg.seed, p, epoch, self.rows, self.widths,
                                 device=self.comm.device)
        self._drop = None
        if train and cfg.attention_p > 0.0:
            assert epoch is not None
            self._drop = AttentionDrop(cfg.attention_p, cfg.seed, epoch)
        h = self._first_input(keep)
        last = len(self.widths) - 2
        for layer in range(last + 1):
            heads, width = self._heads(layer)
            zs = self._transform(h, layer)
            if train:
                self._inputs[layer], self._rows[layer] = h, zs
            out = self.comm.device.pinned_empty(
                (n_own, width if layer == last else heads * width), zs.dtype)
            mask = keep(layer + 1) if keep is not None and layer < last else None
            for j, (a, b) in enumerate(self.chunk_rows):
                o = self._attend(self.exchange.load(zs, j), j, layer)[0]
                o = o.mean(dim=1) if layer == last else torch.nn.functional.elu(
                    o.reshape(-1, heads * width))
                if mask is not None:
                    o = dropout(o, mask[a:b], p)
                rows_to_host(self.comm, out, a, b, o)
            self.exchange.end_pass()
            if layer < last:
                self._masks.append(mask)
            h = out
        return h

    def backward_pass(self, grad_logits: torch.Tensor) -> list[torch.Tensor]:
        """Offloaded backward from the logits' gradient; returns the weight gradients."""
        host, p = self.comm.device, self.cfg.dropout
        n_own = self.rows[1] - self.rows[0]
        grads = [torch.zeros_like(w) for w in self.weights]
        g_out: torch.Tensor | None = grad_logits
        last = len(self.widths) - 2
        assert self.reload is not None
        for layer in range(last, -1, -1):
            w, a_src, a_dst = self._layer_weights(layer)
            heads, width = a_src.shape
            h, zs = self._inputs[layer], self._rows[layer]
            g_zs = host.pinned_empty(tuple(zs.shape), zs.dtype).zero_()
            g_dst = host.pinned_empty((n_own, heads), zs.dtype)
            mask = self._masks[layer + 1] if layer < last else None
            assert g_out is not None  # every layer above the first writes its input's
            for j, (a, b) in enumerate(self.chunk_rows):
                g = rows_to_device(self.comm, g_out, a, b)
                out, saved, z, keep = self._attend(self.reload.load(zs, j), j, layer)
                if layer < last:
                    if mask is not None:
                        g = dropout(g, mask[a:b], p)
                    pre = out.reshape(-1, heads * width)
                    # ELU': 1 where pre > 0, else exp(pre) (exp(0) = 1 exactly: no where,
                    # which is many times slower on the CPU)
                    g = (g * torch.exp(pre.clamp(max=0))).view(-1, heads, width)
                else:  # the mean of the heads
                    g = (g / heads).unsqueeze(1).expand(-1, heads, width)
                drop_p = 0.0 if self._drop is None else self._drop.p
                with self.comm.stats.phase("attention"):
                    dz, ds_dst, ds_src = attend_backward(self._patterns[j], z, saved, out, g,
                                                         keep, drop_p)
                self.exchange.store(torch.cat([dz.reshape(-1, heads * width), ds_src], dim=1),
                                    j, g_zs)
                rows_to_host(self.comm, g_dst, a, b, ds_dst)
            self.exchange.end_pass()
            self.reload.end_pass()
            g_in = host.pinned_empty((n_own, w.shape[0]), w.dtype) if layer > 0 else None
            for a, b in self.chunk_rows:  # the own rows: score terms, weights, input
                pushed = rows_to_device(self.comm, g_zs, a, b)
                ds_dst = rows_to_device(self.comm, g_dst, a, b)
                hj = rows_to_device(self.comm, h, a, b)
                with self.comm.stats.phase("gemm"):
                    z = (hj @ w).view(-1, heads, width)
                    ds_src = pushed[:, heads * width :]
                    grads[3 * layer + 1] += (ds_src.unsqueeze(2) * z).sum(dim=0)
                    grads[3 * layer + 2] += (ds_dst.unsqueeze(2) * z).sum(dim=0)
                    dz = (pushed[:, : heads * width].view(-1, heads, width)
                          + ds_src.unsqueeze(2) * a_src + ds_dst.unsqueeze(2) * a_dst)
                    dz = dz.reshape(-1, heads * width)
                    grads[3 * layer] += hj.T @ dz
                    if g_in is not None:
                        gi = dz @ w.T
                if g_in is not None:
                    rows_to_host(self.comm, g_in, a, b, gi)
            g_out = g_in
        self._inputs, self._masks, self._rows = {}, [], {}
        return grads
