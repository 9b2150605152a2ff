"""Counter-based randomness: the same numbers for a matrix entry whoever computes it.

Distributed training must reproduce the serial run exactly, so every random number is a
pure function of (seed, purpose, global row, global column). A rank that owns any block
of a matrix (block rows in 1D, a 2D tile in 2D/3D) generates exactly the entries of the
serial run for that block, with no communication and no wasted draws.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser (Steele et al.), vectorised over uint64 arrays."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def stream_key(seed: int, *purpose: int) -> np.uint64:
    """Derive a 64-bit key from a seed and integers naming the purpose (epoch, layer...)."""
    key = np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64)
    for p in purpose:
        key = _splitmix64(key ^ np.uint64(p & 0xFFFFFFFFFFFFFFFF))
    return key[0]


#: Rows per independently seeded chunk of a random matrix (part of the reproducibility
#: contract: changing it changes every random number).
CHUNK_ROWS = 1024


def _chunks(
    key: np.uint64, rows: tuple[int, int], cols: tuple[int, int], num_cols: int
) -> Iterator[tuple[slice, np.ndarray]]:
    """Yield ``(rows of the block, draws for them)`` chunk by chunk."""
    r0, r1 = rows
    c0, c1 = cols
    k = int(key)
    for chunk in range(r0 // CHUNK_ROWS, (r1 - 1) // CHUNK_ROWS + 1):
        seed = np.random.SeedSequence([k & 0xFFFFFFFF, k >> 32, chunk])
        draws = np.random.Generator(np.random.SFC64(seed)).random((CHUNK_ROWS, num_cols))
        lo = max(r0, chunk * CHUNK_ROWS)
        hi = min(r1, (chunk + 1) * CHUNK_ROWS)
        base = chunk * CHUNK_ROWS
        yield slice(lo - r0, hi - r0), draws[lo - base : hi - base, c0:c1]


def uniform_block(
    key: np.uint64, rows: tuple[int, int], cols: tuple[int, int], num_cols: int
) -> np.ndarray:
    """Uniform [0, 1) float64 numbers for rows ``[r0, r1)`` x columns ``[c0, c1)``.

    The global ``? x num_cols`` matrix is cut into chunks of :data:`CHUNK_ROWS` rows;
    chunk ``k`` is drawn from an SFC64 generator seeded by ``(key, k)``. A rank that owns
    any block generates only the chunks overlapping its rows, so every entry equals the
    serial run's whatever the distribution.
    """
    out = np.empty((max(0, rows[1] - rows[0]), max(0, cols[1] - cols[0])), dtype=np.float64)
    if out.size:
        for dest, draws in _chunks(key, rows, cols, num_cols):
            out[dest] = draws
    return out


def dropout_keep(
    seed: int,
    epoch: int,
    layer: int,
    rows: tuple[int, int],
    cols: tuple[int, int],
    num_cols: int,
    p: float,
) -> np.ndarray:
    """Boolean keep-mask of dropout with drop probability ``p`` for one block of a layer input.

    Equal to ``uniform_block(...) >= p`` for the key of ``(seed, epoch, layer)``.
    """
    key = stream_key(seed, 0xD50, epoch, layer)
    out = np.empty((max(0, rows[1] - rows[0]), max(0, cols[1] - cols[0])), dtype=bool)
    if out.size:
        for dest, draws in _chunks(key, rows, cols, num_cols):
            np.greater_equal(draws, p, out=out[dest])
    return out
