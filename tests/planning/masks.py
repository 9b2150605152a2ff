"""Test helpers: relations written as per-vertex bit masks of destination ranks."""

import numpy as np

from hpcgnn.planning.relation import Relation, relation_from_pairs


def mask_to_ranks(mask: int) -> tuple[int, ...]:
    """Ranks set in a bit mask, ascending."""
    return tuple(r for r in range(int(mask).bit_length()) if mask >> r & 1)


def relation_from_masks(offsets, masks) -> Relation:
    """A :class:`Relation` whose ``D_u`` is the bit set ``masks[u]`` (own rank dropped)."""
    pairs = [(u, r) for u, m in enumerate(masks) for r in mask_to_ranks(int(m))]
    v, r = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True)) if pairs else (
        np.zeros(0, np.int64), np.zeros(0, np.int64))
    return relation_from_pairs(offsets, v, r, len(masks))
