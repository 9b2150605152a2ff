"""Gather-pack and scatter-add-unpack of rows: the exchanges' pack and unpack kernels.

CUDA: ``cuda/rows.cu`` (templated on float/double values and int32/int64 row ids). The
CPU references here have the same contract and are what the CPU path runs:

- :func:`gather_rows`: ``out[i, :] = x[idx[i], :]`` (a new contiguous tensor);
- :func:`scatter_add_rows`: ``out[idx[i], :] += rows[i, :]`` in place. With
  ``unique=True`` the caller guarantees distinct ``idx`` (a staged sub-stage, a
  transition flush): one plain add per element, no atomics. Otherwise duplicates
  accumulate: on the CPU in ``i`` order (``index_add_``), on a GPU with ``atomicAdd`` in
  an unspecified order.

A float32/float64 tensor on a CUDA device runs the kernel (a scatter-add target must be
contiguous); anything else (other dtypes, such as the int64 row ids the staged exchange
sends once at setup) the reference, on the tensor's device. Row ids are never checked
against the row count (the exchange tables are built in range).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from hpcgnn.kernels import cuda_modules as cm

#: Value dtypes of the kernels of ``rows.cu``.
KERNEL_DTYPES = (torch.float32, torch.float64)


def _launch(kernel: str, data: torch.Tensor, idx: torch.Tensor, out: torch.Tensor) -> None:
    """Run ``kernel<T, I>(data, idx, out, n, f)`` of ``rows.cu`` over ``len(idx) x f``."""
    n, f = len(idx), math.prod(out.shape[1:])
    name = f"{kernel}<{cm.c_type(out.dtype)}, {cm.c_type(idx.dtype)}>"
    args = (cm.as_cupy(data), cm.as_cupy(idx), cm.as_cupy(out), np.int64(n), np.int64(f))
    cm.launch("rows.cu", name, cm.device_index(out.device), cm.blocks(n * f), args)


def gather_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows ``idx`` of ``x`` packed into a new contiguous tensor: ``out[i] = x[idx[i]]``.

    Parameters
    ----------
    x
        Source rows (any trailing shape; made contiguous for the kernel).
    idx
        Row ids, int32 or int64, on ``x``'s device; may repeat.

    Returns
    -------
    torch.Tensor
        ``len(idx) x x.shape[1:]``, ``x``'s dtype and device.
    """
    if not x.is_cuda or x.dtype not in KERNEL_DTYPES:
        return x[idx].contiguous()
    out = x.new_empty((len(idx), *x.shape[1:]))
    if out.numel():
        _launch("gather_rows", x.contiguous(), idx.contiguous(), out)
    return out


def scatter_add_rows(
    out: torch.Tensor, idx: torch.Tensor, rows: torch.Tensor, unique: bool = False
) -> torch.Tensor:
    """Add ``rows[i]`` into ``out[idx[i]]`` in place and return ``out``.

    Parameters
    ----------
    out
        Target rows, updated in place.
    idx
        Row ids of ``out``, int32 or int64, one per row of ``rows``.
    rows
        The rows to add (``out``'s dtype, trailing shape and device).
    unique
        The caller guarantees that ``idx`` has no repeated id: the atomic-free variant
        (on the CPU ``out[idx] += rows``, on a GPU ``scatter_add_unique``). Otherwise
        repeated ids accumulate (``index_add_``; ``scatter_add_atomic``).
    """
    if not (out.is_cuda and out.dtype in KERNEL_DTYPES and out.is_contiguous()):
        if unique:
            out[idx] += rows
        else:
            out.index_add_(0, idx, rows)
        return out
    if rows.numel():
        kernel = "scatter_add_unique" if unique else "scatter_add_atomic"
        _launch(kernel, rows.contiguous(), idx.contiguous(), out)
    return out
