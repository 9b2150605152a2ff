"""CAGNET's closed-form communication volumes, as the paper states them (pure).

Tripathy et al. give, per process and epoch, the bandwidth term of each algorithm in words
(``docs/communication.md``, "The paper's formulas beside ours"). With layer widths
``f^0 .. f^L``, ``n`` vertices and ``nnz`` the nonzeros of ``A`` with self loops:

- 1D: ``sum_l (n f^{l-1} + n f^l + f^{l-1} f^l)`` (the forward broadcasts of ``H^{l-1}``,
  the backward's of ``G^l``, the ``f x f`` weight-gradient all-reduce);
- 1.5D on ``P/c x c``: ``sum_l ((n f^{l-1} + n f^l) (1/c + c/P) + f^{l-1} f^l)``;
- 2D on ``sqrt(P) x sqrt(P)``: ``sum_l (4 n (f^{l-1} + f^l) / sqrt(P) + 2 nnz / sqrt(P) +
  f^{l-1} f^l)`` (the paper's ``L (8 n f / sqrt(P) + 2 nnz / sqrt(P) + f^2)``);
- 3D on ``P^{1/3}`` cubed: ``sum_l (6 n (f^{l-1} + f^l) + 2 nnz) / P^{2/3}`` (its
  ``L (2 nnz / P^{2/3} + 12 n f / P^{2/3})``).

The paper writes one width ``f`` for every layer; the sums take each layer's input and
output widths where its derivation moves them. 2D and 3D assume a square and a cubic grid:
other grids are evaluated with the same ``sqrt(P)`` and ``P^{1/3}``, as the paper would.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: The algorithms the paper gives closed forms for.
PAPER_ALGORITHMS = ("1d", "1.5d", "2d", "3d")


def paper_words(
    algo: str, dims: Sequence[int], n: int, nnz: int, widths: Sequence[int]
) -> float:
    """Words one process moves per epoch by the paper's formula for ``algo``.

    Parameters
    ----------
    algo
        One of :data:`PAPER_ALGORITHMS`.
    dims
        The grid (``(P,)``, ``(P/c, c)``, ``(Pr, Pc)`` or ``(Pr, Pc, Pl)``).
    n, nnz
        Vertices, and nonzeros of ``A`` with self loops.
    widths
        ``f^0 .. f^L``.
    """
    p = math.prod(dims)
    pairs = list(zip(widths[:-1], widths[1:], strict=True))
    weights = sum(a * b for a, b in pairs)
    dense = sum(n * (a + b) for a, b in pairs)
    layers = len(pairs)
    if algo == "1d":
        return float(dense + weights)
    if algo == "1.5d":
        c = dims[1]
        return dense * (1 / c + c / p) + weights
    if algo == "2d":
        return (4 * dense + 2 * nnz * layers) / math.sqrt(p) + weights
    if algo == "3d":
        return (6 * dense + 2 * nnz * layers) / p ** (2 / 3)
    raise ValueError(f"the paper gives no closed form for {algo!r}")
