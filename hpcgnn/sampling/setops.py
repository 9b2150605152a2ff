"""Sort-based set operations on integer id arrays (NumPy arrays or device tensors).

NumPy 2's ``np.unique`` hashes, which is slow on the large, mostly sorted key arrays of a
bulk (frontier ids, draws grouped by row); a stable sort (timsort: linear on sorted
runs) followed by adjacent comparison is several times faster there. On a device the
same steps are torch's sort and comparisons (:mod:`hpcgnn.sampling.arrays`).
"""

from __future__ import annotations

from hpcgnn.sampling.arrays import Array, HostOps, ops


def run_starts(xp: HostOps, s: Array) -> Array:
    """Boolean mask of the first element of each run of equal values of ``s``."""
    flags = xp.zeros(len(s), "bool")
    if len(s):
        flags[0] = True
        flags[1:] = s[1:] != s[:-1]
    return flags


def unique(x: Array) -> Array:
    """Sorted distinct values of ``x``."""
    xp = ops(x)
    s = xp.sort(x)
    return s[run_starts(xp, s)]


def unique_inverse(x: Array) -> tuple[Array, Array]:
    """Sorted distinct values of ``x`` and the position of each element of ``x`` among them."""
    xp = ops(x)
    order = xp.argsort(x)
    s = x[order]
    flags = run_starts(xp, s)
    inverse = xp.zeros(len(x))
    inverse[order] = xp.cumsum(flags) - 1
    return s[flags], inverse


def contains(sorted_set: Array, x: Array) -> Array:
    """Boolean mask: which elements of ``x`` are in the sorted array ``sorted_set``."""
    xp = ops(x)
    if len(sorted_set) == 0:
        return xp.zeros(len(x), "bool")
    pos = xp.minimum(xp.searchsorted(sorted_set, x), len(sorted_set) - 1)
    return sorted_set[pos] == x
