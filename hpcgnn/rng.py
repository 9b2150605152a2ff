"""Counter-based randomness: the same numbers for a matrix entry whoever computes it.

Distributed training must reproduce the serial run exactly, so every random number is a
pure function of (seed, purpose, global row, global column). A rank that owns any block
of a matrix (block rows in 1D, a 2D tile in 2D/3D, a subset of columns in GIST, the
nonzeros of a sparse feature matrix) generates exactly the entries of the serial run for
that block, with no communication and no wasted draws. One mixer serves everything: the
SplitMix64 finaliser (Steele et al.), vectorised over ``uint64`` arrays.

Two kinds of streams are derived from it:

- *entry streams* (:func:`entry_bits`, :func:`dropout_keep`, :func:`dropout_keep_pairs`):
  the dropout masks. Entry ``(i, j)`` of a stream keyed ``key`` is the 32-bit hash
  ``lowbias32(row_word(i) ^ column_word(j))`` of a 64-bit hash of its global row and one
  of its global column (:func:`words`), so a mask costs one 32-bit hash per entry, any
  subset of entries (a block, columns in any order, the nonzeros of a sparse matrix) is
  drawn alone, and no index product ``i * width + j`` can wrap on any graph. Keep is the
  integer test ``bits >= ceil(p 2^32)`` (:func:`keep_threshold`), exactly ``u >= p`` for
  ``u = bits 2^-32``. Full-batch masks are keyed by ``(seed, epoch, layer)``, minibatch
  masks by ``(seed, epoch, batch, layer)``;
- *hash streams* (:func:`chain`, :func:`to_uniform`): every draw a 64-bit hash of its
  counter (sampling).
"""

from __future__ import annotations

import math

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
TAG_CLUSTER = 0xC1057E5  # Cluster-GCN's shuffles of the clusters
TAG_DROPOUT = 0xD50B  # minibatch dropout masks
TAG_GIST = 0x6157  # GIST partitions of the hidden dimensions
TAG_ATTENTION = 0xA77E  # GAT's attention dropout

#: The column words' key is the row words' key mixed with this word.
COLUMN_WORD = 0xC01

#: Multipliers of ``lowbias32`` (C. Wellons, hash-prospector: a 32-bit integer hash
#: with low bias).
_LB1 = np.uint32(0x7FEB352D)
_LB2 = np.uint32(0x846CA68B)

#: Rows or columns of a block: a range ``(lo, hi)`` or an array of global indices.
Columns = tuple[int, int] | np.ndarray


def mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of every element of a ``uint64`` array (a bijective hash)."""
    return mix_into(np.array(x, dtype=np.uint64))[()]


def mix_into(x: np.ndarray) -> np.ndarray:
    """:func:`mix` of a ``uint64`` array in place (one temporary of its size); returns ``x``.

    For the large arrays of the graph check's fingerprints, whose out-of-place hash held
    five copies of an edge block at once.
    """
    with np.errstate(over="ignore"):
        x += _GOLDEN
    return _shift_multiply(x, ((np.uint64(30), _M1), (np.uint64(27), _M2)), np.uint64(31))


def _shift_multiply(
    x: np.ndarray, steps: tuple[tuple[np.unsignedinteger, np.unsignedinteger], ...],
    last: np.unsignedinteger,
) -> np.ndarray:
    """``x ^= x >> s; x *= m`` for each ``(s, m)`` of ``steps``, then ``x ^= x >> last``.

    In place (one temporary of ``x``'s size); returns ``x``. The rounds of SplitMix64's
    finaliser and of ``lowbias32``.
    """
    with np.errstate(over="ignore"):
        for shift, factor in steps:
            x ^= x >> shift
            x *= factor
        x ^= x >> last
    return x


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


def ids_of(sel: Columns) -> np.ndarray:
    """The global indices of a range ``(lo, hi)`` or an index array, as ``int64``."""
    if isinstance(sel, tuple):
        return np.arange(sel[0], max(sel[0], sel[1]), dtype=np.int64)
    return np.asarray(sel, dtype=np.int64)


def words(key: np.uint64, ids: Columns) -> np.ndarray:
    """``uint32`` words of global indices: the low 32 bits of ``mix(key ^ id)``."""
    return mix(ids_of(ids).astype(np.uint64) ^ np.uint64(key)).astype(np.uint32)


def column_key(key: np.uint64) -> np.uint64:
    """The key of an entry stream's column words."""
    return np.uint64(mix(np.uint64(key) ^ np.uint64(COLUMN_WORD)))


def lowbias32(x: np.ndarray) -> np.ndarray:
    """Wellons' ``lowbias32`` of every element of a ``uint32`` array (in place; returned)."""
    x = np.asarray(x, dtype=np.uint32)
    return _shift_multiply(x, ((np.uint32(16), _LB1), (np.uint32(15), _LB2)), np.uint32(16))


def entry_bits(key: np.uint64, rows: Columns, cols: Columns) -> np.ndarray:
    """The ``uint32`` entries of the block ``rows x cols`` of the entry stream ``key``."""
    r = words(key, rows)
    c = words(column_key(key), cols)
    return lowbias32(r[:, None] ^ c[None, :])


def pair_bits(key: np.uint64, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The ``uint32`` entries ``(rows[k], cols[k])`` of the entry stream ``key`` (e.g. nonzeros)."""
    return lowbias32(words(key, rows) ^ words(column_key(key), cols))


def keep_threshold(p: float) -> int:
    """The integer threshold ``ceil(p 2^32)`` of the keep test ``bits >= t``.

    ``bits >= t`` exactly when ``bits 2^-32 >= p``: the scaling by a power of two is exact, so
    the test needs no float; ``2^32`` (``p`` within ``2^-32`` of 1) keeps nothing.
    """
    return min(math.ceil(p * 2.0**32), 1 << 32)


def keep_of(bits: np.ndarray, p: float) -> np.ndarray:
    """Keep decisions ``bits >= keep_threshold(p)`` of ``uint32`` entries."""
    t = keep_threshold(p)
    if t >= 1 << 32:
        return np.zeros(bits.shape, dtype=bool)
    return bits >= np.uint32(t)


def dropout_key(seed: int, epoch: int, layer: int, batch: int | None = None) -> np.uint64:
    """Key of a layer input's dropout mask.

    Full-batch masks are keyed ``(seed, epoch, layer)``, a minibatch's
    ``(seed, epoch, batch, layer)``.
    """
    if batch is None:
        return stream_key(seed, TAG_DROPOUT_BLOCK, epoch, layer)
    return stream_key(seed, TAG_DROPOUT, epoch, batch, layer)


def dropout_keep(key: np.uint64, rows: Columns, cols: Columns, p: float) -> np.ndarray:
    """Boolean keep-mask (drop probability ``p``) of the block ``rows x cols`` of stream ``key``.

    ``rows`` and ``cols``: ranges or global index arrays (a rank's rows, a sampled
    batch's vertices; a GIST sub-network's columns), see :func:`dropout_key`.
    """
    return keep_of(entry_bits(key, rows, cols), p)


def dropout_keep_pairs(
    key: np.uint64, rows: np.ndarray, cols: np.ndarray, p: float
) -> np.ndarray:
    """Keep decisions of the entries ``(rows[k], cols[k])``: the dense mask at those entries.

    Kipf's sparse dropout on a sparse matrix's nonzeros draws exactly the dense one's.
    """
    return keep_of(pair_bits(key, rows, cols), p)
