"""The forward of a row-sharded global model, model-parallel: no rank holds the model.

GIST keeps its global weights row-sharded over all ``P`` ranks (rank ``r`` owns rows
``R_r = offsets[i][r] ..`` of weight ``i``, see :class:`hpcgnn.exchange.subnets.SubnetShards`).
:class:`ShardedForward` evaluates that model where it lies, running the layer's own forward
(:meth:`hpcgnn.kinds.Layer.forward`) on :class:`ShardedPrimitives`, so the mathematics is
the one every layout trains. Every rank holds the whole ``Â^T`` and, for each value of a
width the sub-networks split, the column block ``H[:, R_r]`` over all ``N`` vertices (the
input features' block ``X[:, R_r]`` is read from the file; a value of a width no
sub-network splits, the logits, whole), so

``H W = sum_r H[:, R_r] W[R_r, :]``

is a sum of partial products each rank computes from its own rows. When the weight's
columns follow a split width the sum is reduce-scattered by the column blocks of that
width (rank ``s`` gets ``Z[:, R_s]``), in ``P`` chunks of vertex rows so that no rank holds
more than ``N / P`` rows of the full-width partial product; otherwise (the logits) the
``N x f`` partial products are all-reduced. ``Â^T`` (a local SpMM on column blocks), ``g.own``
and the elementwise operations (ReLU, sums, scalings) act column by column, so they run on
the blocks; ``g.propagate`` follows :func:`~hpcgnn.layout.order.transform_first` like every
other model, its self term summed into the same partial products before the one reduction.
A replicated weight (:class:`~hpcgnn.exchange.subnet_biases.SubnetBiases`) multiplies a
whole value locally. The traffic is category ``gist_eval``, modelled by
:func:`hpcgnn.cost.gist.eval_bytes` from the same decisions; the weights never travel.

Memory per rank: its weight rows, ``Â^T`` (the graph, which GIST's ultra-wide models
dwarf), ``O(N f / P)`` activations and the ``N x f_L`` logits.

Attention (``g.attention``, GAT): ``Z = H W`` is reduced as above, so a rank holds the
columns ``R_s`` of ``Z``, which need not be whole heads (the shards split the units evenly).
A head's attention needs its score terms ``s_src = z a_src``, ``s_dst = z a_dst`` over all
of its units: each rank sums its units' share per head and the ``N x 2K`` partial score
terms are all-reduced (zeros for the heads it holds no unit of), after which every rank
computes the coefficients of the heads it touches over all edges of ``A^T + I`` and their
sums ``sum_j alpha_ij z_j`` on its columns, then ELU: column by column again. On the output
layer the ``N x K' C`` partial products are all-reduced and every rank attends all ``K'``
heads and averages them. The score vectors are replicated on every rank.

GIST with ``--sampler`` evaluates the sampled models as minibatch mode does: the operator
is the sampler's full-graph one (``D^-1 A^T`` for GraphSAGE's mean, on sage or cluster,
``D^-1 (A^T + I)`` for GCN on ladies and cluster; GIN's sum ``A^T + (1 + eps) I`` of the
sampler's pattern, whose pattern GAT attends over,
:func:`~hpcgnn.sampling.rows.eval_block`) and every layer adds its bias
(replicated on every rank, so the traffic is unchanged) to the output of the primitive that
takes the layer's last weight, before that primitive's own activation: GIN's after ``W_2``,
``ReLU(Â^T H W_1) W_2 + b``; GAT's after the attention (the output heads' mean), before ELU.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.config import TrainConfig
from hpcgnn.cost.gist import LOCAL, SCATTER, reduction
from hpcgnn.exchange.subnets import EVAL
from hpcgnn.graph.normalize import load_normalized
from hpcgnn.io.reader import GraphFile
from hpcgnn.kernels.attention import EdgePattern, edge_pattern, head_scores
from hpcgnn.kernels.gemm import matmul
from hpcgnn.kernels.spmm import spmm, to_torch_csr
from hpcgnn.layout.blocks import even_offsets
from hpcgnn.layout.order import transform_first
from hpcgnn.layout.subnets import Param
from hpcgnn.layout.trace import ATTENTION, uses
from hpcgnn.models.share import read_vertex_data
from hpcgnn.nn.gat import attend
from hpcgnn.sampling.rows import EdgeWeights, eval_block, read_pattern
from hpcgnn.sampling.samplers import sampler_named


@dataclass
class _Weight:
    """What the sharded primitives know of a weight: its global shape, rows, reduction."""

    shape: tuple[int, ...]
    lo: int
    hi: int
    reduce: str
    scale: float = 1.0
    bias: np.ndarray | None = None


class ShardedForward:
    """Logits of a model whose weights are row-sharded over ``world`` (collective).

    Parameters
    ----------
    path
        The graph file (read whole: ``Â^T``, labels, masks; features: this rank's columns).
    world
        The shards' owners.
    cfg
        ``dtype`` and the layer (``cfg.kind``).
    params
        The model's parameters (:func:`~hpcgnn.layout.subnets.model_params`), in order.
    widths
        Global widths ``f_0 .. f_L``.
    sampler
        GIST with ``--sampler``: evaluate with the full-graph operator of that sampler's
        model (:func:`~hpcgnn.sampling.rows.eval_block`, as minibatch mode does);
        ``None``: the full-batch operator of ``cfg.kind``.

    Attributes
    ----------
    y, masks
        Labels and train/val/test masks of every vertex.
    """

    def __init__(
        self, path: str | os.PathLike, world: Comm, cfg: TrainConfig, params: Sequence[Param],
        widths: Sequence[int], sampler: str | None = None,
    ) -> None:
        self.world, self.kind = world, cfg.kind
        self.params, self.widths = list(params), [int(f) for f in widths]
        self.dtype = cfg.torch_dtype
        r = world.rank
        with GraphFile(path) as gf:
            n = gf.meta.num_nodes
            if sampler is None:
                norm_t, _ = load_normalized(gf, cfg.numpy_dtype, adjoint=False, kind=cfg.kind)
            else:  # the operator the sampled model is evaluated with
                method = sampler_named(sampler)
                store = read_pattern(gf, 0, n, method)
                weights = EdgeWeights.read(gf) if cfg.kind.operator.weighted else None
                norm_t = eval_block(store, 0, n, method, cfg.kind, cfg.numpy_dtype, weights)
            off = even_offsets(self.widths[0], world.size)
            self.x, self.y, self.masks = read_vertex_data(
                gf, (0, n), cfg.numpy_dtype, (int(off[r]), int(off[r + 1])),
                device=world.device,
            )
        self.num_nodes = n
        self.a_t = to_torch_csr(norm_t, self.dtype, world.device.torch_device)
        self.chunks = even_offsets(n, world.size)
        self.pattern: EdgePattern | None = None
        if uses(self.widths, cfg.kind, ATTENTION):  # the edges of the operator, every row local
            ids = np.arange(n)
            self.pattern = edge_pattern(norm_t, ids, ids, world.device.torch_device, self.dtype)

    def logits(
        self, shards: Sequence[np.ndarray], vectors: Sequence[np.ndarray] | None = None,
        scales: Sequence[float] | None = None,
    ) -> torch.Tensor:
        """Logits of every vertex (``N x f_L``, the same on every rank) for this rank's rows.

        ``shards[i]``: this rank's rows of row-sharded weight ``i`` (model order);
        ``vectors``: the replicated parameters whole, in the model's order (GAT's score
        vectors; a sampled model's biases, each added after its layer's last weight).
        ``scales[i]``: the model's weight ``i`` is the shard's times this factor (GIST's
        ``--gist-rescale``); its products are scaled after their reduction, before a bias,
        so no scaled copy of the weights is made (``None``: as they are).
        """
        dev, size, me = self.world.device, self.world.size, self.world.rank
        shard_it, vec_it = iter(shards), iter(vectors or ())
        scale_it = iter(scales or ())
        layers: list[list[torch.Tensor]] = [[] for _ in self.widths[:-1]]
        meta: dict[int, _Weight] = {}
        for p in self.params:
            if p.bias:
                last_weight = layers[p.layer][-1]
                meta[id(last_weight)].bias = next(vec_it)
                continue
            value = next(shard_it) if p.sharded else next(vec_it)
            t = dev.from_numpy(np.ascontiguousarray(value))
            off = even_offsets(int(p.shape[0]), size)
            lo, hi = (int(off[me]), int(off[me + 1])) if p.sharded else (0, int(p.shape[0]))
            scale = float(next(scale_it, 1.0)) if p.sharded and scales is not None else 1.0
            meta[id(t)] = _Weight(tuple(p.shape), lo, hi, reduction(p, self.widths), scale)
            layers[p.layer].append(t)
        h: Any = self.x
        state: dict[str, Any] = {}
        last = len(layers) - 1
        for layer, ws in enumerate(layers):
            g = ShardedPrimitives(self, meta, layer, layer == last, state)
            h = self.kind.forward(g, h, ws)
        if tuple(h.shape) != (self.num_nodes, self.widths[-1]):
            raise ValueError(f"{self.kind}: the sharded forward gives {tuple(h.shape)} logits")
        return h

    def reduce(self, part: Callable[[int, int], torch.Tensor], w: _Weight) -> torch.Tensor:
        """``sum_r part_r`` of every rank's partial products of ``w``'s rows.

        ``part(a, b)``: this rank's partial product of vertex rows ``[a, b)``.
        Reduce-scattered by ``w``'s column blocks (in row chunks), all-reduced whole, or
        (a replicated weight) the product itself.
        """
        if w.reduce == LOCAL:
            return part(0, self.num_nodes)
        if w.reduce != SCATTER:
            z = part(0, self.num_nodes).contiguous()
            self.world.allreduce(z, EVAL)
            return z
        counts = np.diff(even_offsets(int(w.shape[1]), self.world.size))
        mine = int(counts[self.world.rank])
        out = self.world.device.empty((mine, self.num_nodes), self.dtype)
        for a, b in zip(self.chunks[:-1], self.chunks[1:], strict=True):
            if a == b:  # the same on every rank (N < P)
                continue
            out[:, a:b] = self.world.reduce_scatter(part(a, b).T.contiguous(), counts, EVAL)
        return out.T.contiguous()

    def columns(self, width: int) -> tuple[int, int]:
        """This rank's column block of a split width."""
        off = even_offsets(width, self.world.size)
        me = self.world.rank
        return int(off[me]), int(off[me + 1])

    def attend_columns(
        self, z: torch.Tensor, a_src: torch.Tensor, a_dst: torch.Tensor, lo: int, hi: int,
    ) -> torch.Tensor:
        """``sum_j alpha_ij z_j`` on this rank's columns ``[lo, hi)`` of a hidden layer's ``Z``.

        The heads' score terms are partial sums over the ranks that hold their units,
        all-reduced (``N x 2K``, category ``gist_eval``, collective).
        """
        assert self.pattern is not None
        heads, per = a_src.shape
        unit_head = torch.arange(lo, hi, device=z.device) // per
        s = z.new_zeros((self.num_nodes, 2 * heads))
        s.index_add_(1, unit_head, z * a_src.reshape(-1)[lo:hi])
        s.index_add_(1, unit_head + heads, z * a_dst.reshape(-1)[lo:hi])
        self.world.allreduce(s, EVAL)
        out = torch.empty_like(z)
        for k in range(lo // per, -(-hi // per)):  # the heads of [lo, hi)
            a, b = max(lo, k * per) - lo, min(hi, (k + 1) * per) - lo
            o, _ = attend(self.pattern, z[:, a:b].unsqueeze(1),
                          s[:, heads + k, None].contiguous(), s[:, k, None].contiguous(),
                          None, 0.0)
            out[:, a:b] = o[:, 0]
        return out


class ShardedPrimitives:
    """The graph primitives (:class:`~hpcgnn.kinds.Primitives`) on column blocks of all rows.

    Built by :meth:`ShardedForward.logits` for one layer; ``meta`` describes each weight
    tensor it passes to the layer (by identity).
    """

    def __init__(self, fwd: ShardedForward, meta: dict[int, _Weight], layer: int, last: bool,
                 state: dict[str, Any]) -> None:
        self.fwd, self.meta, self.layer, self.last, self.state = fwd, meta, layer, last, state

    def _rows(self, h: torch.Tensor, w: _Weight) -> torch.Tensor:
        """This rank's columns of ``h`` for ``w``'s rows (``h`` whole, or that block)."""
        if h.shape[1] == w.shape[0] and w.hi - w.lo != w.shape[0] and w.reduce != LOCAL:
            return h[:, w.lo : w.hi]
        if h.shape[1] != w.hi - w.lo:
            raise ValueError(f"layer {self.layer}: {h.shape[1]} columns times a weight of"
                             f" {w.shape[0]} rows ({w.hi - w.lo} here)")
        return h

    def _finish(self, z: torch.Tensor, m: _Weight, *weights: torch.Tensor) -> torch.Tensor:
        """The reduced product scaled, and its layer's bias added if ``weights`` end the layer."""
        if m.scale != 1.0:
            z = z * m.scale
        return self._bias(z, *weights)

    def bias(self, z: torch.Tensor) -> torch.Tensor:
        """``z``: a sampled model's bias is already added after the layer's last weight."""
        return z

    def _bias(self, z: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
        bias = next((self.meta[id(t)].bias for t in weights
                     if self.meta[id(t)].bias is not None), None)
        return z if bias is None else self._add(z, bias)

    def _add(self, z: torch.Tensor, bias: np.ndarray) -> torch.Tensor:
        if z.shape[1] != bias.shape[0]:
            lo, hi = self.fwd.columns(int(bias.shape[0]))
            bias = bias[lo:hi]
        return z + self.fwd.world.device.from_numpy(np.ascontiguousarray(bias))

    def aggregate(self, h: torch.Tensor) -> torch.Tensor:
        """``Â^T H`` on this rank's columns (a local SpMM)."""
        return spmm(self.fwd.a_t, h)

    def own(self, h: torch.Tensor) -> torch.Tensor:
        """``h``: every row is local."""
        return h

    def dense(self, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """``H W``: this rank's partial products, reduced."""
        m, stats = self.meta[id(w)], self.fwd.world.stats
        t = self._rows(h, m)
        z = self.fwd.reduce(lambda a, b: matmul(t[a:b], w, stats), m)
        return self._finish(z, m, w)

    def propagate(self, h: torch.Tensor, w: torch.Tensor,
                  self_weight: torch.Tensor | None = None) -> torch.Tensor:
        """``Â^T H W`` (plus ``H W_self``, in the same reduction) in the narrower order."""
        m, stats = self.meta[id(w)], self.fwd.world.stats
        t = self._rows(h, m)
        if self_weight is None and transform_first(self.layer, m.shape[0], m.shape[1]):
            z = spmm(self.fwd.a_t, self.fwd.reduce(lambda a, b: matmul(t[a:b], w, stats), m))
            return self._finish(z, m, w)
        agg = spmm(self.fwd.a_t, t)
        if self_weight is None:
            z = self.fwd.reduce(lambda a, b: matmul(agg[a:b], w, stats), m)
            return self._finish(z, m, w)
        s = self._rows(h, self.meta[id(self_weight)])

        def part(a: int, b: int) -> torch.Tensor:
            return matmul(agg[a:b], w, stats) + matmul(s[a:b], self_weight, stats)

        return self._finish(self.fwd.reduce(part, m), m, w, self_weight)

    def attention(self, h: torch.Tensor, w: torch.Tensor, a_src: torch.Tensor,
                  a_dst: torch.Tensor) -> torch.Tensor:
        """GAT's layer: ``Z = H W`` reduced, then the heads' attention on the columns."""
        m, fwd = self.meta[id(w)], self.fwd
        t = self._rows(h, m)
        z = fwd.reduce(lambda a, b: matmul(t[a:b], w, fwd.world.stats), m)
        if m.scale != 1.0:
            z = z * m.scale
        if m.reduce == SCATTER:
            lo, hi = fwd.columns(int(m.shape[1]))
            out = fwd.attend_columns(z, a_src, a_dst, lo, hi)
        else:
            assert fwd.pattern is not None
            z = z.view(fwd.num_nodes, *a_src.shape)
            s_src, s_dst = head_scores(z, a_src), head_scores(z, a_dst)
            out, _ = attend(fwd.pattern, z, s_dst, s_src, None, 0.0)
            out = out.mean(dim=1) if self.last else out.reshape(fwd.num_nodes, -1)
        out = self._bias(out, w, a_src, a_dst)
        return out if self.last else torch.nn.functional.elu(out)
