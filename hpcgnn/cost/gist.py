"""Bytes of GIST: the sub-model traffic of a round, and what data parallelism would move.

Counted as :class:`hpcgnn.comm.Comm` records them (bytes received, summed over ranks):

- scatter: each group root receives its sub-model's entries from their owners, except
  the ones it owns itself, then broadcasts the whole sub-model to the other
  ``P/M - 1`` ranks of its group;
- gather: the owners receive the trained entries back from the roots (again except a
  root's own).

Each entry travels as the weight and Adam's two moments (:data:`KINDS`), so the
optimiser state survives the round trip; with ``M = 1, K = 1`` GIST is ordinary
full-batch training step for step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hpcgnn.layout.order import weight_entries
from hpcgnn.layout.subnets import Subnet

#: What travels per weight entry: the weight and Adam's two moments.
KINDS = ("weight", "exp_avg", "exp_avg_sq")


def round_bytes(
    nets: Sequence[Subnet], offsets: list[np.ndarray], roots: Sequence[int], group_size: int,
    itemsize: int,
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
    """
    per_entry = len(KINDS) * itemsize
    fetched = sum(n.numel() - n.owned_numel(offsets, r) for n, r in zip(nets, roots, strict=True))
    spread = sum(n.numel() for n in nets) * (group_size - 1)
    return {
        "gist_scatter": float(per_entry * (fetched + spread)),
        "gist_gather": float(per_entry * fetched),
    }


def data_parallel_bytes(widths: Sequence[int], ranks: int, itemsize: int, steps: int) -> float:
    """Bytes ``steps`` all-reduces of the whole model's gradients move over ``ranks`` ranks.

    What ordinary data-parallel training of the global model would record instead of the
    sub-model traffic (``2 m (p - 1) / p`` per rank, summed over ranks).
    """
    return float(steps * 2 * weight_entries(widths) * itemsize * (ranks - 1))
