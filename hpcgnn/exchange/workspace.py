"""Buffers an exchange or an aggregation keeps from call to call, one per use and row shape."""

from __future__ import annotations

import torch


class Workspace:
    """Buffers kept from call to call, one per use and row shape.

    A buffer that every call writes whole before it is read (a received region, packed
    rows, the ``[owned | halo]`` rows of a product) need not be allocated again: each use
    keeps one buffer per dtype, device and trailing shape (a model's layers of other widths
    each have their own). A caller that hands the buffer out of the call (an autograd
    saved tensor, a returned value) must not take it: the next call overwrites it.
    """

    def __init__(self) -> None:
        self._bufs: dict[tuple, torch.Tensor] = {}

    def take(self, use: object, like: torch.Tensor, rows: int) -> torch.Tensor:
        """An uninitialised ``rows x like.shape[1:]`` buffer like ``like`` for ``use``."""
        key = (use, like.dtype, like.device, tuple(like.shape[1:]))
        buf = self._bufs.get(key)
        if buf is None or len(buf) != rows:
            buf = self._bufs[key] = like.new_empty((rows, *like.shape[1:]))
        return buf
