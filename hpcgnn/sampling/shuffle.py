"""Counter-based random numbers for sampling: a pure function of what is being sampled.

Every random number of the samplers is a hash of ``(seed, purpose, epoch, batch, layer,
row vertex, round, draw)``, so the sample of a minibatch is the same whichever rank
computes it, in whatever bulk, on whatever number of processes and data layout. The
mixer is the SplitMix64 finaliser (the one :mod:`hpcgnn.rng` uses), vectorised
over ``uint64`` arrays so one call keys every row of a stacked bulk at once.
"""

from __future__ import annotations

import numpy as np

from hpcgnn.rng import stream_key

#: Purposes (first word after the seed) of the streams derived here.
TAG_PERMUTATION = 0xBA7C4
TAG_SAGE = 0x5A6E
TAG_LADIES = 0x1AD1E5
TAG_DROPOUT = 0xD50B

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of every element of a ``uint64`` array."""
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


def to_uniform(bits: np.ndarray) -> np.ndarray:
    """Map 64-bit hashes to float64 uniforms in ``[0, 1)`` (the top 53 bits)."""
    return (np.asarray(bits, dtype=np.uint64) >> np.uint64(11)).astype(np.float64) * (
        1.0 / (1 << 53)
    )


def epoch_key(seed: int, purpose: int, epoch: int) -> np.uint64:
    """The key of one sampler (``purpose``) in one epoch."""
    return stream_key(seed, purpose, epoch)


def permutation(seed: int, epoch: int, n: int) -> np.ndarray:
    """A permutation of ``range(n)`` that depends only on ``(seed, epoch)``.

    Philox keyed by the counter-based key: every rank computes the same shuffle.
    """
    key = int(stream_key(seed, TAG_PERMUTATION, epoch))
    return np.random.Generator(np.random.Philox(key=key)).permutation(n)


def minibatches(train_ids: np.ndarray, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Split the shuffled training vertices of ``epoch`` into batches of ``batch_size``.

    Parameters
    ----------
    train_ids
        Global ids of the training vertices, sorted.
    batch_size
        Vertices per batch; the last batch holds the remainder (it is kept, smaller).
    seed, epoch
        Key of the shuffle.

    Returns
    -------
    list of numpy.ndarray
        Batch ``b`` is ``train_ids[perm[b B : (b + 1) B]]`` in permutation order.

    """
    ids = np.asarray(train_ids, dtype=np.int64)
    shuffled = ids[permutation(seed, epoch, len(ids))]
    return [shuffled[i : i + batch_size] for i in range(0, len(shuffled), batch_size)]


def uniform_rows(
    key: np.uint64, row_ids: np.ndarray, width: int
) -> np.ndarray:
    """Uniforms for a ``len(row_ids) x width`` block; entry ``(v, j)`` hashes ``v * width + j``."""
    r = np.asarray(row_ids, dtype=np.uint64)[:, None]
    c = np.arange(width, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        counter = r * np.uint64(width) + c
    return to_uniform(mix(counter ^ np.uint64(key)))
