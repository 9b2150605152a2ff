"""The GCN forward of a row-sharded global model, model-parallel: no rank holds the model.

GIST keeps its global weights row-sharded over all ``P`` ranks (rank ``r`` owns rows
``R^l_r = offsets[l][r] ..`` of ``W^{l+1}``, see :class:`hpcgnn.exchange.subnets.SubnetShards`).
:class:`ShardedForward` evaluates that model where it lies. Every rank holds the whole
``Â^T`` and, for each layer, the column block ``H^l[:, R^l_r]`` of the layer input over
all ``N`` vertices (the input features' block ``X[:, R^0_r]`` is read from the file), so

``H^l W^{l+1} = sum_r H^l[:, R^l_r] W^{l+1}[R^l_r, :]``

is a sum of partial products each rank computes from its own rows. For a hidden layer the
sum is reduce-scattered by the column blocks of the next layer's shards (rank ``s`` gets
``Z[:, R^{l+1}_s]``, the input block of its next weight rows), in ``P`` chunks of vertex
rows so that no rank holds more than ``N / P`` rows of the full-width partial product; the
output layer's ``N x f_L`` partial logits are all-reduced. ``Â^T`` (a local SpMM on
column blocks) and ReLU act column by column, so they run on the blocks; the order of
each layer's product follows :func:`~hpcgnn.layout.order.transform_first` like every
other model. The traffic is category ``gist_eval``, modelled by
:func:`hpcgnn.cost.gist.eval_bytes`; the weights never travel.

Memory per rank: its weight rows, ``Â^T`` (the graph, which GIST's ultra-wide models
dwarf), ``O(N f / P)`` activations and the ``N x f_L`` logits.

GraphSAGE (``cfg.kind.self_weight``): ``Â^T`` is the mean ``D_in^-1 A^T`` and each layer
is ``(Â^T H) W_neigh + H W_self``, always in that order: both partial products of a rank
come from its own rows and are summed before the one reduction, so the traffic is GCN's.

GIN (``cfg.kind.mlp``): the shards follow :func:`~hpcgnn.layout.subnets.weight_chain`, one
step per weight: ``W_1^l`` as a GCN layer on the sum operator (always ReLU: the MLP's inner
activation), then ``W_2^l`` as a product without aggregation, reduced like any other
(the last one all-reduced), so the traffic is that of a GCN of the chain's widths.

GAT (``cfg.kind.attention``; ``widths`` its weight chain, the output layer's ``K' C``
columns last): each layer's ``Z = H W`` is reduced as above, so a rank holds the columns
``R^{l+1}_s`` of ``Z``, which need not be whole heads (the shards split the units evenly).
A head's attention needs its score terms ``s_src = z a_src``, ``s_dst = z a_dst`` over all
of its units: each rank sums its units' share per head and the ``N x 2K`` partial score
terms are all-reduced (zeros for the heads it holds no unit of), after which every rank
computes the coefficients of the heads it touches over all edges of ``A^T + I`` and their
sums ``sum_j alpha_ij z_j`` on its columns, then ELU: column by column again. The output
layer's ``N x K' C`` partial products are all-reduced and every rank attends all ``K'``
heads and averages them. The score vectors ``a_src, a_dst`` are replicated on every rank
(:class:`~hpcgnn.exchange.subnet_biases.SubnetBiases`).

GIST with ``--sampler`` evaluates the sampled models as minibatch mode does: the operator
is the sampler's full-graph one (``D^-1 A^T`` for sage, ``D^-1 (A^T + I)`` for ladies and
cluster; GIN's sum ``A^T + (1 + eps) I`` of the sampler's pattern, whose pattern GAT
attends over, :func:`~hpcgnn.sampling.rows.eval_block`) and every layer adds its bias
(replicated on every rank, so the traffic is unchanged) after its last weight: GIN's after
``W_2^l``, ``ReLU(Â^T H W_1) W_2 + b``; GAT's after the attention (the output heads'
mean), before ELU.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.config import TrainConfig
from hpcgnn.exchange.subnets import EVAL
from hpcgnn.graph.normalize import load_normalized
from hpcgnn.io.reader import GraphFile
from hpcgnn.kernels.attention import EdgePattern, edge_pattern
from hpcgnn.kernels.gemm import matmul
from hpcgnn.kernels.spmm import spmm, to_torch_csr
from hpcgnn.layout.blocks import even_offsets
from hpcgnn.layout.order import transform_first
from hpcgnn.models.share import read_vertex_data
from hpcgnn.nn.gat import attend
from hpcgnn.sampling.rows import eval_block, read_pattern
from hpcgnn.sampling.samplers import sampler_named


class ShardedForward:
    """Logits of a GCN whose weights are row-sharded over ``world`` (collective).

    Parameters
    ----------
    path
        The graph file (read whole: ``Â^T``, labels, masks; features: this rank's columns).
    world
        The shards' owners.
    cfg
        ``dtype`` (and ``layers``).
    widths
        Global widths ``f_0 .. f_L`` (GIN: the chain of its weights,
        :func:`~hpcgnn.layout.subnets.weight_chain`).
    offsets
        ``offsets[l]``: row offsets of ``W^{l+1}``'s shards over the ranks (length ``P + 1``).
    sampler
        GIST with ``--sampler``: evaluate with the full-graph operator of that sampler's
        model (:func:`~hpcgnn.sampling.rows.eval_block`, as minibatch mode does);
        ``None``: the full-batch operator of ``cfg.model``.

    Attributes
    ----------
    y, masks
        Labels and train/val/test masks of every vertex.
    """

    def __init__(
        self, path: str | os.PathLike, world: Comm, cfg: TrainConfig, widths: Sequence[int],
        offsets: Sequence[np.ndarray], sampler: str | None = None,
    ) -> None:
        self.world, self.widths = world, tuple(int(f) for f in widths)
        self.mlp = cfg.kind.mlp
        self.offsets = [np.asarray(o, dtype=np.int64) for o in offsets]
        self.dtype = cfg.torch_dtype
        r = world.rank
        with GraphFile(path) as gf:
            n = gf.meta.num_nodes
            if sampler is None:
                norm_t, _ = load_normalized(gf, cfg.numpy_dtype, adjoint=False, kind=cfg.kind)
            else:  # the operator the sampled model is evaluated with
                method = sampler_named(sampler)
                store = read_pattern(gf, 0, n, method)
                norm_t = eval_block(store, 0, n, method, cfg.kind, cfg.numpy_dtype)
            cols = (int(self.offsets[0][r]), int(self.offsets[0][r + 1]))
            self.x, self.y, self.masks = read_vertex_data(
                gf, (0, n), cfg.numpy_dtype, cols, device=world.device
            )
        self.num_nodes = n
        self.a_t = to_torch_csr(norm_t, self.dtype, world.device.torch_device)
        self.chunks = even_offsets(n, world.size)
        self.pattern = None
        if cfg.kind.attention:  # GAT's edges: the pattern of A^T + I, every row local
            ids = np.arange(n)
            self.pattern = edge_pattern(norm_t, ids, ids, world.device.torch_device, self.dtype)

    def logits(
        self, shards: Sequence[np.ndarray], self_shards: Sequence[np.ndarray] | None = None,
        biases: Sequence[np.ndarray | None] | None = None,
        scales: Sequence[float] | None = None,
        scores: Sequence[np.ndarray] | None = None,
    ) -> torch.Tensor:
        """Logits of every vertex (``N x f_L``, the same on every rank) for this rank's rows.

        ``shards[l]``: this rank's rows ``R^l_r`` of ``W^{l+1}`` (GraphSAGE: of
        ``W_neigh``, with ``self_shards[l]`` those of ``W_self``); ``biases[l]``: the whole
        bias that follows ``W^{l+1}`` (replicated; the sampled models have one per layer,
        GIN's after ``W_2``: ``None`` after ``W_1``), added to the column block of the
        product a rank holds, before the activation.
        ``scales[l]``: the model's ``W^{l+1}`` is the shards' times this factor (GIST's
        ``--gist-rescale``); the layer's product is scaled before its bias, so no scaled
        copy of the weights is made (``None`` or ``1.0``: as they are). ``scores``: GAT's
        ``a_src^1, a_dst^1, a_src^2, ..`` whole (replicated; ``K x f'``, ``K' x C``); a
        sampled GAT's ``biases[l]`` (``K f'``, or ``C`` after the output heads' mean) are
        added after the attention, before ELU.
        """
        if self.pattern is not None:
            assert scores is not None, "GAT's logits need its score vectors"
            return self._gat_logits(self.pattern, shards, scores, biases)
        h = self.x
        last = len(self.widths) - 2
        stats = self.world.stats
        me = self.world.rank
        for layer, shard in enumerate(shards):
            w = self.world.device.from_numpy(np.ascontiguousarray(shard))
            w_self = None
            if self_shards is not None:
                w_self = self.world.device.from_numpy(np.ascontiguousarray(self_shards[layer]))
            second = self.mlp and layer % 2 == 1  # GIN's U W_2: no aggregation
            first = w_self is None and transform_first(
                layer // 2 if self.mlp else layer, self.widths[layer], self.widths[layer + 1]
            )
            t = h if first or second else spmm(self.a_t, h)
            if layer == last:
                z = matmul(t, w, stats)
                if w_self is not None:
                    z = z + matmul(h, w_self, stats)
                z = z.contiguous()
                self.world.allreduce(z, EVAL)
            else:
                z = self._reduce_scatter(t, w, self.offsets[layer + 1], h, w_self)
            if first and not second:
                z = spmm(self.a_t, z)
            if scales is not None and scales[layer] != 1.0:
                z = z * scales[layer]
            b = None if biases is None else biases[layer]
            if b is not None:
                if layer != last:
                    off = self.offsets[layer + 1]
                    b = b[int(off[me]) : int(off[me + 1])]
                z = z + self.world.device.from_numpy(np.ascontiguousarray(b))
            h = z if layer == last else torch.relu(z)
        return h

    def _reduce_scatter(
        self, t: torch.Tensor, w: torch.Tensor, out_offsets: np.ndarray,
        h: torch.Tensor | None = None, w_self: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``sum_r T_r W_r`` (``+ H_r W_self_r``) of every rank, this rank's column block.

        In row chunks.
        """
        counts = np.diff(out_offsets)
        mine = int(counts[self.world.rank])
        out = self.world.device.empty((mine, self.num_nodes), self.dtype)
        for a, b in zip(self.chunks[:-1], self.chunks[1:], strict=True):
            if a == b:  # the same on every rank (N < P)
                continue
            part = matmul(t[a:b], w, self.world.stats)
            if w_self is not None and h is not None:
                part = part + matmul(h[a:b], w_self, self.world.stats)
            part = part.T.contiguous()  # f_out x rows
            out[:, a:b] = self.world.reduce_scatter(part, counts, EVAL)
        return out.T.contiguous()

    def _gat_logits(
        self, pattern: EdgePattern, shards: Sequence[np.ndarray], scores: Sequence[np.ndarray],
        biases: Sequence[np.ndarray | None] | None = None,
    ) -> torch.Tensor:
        """GAT's logits: each layer's ``Z = H W`` reduced, then attention on the columns.

        ``biases[l]`` (a sampled GAT's, whole): added to the attention's output (this
        rank's columns of a hidden layer's), before ELU.
        """
        dev, stats, h = self.world.device, self.world.stats, self.x
        last = len(shards) - 1
        for layer, shard in enumerate(shards):
            w = dev.from_numpy(np.ascontiguousarray(shard))
            a_src, a_dst = (dev.from_numpy(np.ascontiguousarray(a))
                            for a in scores[2 * layer : 2 * layer + 2])
            b = None if biases is None else biases[layer]
            if layer == last:  # every rank attends all K' heads, averaged
                z = matmul(h, w, stats).contiguous()
                self.world.allreduce(z, EVAL)
                z = z.view(self.num_nodes, *a_src.shape)
                s_src, s_dst = (z * a_src).sum(dim=2), (z * a_dst).sum(dim=2)
                out, _ = attend(pattern, z, s_dst, s_src, None, 0.0)
                out = out.mean(dim=1)
                return out if b is None else out + dev.from_numpy(np.ascontiguousarray(b))
            off = self.offsets[layer + 1]
            lo, hi = int(off[self.world.rank]), int(off[self.world.rank + 1])
            z = self._attend_columns(pattern, self._reduce_scatter(h, w, off), a_src, a_dst,
                                     lo, hi)
            if b is not None:
                z = z + dev.from_numpy(np.ascontiguousarray(b[lo:hi]))
            h = torch.nn.functional.elu(z)
        raise ValueError("a GAT needs at least one layer")

    def _attend_columns(
        self, pattern: EdgePattern, z: torch.Tensor, a_src: torch.Tensor, a_dst: torch.Tensor,
        lo: int, hi: int,
    ) -> torch.Tensor:
        """``sum_j alpha_ij z_j`` on this rank's columns ``[lo, hi)`` of a hidden layer's ``Z``.

        The heads' score terms are partial sums over the ranks that hold their units,
        all-reduced (``N x 2K``, category ``gist_eval``, collective).
        """
        heads, per = a_src.shape
        unit_head = torch.arange(lo, hi, device=z.device) // per
        s = z.new_zeros((self.num_nodes, 2 * heads))
        s.index_add_(1, unit_head, z * a_src.reshape(-1)[lo:hi])
        s.index_add_(1, unit_head + heads, z * a_dst.reshape(-1)[lo:hi])
        self.world.allreduce(s, EVAL)
        out = torch.empty_like(z)
        for k in range(lo // per, -(-hi // per)):  # the heads of [lo, hi)
            a, b = max(lo, k * per) - lo, min(hi, (k + 1) * per) - lo
            o, _ = attend(pattern, z[:, a:b].unsqueeze(1), s[:, heads + k, None].contiguous(),
                          s[:, k, None].contiguous(), None, 0.0)
            out[:, a:b] = o[:, 0]
        return out
