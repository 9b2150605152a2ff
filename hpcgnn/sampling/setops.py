"""Sort-based set operations on integer id arrays.

NumPy 2's ``np.unique`` hashes, which is slow on the large, mostly sorted key arrays of a
bulk (frontier ids, draws grouped by row); a stable sort (timsort: linear on sorted
runs) followed by adjacent comparison is several times faster there.
"""

from __future__ import annotations

import numpy as np


def _first_flags(s: np.ndarray) -> np.ndarray:
    flags = np.empty(len(s), dtype=bool)
    if len(s):
        flags[0] = True
        np.not_equal(s[1:], s[:-1], out=flags[1:])
    return flags


def unique(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values of ``x``."""
    s = np.sort(np.asarray(x), kind="stable")
    return s[_first_flags(s)]


def unique_inverse(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values of ``x`` and the position of each element of ``x`` among them."""
    x = np.asarray(x)
    order = np.argsort(x, kind="stable")
    s = x[order]
    flags = _first_flags(s)
    inverse = np.empty(len(x), dtype=np.int64)
    inverse[order] = np.cumsum(flags) - 1
    return s[flags], inverse


def contains(sorted_set: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Boolean mask: which elements of ``x`` are in the sorted array ``sorted_set``."""
    x = np.asarray(x)
    if len(sorted_set) == 0:
        return np.zeros(len(x), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_set, x), len(sorted_set) - 1)
    return sorted_set[pos] == x
