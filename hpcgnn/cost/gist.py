"""Bytes of GIST: the sub-model traffic of a round, and what data parallelism would move.

Counted as :class:`hpcgnn.comm.Comm` records them (bytes received, summed over ranks):

- scatter: each group root receives its sub-model's entries from their owners, except
  the ones it owns itself, then broadcasts the whole sub-model to the other
  ``P/M - 1`` ranks of its group;
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

import numpy as np

from hpcgnn.cost.estimate import allreduce_share
from hpcgnn.layout.order import weight_entries
from hpcgnn.layout.subnets import PARAM_KINDS, Subnet


def round_bytes(
    nets: Sequence[Subnet], offsets: list[np.ndarray], roots: Sequence[int], group_size: int,
    itemsize: int, per_layer: int = 1,
) -> dict[str, float]:
    """Bytes of one round's ``gist_scatter`` and ``gist_gather``, summed over ranks.

    Parameters
    ----------
    nets
        The round's sub-networks.
    offsets
        Row offsets of every weight's shards over the ranks.
    roots
        World rank of each sub-network's group root.
    group_size
        Ranks per group, ``P / M``.
    itemsize
        Bytes per entry.
    per_layer
        Weights per layer (GraphSAGE: ``W_self`` and ``W_neigh``, split alike).
    """
    per_entry = len(PARAM_KINDS) * itemsize * per_layer
    fetched = sum(n.numel() - n.owned_numel(offsets, r) for n, r in zip(nets, roots, strict=True))
    spread = sum(n.numel() for n in nets) * (group_size - 1)
    return {
        "gist_scatter": float(per_entry * (fetched + spread)),
        "gist_gather": float(per_entry * fetched),
    }


def bias_bytes(sizes: Sequence[int], ranks: int, itemsize: int) -> float:
    """Bytes of one round's replicated-vector all-reduce, summed over ranks.

    ``sizes``: the entries of each replicated vector. The sampled models' biases
    (``--sampler``, ``gist_bias``: ``f_1, .., f_L``, for GIN too) or GAT's score vectors
    (``gist_attention``: two of each width of its weight chain, ``f_1, f_1, .., K' f_L,
    K' f_L``) travel as the weight and two moments, all-reduced over ``ranks`` ranks:
    ``2 m (p - 1) / p`` per rank (rounded as :class:`~hpcgnn.comm.Comm` records it,
    :func:`~hpcgnn.cost.estimate.allreduce_share`).
    """
    m = len(PARAM_KINDS) * itemsize * sum(int(f) for f in sizes)
    return float(ranks * allreduce_share(m, ranks))


def data_parallel_bytes(
    widths: Sequence[int], ranks: int, itemsize: int, steps: int, per_layer: int = 1,
    vectors: int = 0,
) -> float:
    """Bytes ``steps`` all-reduces of the whole model's gradients move over ``ranks`` ranks.

    What ordinary data-parallel training of the global model would record instead of the
    sub-model traffic (``2 m (p - 1) / p`` per rank, summed over ranks); ``per_layer``
    weights per layer (``widths``: the weight chain), and ``vectors`` entries of
    replicated vectors (the sampled models' biases, GAT's ``a_src, a_dst``).
    """
    m = weight_entries(widths) * per_layer + vectors
    return float(steps * 2 * m * itemsize * (ranks - 1))


def eval_bytes(
    widths: Sequence[int], num_nodes: int, ranks: int, itemsize: int, heads: int = 0
) -> float:
    """Bytes one model-parallel evaluation of the global model records, summed over ranks.

    Hidden layer ``l`` reduce-scatters the ``N x f_l`` partial products by column blocks:
    every rank receives all but its own block, ``(P - 1) N f_l`` entries in all (in row
    chunks, which changes nothing); the output layer all-reduces ``N x f_L`` partial
    logits, ``2 m (P - 1) / P`` per rank. The weights never travel. GraphSAGE's self
    term is added to the partial products before they are reduced: the same bytes.

    GAT (``widths`` its weight chain, ``f_L`` the output layer's ``K' C`` columns;
    ``heads``: ``K`` of its hidden layers): each hidden layer also all-reduces the partial
    score terms ``s_src, s_dst`` of its ``K`` heads (``N x 2K``: a head's units may lie on
    several ranks), ``4 K N (P - 1)`` entries. Each all-reduce is rounded per rank as
    :class:`~hpcgnn.comm.Comm` records it (:func:`~hpcgnn.cost.estimate.allreduce_share`).

    Parameters
    ----------
    widths
        Global widths ``f_0 .. f_L``.
    num_nodes
        ``N``.
    ranks
        ``P`` (the shards' owners).
    itemsize
        Bytes per entry.
    heads
        GAT: ``K``, the heads of each hidden layer (0: no attention).
    """
    hidden = sum(int(f) for f in widths[1:-1])
    reduced = itemsize * num_nodes * (ranks - 1) * hidden
    logits = ranks * allreduce_share(itemsize * num_nodes * int(widths[-1]), ranks)
    scores = ranks * allreduce_share(itemsize * num_nodes * 2 * heads, ranks) * (len(widths) - 2)
    return float(reduced + logits + (scores if heads else 0.0))


def memory_bytes(
    widths: Sequence[int], sub_widths: Sequence[int], num_nodes: int, num_edges: int,
    ranks: int, itemsize: int, per_layer: int = 1, heads: int = 0,
) -> float:
    """Bytes a rank holds for GIST beyond its group's sub-model training (rough upper bound).

    - its rows of the global weights and their two Adam moments (the largest shard);
    - the sub-model exchange: the pieces sent, received and packed, each the weight and
      two moments of a sub-model (``sub_widths``, the widest group's) at most;
    - the model-parallel evaluation: the whole ``Â^T`` as 64-bit-index CSR (loaded twice
      over while it is normalised), the layer input and output column blocks over all
      ``N`` vertices, one row chunk of partial products and the ``N x f_L`` logits.

    ``per_layer`` weights per layer (GraphSAGE: two of each shape). GAT (``heads``: the
    most heads of a layer): the evaluation's edge pattern (six 64-bit indices per edge)
    and, per edge and head, the scores, coefficients and the ones used; the ``N x 2K``
    score terms.
    """
    sizes = list(zip(widths[:-1], widths[1:], strict=True))
    shard = sum(-(-int(a) // ranks) * int(b) for a, b in sizes)
    sub = weight_entries(list(sub_widths))
    block = max(-(-int(f) // ranks) for f in widths)
    chunk = -(-num_nodes // ranks) * max(int(f) for f in widths)
    dense = num_nodes * (3 * block + 2 * int(widths[-1])) + 2 * chunk
    csr = 2 * 20 * (num_edges + num_nodes)
    weights = len(PARAM_KINDS) * per_layer * (shard + 3 * sub)
    if heads:
        csr += 6 * 8 * (num_edges + num_nodes)
        dense += heads * (3 * (num_edges + num_nodes) + 2 * num_nodes)
    return float(itemsize * (weights + dense) + csr)
