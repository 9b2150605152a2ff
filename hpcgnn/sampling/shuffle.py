"""The epoch's shuffle and minibatches: a pure function of ``(seed, epoch)``.

Every rank computes the same permutation of the training vertices (Philox keyed by the
counter-based :func:`hpcgnn.rng.stream_key`), so the batches, and the samples drawn for
them by :mod:`hpcgnn.rng`'s hash streams, are the same whichever rank computes them, in
whatever bulk, on whatever number of processes and data layout.
"""

from __future__ import annotations

import numpy as np

from hpcgnn.rng import TAG_PERMUTATION, stream_key


def epoch_key(seed: int, purpose: int, epoch: int) -> np.uint64:
    """The key of one sampler (``purpose``) in one epoch."""
    return stream_key(seed, purpose, epoch)


def permutation(seed: int, epoch: int, n: int, purpose: int = TAG_PERMUTATION) -> np.ndarray:
    """A permutation of ``range(n)`` that depends only on ``(seed, epoch)`` (and ``purpose``)."""
    key = int(stream_key(seed, purpose, epoch))
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
