"""Counter-based randomness: the same numbers for a matrix entry whoever computes it.

Distributed training must reproduce the serial run exactly, so every random number is a
pure function of (seed, purpose, global row, global column). A rank that owns any block
of a matrix (block rows in 1D, a 2D tile in 2D/3D) generates exactly the entries of the
serial run for that block, with no communication and no wasted draws.
"""

from __future__ import annotations

import numpy as np

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


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


def uniform_block(
    key: np.uint64, rows: tuple[int, int], cols: tuple[int, int], num_cols: int
) -> np.ndarray:
    """Uniform [0, 1) float64 numbers for rows ``[r0, r1)`` x columns ``[c0, c1)``.

    Entry ``(i, j)`` of the global ``? x num_cols`` matrix is a function of
    ``(key, i * num_cols + j)`` only.
    """
    r = np.arange(rows[0], rows[1], dtype=np.uint64)[:, None]
    c = np.arange(cols[0], cols[1], dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        counter = r * np.uint64(num_cols) + c
        bits = _splitmix64(counter ^ key) if counter.size else counter
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def dropout_keep(
    seed: int, epoch: int, layer: int, rows: tuple[int, int], cols: tuple[int, int],
    num_cols: int, p: float,
) -> np.ndarray:
    """Boolean keep-mask of dropout with drop probability ``p`` for one block of a layer input."""
    key = stream_key(seed, 0xD50, epoch, layer)
    return uniform_block(key, rows, cols, num_cols) >= p
