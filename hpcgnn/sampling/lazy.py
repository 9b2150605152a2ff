"""A rank's share of a bulk sampled group by group on first access, then released.

:class:`LazyShare` is the list of sampled batches that
:meth:`~hpcgnn.sampling.bulk.BulkSampler.sample` returns in the graph-replicated layout
(no communication, so a rank may sample its batches whenever it likes). Its groups come
from :func:`~hpcgnn.sampling.bulk.sample_depth_first`: consecutive batches that were
stacked together down to the last hop, each released as soon as its last hop is sampled.
A consumer reading the batches in order (the trainer, one step per batch) holds one
group's samples at a time, so a bulk amortises its per-call overhead over the batches
that fit the working-set limit and costs no more memory than that: small batches sample
the whole bulk as one group, batch 4096 one batch at a time, like bulk 1.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import overload

import numpy as np

from hpcgnn.sampling.sampled import SampledBatch

#: ``groups(start)``: the samples of batches ``start, start+1, ...`` of the share, as
#: consecutive lists (the groups), sampled when asked for.
Groups = Callable[[int], Iterator[list[SampledBatch]]]


class LazyShare(Sequence[SampledBatch]):
    """``size`` sampled batches, sampled a group at a time when first indexed.

    Parameters
    ----------
    size
        Batches in the share.
    groups
        Samples the share from a given position on, a group at a time (:data:`Groups`).
    on_new
        Called with the batches of each group the first time they are sampled (an access
        before the group held re-samples it: the same samples, not counted again).

    Attributes
    ----------
    sampled
        The ``[lo, hi)`` positions of every group sampled so far, in order.

    """

    def __init__(
        self, size: int, groups: Groups, on_new: Callable[[list[SampledBatch]], None]
    ) -> None:
        self._size, self._groups, self._on_new = size, groups, on_new
        self._it: Iterator[list[SampledBatch]] | None = None
        self._lo = self._hi = 0
        self._held: list[SampledBatch] = []
        self._seen = np.zeros(size, dtype=bool)
        self.sampled: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, i: int) -> SampledBatch: ...

    @overload
    def __getitem__(self, i: slice) -> list[SampledBatch]: ...

    def __getitem__(self, i: int | slice) -> SampledBatch | list[SampledBatch]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._size))]
        i = operator.index(i)
        i = i + self._size if i < 0 else i
        if not 0 <= i < self._size:
            raise IndexError(f"batch {i} of a share of {self._size}")
        if not self._lo <= i < self._hi:
            self._load(i)
        return self._held[i - self._lo]

    def _load(self, i: int) -> None:
        """Hold the group of batch ``i``: the next one when ``i`` follows the held group."""
        self._held = []  # released before the next group is sampled
        if self._it is None or i != self._hi:
            self._it, self._hi = self._groups(i), i
        group = next(self._it)
        self._lo, self._hi, self._held = self._hi, self._hi + len(group), group
        self.sampled.append((self._lo, self._hi))
        new = ~self._seen[self._lo : self._hi]
        self._seen[self._lo : self._hi] = True
        self._on_new([b for b, fresh in zip(group, new, strict=True) if fresh])
