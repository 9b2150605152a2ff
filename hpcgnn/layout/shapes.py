"""Which process-grid shapes each algorithm admits, and the automatic choice for any P.

Pure functions of integers (no MPI), so ``hpcgnn model`` can reason about P = 1024 on a
laptop. Grids are enumerated from the divisors of ``P`` (found in ``O(sqrt P)``), so even
``P`` = :data:`MAX_PROCS` costs little.

Conventions
-----------
- ``1d``: ``(P,)``.
- ``1.5d``: ``(P/c, c)`` for a replication factor ``c`` dividing ``P``. Process row ``i``
  holds block row ``i`` of the matrices, replicated over the ``c`` processes of the row.
- ``2d``: ``(Pr, Pc)`` with ``Pr * Pc = P``; any rectangle.
- ``3d``: ``(Pr, Pc, Pl)`` with ``Pr * Pc * Pl = P``. The automatic choice needs every
  dimension >= 2 (otherwise the grid is a 2D grid); an explicit ``--grid`` may use 1s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hpcgnn.errors import GridError

KINDS = ("1d", "1.5d", "2d", "3d")
#: The largest process count ``hpcgnn model`` reasons about (about a million ranks).
MAX_PROCS = 2**20
_NDIMS = {"1d": 1, "1.5d": 2, "2d": 2, "3d": 3}


@dataclass(frozen=True)
class GridShape:
    """A validated grid: its kind and the size of each dimension."""

    kind: str
    dims: tuple[int, ...]

    @property
    def size(self) -> int:
        """Number of processes."""
        return math.prod(self.dims)

    @property
    def replication(self) -> int:
        """The 1.5D replication factor ``c`` (1 for the other kinds)."""
        return self.dims[1] if self.kind == "1.5d" else 1

    def __str__(self) -> str:
        return "x".join(str(d) for d in self.dims)


def parse_grid(text: str) -> tuple[int, ...]:
    """Parse ``"4"``, ``"2x3"`` or ``"2x2x2"`` into a tuple of positive ints."""
    try:
        dims = tuple(int(t) for t in text.lower().split("x"))
    except ValueError:
        raise GridError(f"cannot parse grid '{text}': expected e.g. 4, 2x3 or 2x2x2") from None
    if not dims or any(d < 1 for d in dims):
        raise GridError(f"grid '{text}' must have positive dimensions")
    return dims


def divisors(p: int) -> list[int]:
    """The divisors of ``p >= 1`` in increasing order (trial division up to ``sqrt p``)."""
    small = [d for d in range(1, math.isqrt(p) + 1) if p % d == 0]
    return small + [p // d for d in reversed(small) if d * d != p]


def factorizations(p: int, ndims: int) -> list[tuple[int, ...]]:
    """All ordered tuples of ``ndims`` positive ints whose product is ``p``."""
    if ndims == 1:
        return [(p,)]
    return [(d, *rest) for d in divisors(p) for rest in factorizations(p // d, ndims - 1)]


def admissible_shapes(kind: str, p: int) -> list[GridShape]:
    """Every grid shape of ``kind`` that an explicit ``--grid`` may request on ``p`` ranks."""
    _check_kind(kind)
    return [GridShape(kind, dims) for dims in factorizations(p, _NDIMS[kind])]


def _most_balanced(cands: list[tuple[int, ...]]) -> tuple[int, ...]:
    # Closest to a square/cube; ties go to more rows (taller grids, as MPI_Dims_create does).
    return min(cands, key=lambda d: (max(d) / min(d), tuple(-x for x in d)))


def default_replication(p: int) -> int:
    """Default 1.5D replication: the largest divisor ``c`` of ``p`` with ``c * c <= p``."""
    return max(c for c in divisors(p) if c * c <= p)


def choose_shape(
    kind: str, p: int, grid: str | tuple[int, ...] | None = None, replication: int | None = None
) -> GridShape:
    """Validate an explicit grid or choose one automatically.

    Parameters
    ----------
    kind
        ``"1d"``, ``"1.5d"``, ``"2d"`` or ``"3d"``.
    p
        Number of processes.
    grid
        Explicit shape (``"2x3"`` or a tuple) or ``None`` for the automatic choice.
    replication
        1.5D replication factor ``c``; must agree with ``grid`` when both are given.

    Raises
    ------
    GridError
        With a one-line explanation when the request cannot fit ``p`` processes.
    """
    _check_kind(kind)
    if p < 1:
        raise GridError(f"need at least one process, got {p}")
    if replication is not None and kind != "1.5d":
        raise GridError(f"--replication applies to the 1.5d algorithm, not {kind}")
    ndims = _NDIMS[kind]
    if grid is not None:
        dims = parse_grid(grid) if isinstance(grid, str) else tuple(int(d) for d in grid)
        if kind == "1d" and len(dims) == 1:
            pass
        elif len(dims) != ndims:
            raise GridError(
                f"{kind} needs a grid with {ndims} dimensions, got {'x'.join(map(str, dims))}"
            )
        if math.prod(dims) != p:
            raise GridError(
                f"grid {'x'.join(map(str, dims))} has {math.prod(dims)} processes"
                f" but {p} are running"
            )
        if kind == "1.5d" and replication is not None and dims[1] != replication:
            raise GridError(f"grid {dims[0]}x{dims[1]} disagrees with --replication {replication}")
        return GridShape(kind, dims)
    if kind == "1d":
        return GridShape(kind, (p,))
    if kind == "1.5d":
        c = default_replication(p) if replication is None else replication
        if c < 1 or p % c != 0:
            raise GridError(
                f"1.5d replication {c} does not divide {p} processes "
                f"(valid: {', '.join(map(str, divisors(p)))})"
            )
        return GridShape(kind, (p // c, c))
    if kind == "2d":
        return GridShape(kind, _most_balanced(factorizations(p, 2)))
    if p == 1:
        return GridShape(kind, (1, 1, 1))
    cands = [d for d in factorizations(p, 3) if min(d) >= 2]
    if not cands:
        raise GridError(
            f"no 3d grid with every dimension >= 2 exists for {p} processes "
            f"(use 8, 12, 16, ... processes, or pass --grid PrxPcxPl explicitly)"
        )
    return GridShape(kind, _most_balanced(cands))


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise GridError(f"unknown grid kind '{kind}' (choose from {', '.join(KINDS)})")
