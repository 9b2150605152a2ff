"""The array operations of the samplers, on the host (NumPy) or on a device (torch).

One sampling algorithm runs wherever its arrays live: the samplers' modules call the
operations of :func:`ops` on the arrays they are given, and these are NumPy's for NumPy
arrays (the host, ``--device cpu``) or torch's for tensors on the sampling device
(``--device cuda``: cuSPARSE-free sorts, scans and gathers on the GPU, or the emulated
device's host tensors). Both give the same integers and the same float64 values:

- every integer operation is exact, and the sorts that decide an order are stable on
  both (``stable=True``), so ties keep their positions;
- the float64 sums that decide a draw (prefix sums of a row's weights, the sums of
  LADIES' SpGEMM) are never a library's scan: :func:`segment_cumsum` is a sequential
  sum per row on both (NumPy's along dense rows; the ``segment_cumsum`` kernel of
  ``cuda/sampling.cu`` on a device, one thread per row), so a GPU's parallel scan
  cannot round a row's prefix differently;
- the hashes of the random streams and the ITS draws are the kernels of
  :mod:`hpcgnn.kernels.sampling`, whose CUDA builds equal their NumPy twins bit for bit.

Torch is imported only for tensors: the host path loads no torch.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from hpcgnn.kernels import sampling as kernels
from hpcgnn.kernels.cuda_modules import is_tensor

Array = Any  # a NumPy array or a torch tensor, as the Ops in use holds them


class HostOps:
    """The operations on NumPy arrays (the host)."""

    device = None

    def asarray(self, a: Any, dtype: str = "int64") -> Array:
        """``a`` (a sequence, an array or a tensor anywhere) as an array of ``dtype`` here."""
        return np.asarray(self.to_host(a), dtype=dtype)

    def to_host(self, a: Array) -> Array:
        """``a`` as a NumPy array (a device tensor is copied to the host)."""
        return a.cpu().numpy() if is_tensor(a) else np.asarray(a)

    def arange(self, n: int) -> Array:
        """``0 .. n-1`` (int64)."""
        return np.arange(n, dtype=np.int64)

    def zeros(self, n: int, dtype: str = "int64") -> Array:
        """``n`` zeros of ``dtype``."""
        return np.zeros(n, dtype=dtype)

    def ones(self, n: int, dtype: str = "float64") -> Array:
        """``n`` ones of ``dtype``."""
        return np.ones(n, dtype=dtype)

    def repeat(self, x: Array, counts: Array) -> Array:
        """Each ``x[i]`` repeated ``counts[i]`` times."""
        return np.repeat(x, counts)

    def cumsum(self, x: Array) -> Array:
        """Inclusive prefix sums of integers or booleans (int64, exact)."""
        return np.cumsum(x, dtype=np.int64)

    def concat(self, arrays: Sequence[Array]) -> Array:
        """The arrays one after the other."""
        return np.concatenate(arrays)

    def sort(self, x: Array, stable: bool = True) -> Array:
        """``x`` sorted: stable (timsort: linear on sorted runs), or a faster unstable sort."""
        return np.sort(x, kind="stable" if stable else None)

    def argsort(self, x: Array, stable: bool = True) -> Array:
        """A sorting permutation of ``x``: stable, or (faster) any order of equal keys."""
        return np.argsort(x, kind="stable" if stable else None)

    def searchsorted(self, a: Array, v: Array, right: bool = False) -> Array:
        """Insertion points of ``v`` in the sorted ``a`` (left, or ``right``)."""
        return np.searchsorted(a, v, side="right" if right else "left")

    def bincount(self, x: Array, minlength: int) -> Array:
        """Occurrences of each value ``0 .. max(minlength, max(x) + 1) - 1`` (int64)."""
        return np.bincount(x, minlength=minlength).astype(np.int64, copy=False)

    def owners(self, counts: Array) -> Array:
        """Index ``i`` repeated ``counts[i]`` times: each element's group (int64)."""
        return self.repeat(self.arange(len(counts)), counts)

    def rows_of(self, indptr: Array) -> Array:
        """The row of every entry of a CSR pointer."""
        return self.owners(self.diff(indptr))

    def flatnonzero(self, mask: Array) -> Array:
        """Positions of the true (nonzero) elements."""
        return np.flatnonzero(mask)

    def minimum(self, a: Array, b: Array) -> Array:
        """Elementwise minimum (``b`` an array or a scalar)."""
        return np.minimum(a, b)

    def maximum(self, a: Array, b: Array) -> Array:
        """Elementwise maximum (``b`` an array or a scalar)."""
        return np.maximum(a, b)

    def where(self, cond: Array, a: Array, b: Array) -> Array:
        """``a`` where ``cond``, else ``b`` (an array or a scalar)."""
        return np.where(cond, a, b)

    def diff(self, x: Array) -> Array:
        """``x[1:] - x[:-1]``."""
        return np.diff(x)

    def int64(self, x: Array) -> Array:
        """``x`` as int64."""
        return np.asarray(x).astype(np.int64, copy=False)

    def float64(self, x: Array) -> Array:
        """``x`` as float64."""
        return np.asarray(x).astype(np.float64, copy=False)

    def ratio(self, num: Array, den: Array) -> Array:
        """``num / den`` where ``den > 0``, else 0 (float64)."""
        return np.divide(num, den, out=np.zeros(len(num), dtype=np.float64), where=den > 0)

    def ptr(self, lens: Array) -> Array:
        """A CSR pointer from lengths: ``[0, cumsum(lens)...]`` (int64)."""
        out = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=out[1:])
        return out

    def segment_cumsum(self, indptr: Array, weights: Array) -> Array:
        """Inclusive prefix sums of ``weights`` restarted at every row (sequential per row)."""
        return kernels.segment_cumsum(indptr, weights)

    def row_keys(self, key: np.uint64, batch: Array, hop: int, vertex: Array | None) -> Array:
        """``chain(key, batch[i], hop[, vertex[i]])`` per element (uint64 bits)."""
        return kernels.row_keys(key, batch, hop, vertex)


