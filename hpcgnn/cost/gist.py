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


def bias_bytes(widths: Sequence[int], ranks: int, itemsize: int) -> float:
    """Bytes of one round's ``gist_bias`` all-reduce, summed over ranks (``--sampler``).

    The biases of every layer (``f_1 + .. + f_L`` entries) travel as the weight and two
    moments, all-reduced over ``ranks`` ranks: ``2 m (p - 1) / p`` per rank.
    """
    m = len(PARAM_KINDS) * itemsize * sum(int(f) for f in widths[1:])
    return float(2 * m * (ranks - 1))


def data_parallel_bytes(
    widths: Sequence[int], ranks: int, itemsize: int, steps: int, per_layer: int = 1,
    biases: bool = False,
) -> float:
    """Bytes ``steps`` all-reduces of the whole model's gradients move over ``ranks`` ranks.

    What ordinary data-parallel training of the global model would record instead of the
    sub-model traffic (``2 m (p - 1) / p`` per rank, summed over ranks); ``per_layer``
    weights per layer, and a bias per layer with ``biases`` (the sampled models).
    """
    m = weight_entries(widths) * per_layer + (sum(int(f) for f in widths[1:]) if biases else 0)
    return float(steps * 2 * m * itemsize * (ranks - 1))


def eval_bytes(widths: Sequence[int], num_nodes: int, ranks: int, itemsize: int) -> float:
    """Bytes one model-parallel evaluation of the global model records, summed over ranks.

    Hidden layer ``l`` reduce-scatters the ``N x f_l`` partial products by column blocks:
    every rank receives all but its own block, ``(P - 1) N f_l`` entries in all (in row
    chunks, which changes nothing); the output layer all-reduces ``N x f_L`` partial
    logits, ``2 m (P - 1) / P`` per rank. The weights never travel. GraphSAGE's self
    term is added to the partial products before they are reduced: the same bytes.

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
    """
    hidden = sum(int(f) for f in widths[1:-1])
    return float(itemsize * num_nodes * (ranks - 1) * (hidden + 2 * int(widths[-1])))


def memory_bytes(
    widths: Sequence[int], sub_widths: Sequence[int], num_nodes: int, num_edges: int,
    ranks: int, itemsize: int, per_layer: int = 1,
) -> float:
    """Bytes a rank holds for GIST beyond its group's sub-model training (rough upper bound).

    - its rows of the global weights and their two Adam moments (the largest shard);
    - the sub-model exchange: the pieces sent, received and packed, each the weight and
      two moments of a sub-model (``sub_widths``, the widest group's) at most;
    - the model-parallel evaluation: the whole ``Â^T`` as 64-bit-index CSR (loaded twice
      over while it is normalised), the layer input and output column blocks over all
      ``N`` vertices, one row chunk of partial products and the ``N x f_L`` logits.

    ``per_layer`` weights per layer (GraphSAGE: two of each shape).
    """
    sizes = list(zip(widths[:-1], widths[1:], strict=True))
    shard = sum(-(-int(a) // ranks) * int(b) for a, b in sizes)
    sub = weight_entries(list(sub_widths))
    block = max(-(-int(f) // ranks) for f in widths)
    chunk = -(-num_nodes // ranks) * max(int(f) for f in widths)
    dense = num_nodes * (3 * block + 2 * int(widths[-1])) + 2 * chunk
    csr = 2 * 20 * (num_edges + num_nodes)
    weights = len(PARAM_KINDS) * per_layer * (shard + 3 * sub)
    return float(itemsize * (weights + dense) + csr)
