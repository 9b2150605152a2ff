"""Counter-based randomness: the same numbers for a matrix entry whoever computes it.

Distributed training must reproduce the serial run exactly, so every random number is a
pure function of (seed, purpose, global row, global column). A rank that owns any block
of a matrix (block rows in 1D, a 2D tile in 2D/3D, a subset of columns in GIST) generates
exactly the entries of the serial run for that block, with no communication and no wasted
draws. One mixer serves everything: the SplitMix64 finaliser (Steele et al.), vectorised
over ``uint64`` arrays.

Two kinds of streams are derived from it:

- *block streams* (:func:`uniform_block`, :func:`dropout_keep`): a ``? x num_cols``
  matrix cut into chunks of :data:`CHUNK_ROWS` rows, chunk ``k`` drawn by an SFC64
  generator keyed by ``(key, k)``; used for full-batch dropout masks;
- *hash streams* (:func:`uniform_rows`, :func:`chain`): every entry a hash of its
  counter, for arbitrary row-id sets (sampling, minibatch dropout).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK64 = 0xFFFFFFFFFFFFFFFF

#: Purpose words of the streams (the first word after the seed).
TAG_DROPOUT_BLOCK = 0xD50  # full-batch dropout masks
TAG_PERMUTATION = 0xBA7C4  # minibatch shuffles
TAG_SAGE = 0x5A6E  # GraphSAGE draws
TAG_LADIES = 0x1AD1E5  # LADIES draws
TAG_DROPOUT = 0xD50B  # minibatch dropout masks
TAG_GIST = 0x6157  # GIST partitions of the hidden dimensions

#: Rows per independently seeded chunk of a block stream (part of the reproducibility
#: contract: changing it changes every random number).
CHUNK_ROWS = 1024

#: Columns of a block: a range ``(c0, c1)`` or an array of column indices.
Columns = tuple[int, int] | np.ndarray


def mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of every element of a ``uint64`` array (a bijective hash)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def chain(key: np.uint64 | np.ndarray, *words: int | np.ndarray) -> np.ndarray:
    """Fold integers (scalars or arrays, broadcast together) into a key: ``mix(key ^ w)``."""
    out = np.asarray(key, dtype=np.uint64)
    for w in words:
        out = mix(out ^ np.asarray(w).astype(np.int64).astype(np.uint64))
    return out


def stream_key(seed: int, *purpose: int) -> np.uint64:
    """Derive a 64-bit key from a seed and integers naming the purpose (epoch, layer...)."""
    key = np.array([seed & _MASK64], dtype=np.uint64)
    for p in purpose:
        key = mix(key ^ np.uint64(p & _MASK64))
    return key[0]


def to_uniform(bits: np.ndarray) -> np.ndarray:
    """Map 64-bit hashes to float64 uniforms in ``[0, 1)`` (the top 53 bits)."""
    return (np.asarray(bits, dtype=np.uint64) >> np.uint64(11)).astype(np.float64) * (
        1.0 / (1 << 53)
    )


def uniform_rows(
    key: np.uint64, row_ids: np.ndarray, width: int, cols: np.ndarray | None = None
) -> np.ndarray:
    """Uniforms for a ``len(row_ids) x width`` block; entry ``(v, j)`` hashes ``v * width + j``.

    ``cols``: only these columns of the ``width`` (default: all), e.g. a GIST
    sub-network's, whose draws are then the whole block's at those columns.
    """
    r = np.asarray(row_ids, dtype=np.uint64)[:, None]
    c = np.arange(width, dtype=np.uint64) if cols is None else np.asarray(cols, dtype=np.uint64)
    c = c[None, :]
    with np.errstate(over="ignore"):
        counter = r * np.uint64(width) + c
    return to_uniform(mix(counter ^ np.uint64(key)))


def _column_selector(cols: Columns) -> tuple[slice | np.ndarray, int]:
    if isinstance(cols, tuple):
        c0, c1 = cols
        return slice(c0, c1), max(0, c1 - c0)
    idx = np.asarray(cols, dtype=np.int64)
    return idx, len(idx)


def chunk_seed(key: np.uint64, chunk: int) -> np.random.SeedSequence:
    """Seed of the SFC64 generator of chunk ``chunk`` of the block stream keyed ``key``."""
    k = int(key)
    return np.random.SeedSequence([k & 0xFFFFFFFF, k >> 32, chunk])


def _chunks(
    key: np.uint64, rows: tuple[int, int], cols: slice | np.ndarray, num_cols: int
) -> Iterator[tuple[slice, np.ndarray]]:
    """Yield ``(rows of the block, draws for them)`` chunk by chunk."""
    r0, r1 = rows
    for chunk in range(r0 // CHUNK_ROWS, (r1 - 1) // CHUNK_ROWS + 1):
        draws = np.random.Generator(np.random.SFC64(chunk_seed(key, chunk))).random(
            (CHUNK_ROWS, num_cols)
        )
        lo = max(r0, chunk * CHUNK_ROWS)
        hi = min(r1, (chunk + 1) * CHUNK_ROWS)
        base = chunk * CHUNK_ROWS
        yield slice(lo - r0, hi - r0), draws[lo - base : hi - base, cols]


def uniform_block(
    key: np.uint64, rows: tuple[int, int], cols: Columns, num_cols: int
) -> np.ndarray:
    """Uniform [0, 1) float64 numbers for rows ``[r0, r1)`` x columns ``cols``.

    The global ``? x num_cols`` matrix is cut into chunks of :data:`CHUNK_ROWS` rows;
    chunk ``k`` is drawn from an SFC64 generator seeded by ``(key, k)``. A rank that owns
    any block generates only the chunks overlapping its rows, so every entry equals the
    serial run's whatever the distribution. ``cols`` is a range ``(c0, c1)`` or an array
    of global column indices (any subset, in any order).
    """
    sel, width = _column_selector(cols)
    out = np.empty((max(0, rows[1] - rows[0]), width), dtype=np.float64)
    if out.size:
        for dest, draws in _chunks(key, rows, sel, num_cols):
            out[dest] = draws
    return out


def dropout_keep(
    seed: int,
    epoch: int,
    layer: int,
    rows: tuple[int, int],
    cols: Columns,
    num_cols: int,
    p: float,
) -> np.ndarray:
    """Boolean keep-mask of dropout with drop probability ``p`` for one block of a layer input.

    Equal to ``uniform_block(...) >= p`` for the key of ``(seed, epoch, layer)``; ``cols``
    as for :func:`uniform_block`.
    """
    key = stream_key(seed, TAG_DROPOUT_BLOCK, epoch, layer)
    sel, width = _column_selector(cols)
    out = np.empty((max(0, rows[1] - rows[0]), width), dtype=bool)
    if out.size:
        for dest, draws in _chunks(key, rows, sel, num_cols):
            np.greater_equal(draws, p, out=out[dest])
    return out


def dropout_keep_rows(
    seed: int, epoch: int, batch: int, layer: int, row_ids: np.ndarray, width: int, p: float,
    cols: np.ndarray | None = None,
) -> np.ndarray:
    """Keep-mask of minibatch dropout for the rows ``row_ids`` of a batch's layer input.

    ``width``: the layer input's width in the model the stream belongs to; ``cols``: the
    columns of it to draw (a GIST sub-network's ids; default all).
    """
    key = stream_key(seed, TAG_DROPOUT, epoch, batch, layer)
    return uniform_rows(key, row_ids, width, cols) >= p