class DeviceOps(HostOps):
    """The operations on torch tensors of one device (``torch.device``)."""

    def __init__(self, device: Any) -> None:
        import torch

        self.torch = torch
        self.device = device
        self._dtypes = {"int64": torch.int64, "float64": torch.float64, "bool": torch.bool,
                        "uint64": torch.int64}  # key bits travel as int64 (kernels: sign-blind)

    def asarray(self, a: Any, dtype: str = "int64") -> Any:
        """Torch's :meth:`HostOps.asarray`."""
        t = self.torch
        if is_tensor(a):
            return a.to(device=self.device, dtype=self._dtypes[dtype])
        host = np.asarray(a, dtype=dtype)
        if dtype == "uint64":
            host = host.view(np.int64)
        return t.as_tensor(host, device=self.device)

    def arange(self, n: int) -> Any:
        """Torch's :meth:`HostOps.arange`."""
        return self.torch.arange(n, dtype=self.torch.int64, device=self.device)

    def zeros(self, n: int, dtype: str = "int64") -> Any:
        """Torch's :meth:`HostOps.zeros`."""
        return self.torch.zeros(n, dtype=self._dtypes[dtype], device=self.device)

    def ones(self, n: int, dtype: str = "float64") -> Any:
        """Torch's :meth:`HostOps.ones`."""
        return self.torch.ones(n, dtype=self._dtypes[dtype], device=self.device)

    def repeat(self, x: Array, counts: Array) -> Any:
        """Torch's :meth:`HostOps.repeat`."""
        return self.torch.repeat_interleave(x, counts)

    def cumsum(self, x: Array) -> Any:
        """Torch's :meth:`HostOps.cumsum`."""
        return self.torch.cumsum(x, 0, dtype=self.torch.int64)

    def concat(self, arrays: Sequence[Array]) -> Any:
        """Torch's :meth:`HostOps.concat`."""
        return self.torch.cat(list(arrays))

    def sort(self, x: Array, stable: bool = True) -> Any:
        """Torch's :meth:`HostOps.sort`."""
        return self.torch.sort(x, stable=stable).values

    def argsort(self, x: Array, stable: bool = True) -> Any:
        """Torch's :meth:`HostOps.argsort`."""
        return self.torch.argsort(x, stable=stable)

    def searchsorted(self, a: Array, v: Array, right: bool = False) -> Any:
        """Torch's :meth:`HostOps.searchsorted`."""
        return self.torch.searchsorted(a, v, right=right)

    def bincount(self, x: Array, minlength: int) -> Any:
        """Torch's :meth:`HostOps.bincount`."""
        return self.torch.bincount(x, minlength=minlength)

    def flatnonzero(self, mask: Array) -> Any:
        """Torch's :meth:`HostOps.flatnonzero`."""
        return self.torch.nonzero(mask).flatten()

    def minimum(self, a: Array, b: Array) -> Any:
        """Torch's :meth:`HostOps.minimum`."""
        return self.torch.minimum(a, b) if is_tensor(b) else self.torch.clamp(a, max=b)

    def maximum(self, a: Array, b: Array) -> Any:
        """Torch's :meth:`HostOps.maximum`."""
        return self.torch.maximum(a, b) if is_tensor(b) else self.torch.clamp(a, min=b)

    def where(self, cond: Array, a: Array, b: Array) -> Any:
        """Torch's :meth:`HostOps.where`."""
        return self.torch.where(cond, a, b)

    def diff(self, x: Array) -> Any:
        """Torch's :meth:`HostOps.diff`."""
        return self.torch.diff(x)

    def int64(self, x: Array) -> Any:
        """Torch's :meth:`HostOps.int64`."""
        return x.to(self.torch.int64)

    def float64(self, x: Array) -> Any:
        """Torch's :meth:`HostOps.float64`."""
        return x.to(self.torch.float64)

    def ratio(self, num: Array, den: Array) -> Any:
        """Torch's :meth:`HostOps.ratio`."""
        return self.torch.where(den > 0, num / self.torch.where(den > 0, den, 1.0), 0.0)

    def ptr(self, lens: Array) -> Any:
        """Torch's :meth:`HostOps.ptr`."""
        out = self.torch.zeros(len(lens) + 1, dtype=self.torch.int64, device=self.device)
        self.torch.cumsum(lens.to(self.torch.int64), 0, out=out[1:])
        return out


HOST = HostOps()


def ops(a: Any) -> HostOps:
    """The operations for arrays like ``a``: :data:`HOST` for NumPy, a device's for tensors."""
    return _device_ops(a.device) if is_tensor(a) else HOST


def ops_on(device: Any | None) -> HostOps:
    """The operations on ``device`` (a ``torch.device``; ``None``: the host's NumPy)."""
    return HOST if device is None else _device_ops(device)


@functools.cache
def _device_ops(device: Any) -> DeviceOps:
    """One :class:`DeviceOps` per device (the samplers ask for it at every step)."""
    return DeviceOps(device)
