"""Bytes of GIST: the sub-model traffic of a round, and what data parallelism would move.

Counted as :class:`hpcgnn.comm.Comm` records them (bytes received, summed over ranks):

- scatter: each group root receives its sub-model's entries from their owners, except
  the ones it owns itself, then broadcasts the whole sub-model to the other
  other ranks of its group;
- gather: the owners receive the trained entries back from the roots (again except a
  root's own);
- evaluation (:func:`eval_bytes`): the global model is evaluated over its row shards,
  layer by layer; the partial products of every hidden layer are reduce-scattered by
  column blocks and those of the output layer all-reduced (``gist_eval``).

Each entry travels as the weight and Adam's two moments (:data:`PARAM_KINDS`), so the
optimiser state survives the round trip; with ``M = 1, K = 1`` GIST is ordinary
full-batch training step for step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hpcgnn.cost.estimate import allreduce_share
from hpcgnn.kinds import Layer
from hpcgnn.layout.subnets import PARAM_KINDS, Param, SubWeights
from hpcgnn.layout.trace import Shape

#: How the evaluation reduces a dense product's partial sums (:class:`EvalWeight`).
SCATTER, ALLREDUCE, LOCAL = "reduce_scatter", "allreduce", "local"


def round_bytes(
    nets: Sequence[SubWeights], offsets: list[np.ndarray], roots: Sequence[int],
    group_sizes: Sequence[int], itemsize: int,
) -> dict[str, float]:
    """Bytes of one round's ``gist_scatter`` and ``gist_gather``, summed over ranks.

    Parameters
    ----------
    nets
        The round's sub-networks' rows and columns of the row-sharded weights.
    offsets
        Row offsets of every weight's shards over the ranks.
    roots
        World rank of each sub-network's group root.
    group_sizes
        Ranks of each sub-network's group (``P / M`` each when ``M`` divides ``P``).
    itemsize
        Bytes per entry.
    """
    per_entry = len(PARAM_KINDS) * itemsize
    fetched = sum(n.numel() - n.owned_numel(offsets, r) for n, r in zip(nets, roots, strict=True))
    spread = sum(n.numel() * (g - 1) for n, g in zip(nets, group_sizes, strict=True))
    return {
        "gist_scatter": float(per_entry * (fetched + spread)),
        "gist_gather": float(per_entry * fetched),
    }


def bias_bytes(sizes: Sequence[int], ranks: int, itemsize: int) -> float:
    """Bytes of one round's replicated-parameter all-reduce, summed over ranks.

    ``sizes``: the entries of each replicated parameter of one category (the sampled
    models' biases, ``gist_bias``; a layer's replicated weights, ``gist_attention``: GAT's
    score vectors). They travel as the weight and two moments, all-reduced over ``ranks``
    ranks: ``2 m (p - 1) / p`` per rank (rounded as :class:`~hpcgnn.comm.Comm` records it,
    :func:`~hpcgnn.cost.estimate.allreduce_share`).
    """
    m = len(PARAM_KINDS) * itemsize * sum(int(f) for f in sizes)
    return float(ranks * allreduce_share(m, ranks))


def data_parallel_bytes(entries: int, ranks: int, itemsize: int, steps: int) -> float:
    """Bytes ``steps`` all-reduces of the whole model's gradients move over ``ranks`` ranks.

    What ordinary data-parallel training of the global model would record instead of the
    sub-model traffic (``2 m (p - 1) / p`` per rank, summed over ranks) for a model of
    ``entries`` parameters.
    """
    return float(steps * 2 * entries * itemsize * (ranks - 1))


class EvalWeight:
    """A weight in the evaluation's trace: its global shape and how its products reduce.

    ``reduce``: :data:`SCATTER` (its columns follow a hidden width: the partial products
    are reduce-scattered by column blocks), :data:`ALLREDUCE` (they are all-reduced whole)
    or :data:`LOCAL` (a replicated weight: no message).
    """

    def __init__(self, shape: tuple[int, ...], reduce: str) -> None:
        self.shape, self.reduce = shape, reduce


def reduction(param: Param, widths: Sequence[int]) -> str:
    """How the model-parallel evaluation reduces the products of ``param`` (:class:`EvalWeight`)."""
    if not param.sharded:
        return LOCAL
    return SCATTER if param.cols in range(1, len(widths) - 1) else ALLREDUCE


class EvalTrace:
    """The evaluation's primitives on shapes: each reduction it makes, in order.

    The same decisions as :class:`hpcgnn.models.sharded.ShardedPrimitives`: a dense step
    (or a propagation, its self term summed before the one reduction) reduces its partial
    products as its weight says; an attention on a hidden layer all-reduces its heads'
    score terms too. ``reductions``: ``(kind, columns)`` with kind a reduction, or
    ``"scores"`` (``columns``: ``2 K``).
    """

    def __init__(self, layer: int, last: bool, state: dict[str, Any],
                 reductions: list[tuple[str, int]]) -> None:
        self.layer, self.last, self.state, self.reductions = layer, last, state, reductions

    def _reduce(self, w: EvalWeight) -> Shape:
        if w.reduce != LOCAL:
            self.reductions.append((w.reduce, int(w.shape[1])))
        return Shape(int(w.shape[1]), True)

    def aggregate(self, h: Shape) -> Shape:
        """A local SpMM on each rank's columns."""
        return h._same()

    def bias(self, h: Shape) -> Shape:
        """No message: a bias is added where the sharded product ends."""
        return h._same()

    def own(self, h: Shape) -> Shape:
        """Every row is local."""
        return h._same()

    def dense(self, h: Shape, w: EvalWeight) -> Shape:
        """One reduction of ``H W``'s partial products."""
        return self._reduce(w)

    def propagate(self, h: Shape, w: EvalWeight, self_weight: EvalWeight | None = None
                  ) -> Shape:
        """One reduction (the self term summed into the same partial products)."""
        return self._reduce(w)

    def attention(self, h: Shape, w: EvalWeight, a_src: EvalWeight, a_dst: EvalWeight
                  ) -> Shape:
        """``Z = H W`` reduced; a column block's heads' score terms all-reduced."""
        z = self._reduce(w)
        heads, per = int(a_src.shape[0]), int(a_src.shape[1])
        if w.reduce == SCATTER:
            self.reductions.append(("scores", 2 * heads))
        return Shape(per if self.last else z.width, True)


def eval_reductions(params: Sequence[Param], widths: Sequence[int], kind: Layer
                    ) -> list[tuple[str, int]]:
    """Every reduction of one model-parallel evaluation (:class:`EvalTrace`), in order."""
    widths = [int(f) for f in widths]
    last, out = len(widths) - 2, list[tuple[str, int]]()
    declared = [p for p in params if not p.bias]
    state: dict[str, Any] = {}
    for layer, f_in in enumerate(widths[:-1]):
        ws = [EvalWeight(p.shape, reduction(p, widths)) for p in declared if p.layer == layer]
        kind.forward(EvalTrace(layer, layer == last, state, out), Shape(f_in, layer > 0), ws)
    return out


def eval_bytes(
    params: Sequence[Param], widths: Sequence[int], kind: Layer, num_nodes: int, ranks: int,
    itemsize: int,
) -> float:
    """Bytes one model-parallel evaluation of the global model records, summed over ranks.

    The layer's forward traced on shapes (:func:`eval_reductions`). A partial product
    reduce-scattered by column blocks: every rank receives all but its own block, ``(P -
    1) N f`` entries in all (in row chunks, which changes nothing); one all-reduced whole
    (the logits, a width no sub-network splits): ``2 m (P - 1) / P`` per rank; a hidden
    attention's partial score terms (``N x 2K``: a head's units may lie on several ranks)
    all-reduced likewise. Each all-reduce is rounded per rank as
    :class:`~hpcgnn.comm.Comm` records it (:func:`~hpcgnn.cost.estimate.allreduce_share`).
    The weights never travel.

    Parameters
    ----------
    params
        The model's parameters (:func:`~hpcgnn.layout.subnets.model_params`).
    widths
        Global widths ``f_0 .. f_L``.
    kind
        The layer.
    num_nodes
        ``N``.
    ranks
        ``P`` (the shards' owners).
    itemsize
        Bytes per entry.
    """
    total = 0.0
    for how, cols in eval_reductions(params, widths, kind):
        m = itemsize * num_nodes * cols
        total += float(m * (ranks - 1) if how == SCATTER else ranks * allreduce_share(m, ranks))
    return float(total)


def memory_bytes(
    shapes: Sequence[tuple[int, ...]], sub_shapes: Sequence[tuple[int, ...]], num_nodes: int,
    num_edges: int, ranks: int, itemsize: int, heads: int = 0,
) -> float:
    """Bytes a rank holds for GIST beyond its group's sub-model training (rough upper bound).

    - its rows of the global weights (``shapes``: the row-sharded ones) and their two Adam
      moments (the largest shard);
    - the sub-model exchange: the pieces sent, received and packed, each the weight and
      two moments of a sub-model (``sub_shapes``, the widest group's) at most;
    - the model-parallel evaluation: the whole ``Â^T`` as 64-bit-index CSR (loaded twice
      over while it is normalised), the layer input and output column blocks over all
      ``N`` vertices, one row chunk of partial products and the ``N x f`` logits (``f``:
      the widest weight's columns).

    With attention (``heads``: the most heads of a layer): the evaluation's edge pattern
    (six 64-bit indices per edge) and, per edge and head, the scores, coefficients and the
    ones used; the ``N x 2K`` score terms.
    """
    shard = sum(-(-int(r) // ranks) * int(c) for r, c in shapes)
    sub = sum(int(r) * int(c) for r, c in sub_shapes)
    widest = max(int(n) for s in shapes for n in s)
    block = -(-widest // ranks)
    chunk = -(-num_nodes // ranks) * widest
    dense = num_nodes * (3 * block + 2 * max(int(c) for _, c in shapes)) + 2 * chunk
    csr = 2 * 20 * (num_edges + num_nodes)
    weights = len(PARAM_KINDS) * (shard + 3 * sub)
    if heads:
        csr += 6 * 8 * (num_edges + num_nodes)
        dense += heads * (3 * (num_edges + num_nodes) + 2 * num_nodes)
    return float(itemsize * (weights + dense) + csr)
