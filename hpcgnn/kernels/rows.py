"""Gather-pack and scatter-add-unpack of rows: the exchanges' pack and unpack kernels.

CUDA: ``cuda/rows.cu`` (templated on float/double values and int32/int64 row ids). The
CPU references here have the same contract and are what the CPU path runs:

- :func:`gather_rows`: ``out[i, :] = x[idx[i], :]`` (a new contiguous tensor; on the
  CPU :func:`take_rows`, the fastest way this torch has);
- :func:`scatter_add_rows`: ``out[idx[i], :] += rows[i, :]`` in place. With
  ``unique=True`` the caller guarantees distinct ``idx`` (a staged sub-stage, a
  transition flush): one plain add per element (``scatter_add_unique``). Otherwise
  duplicates accumulate in ``i`` order, on the CPU (``index_add_``) and on a GPU alike:
  ``scatter_add_segments`` walks the inverse map of ``idx`` (:class:`ScatterMap`, built
  once by :func:`scatter_map` for ids that are reused, else on every call), so the
  results are bit-identical between runs, GPUs and the CPU.

A float32/float64 tensor on a CUDA device runs the kernel (a scatter-add target must be
contiguous); anything else (other dtypes, such as the int64 row ids the staged exchange
sends once at setup) the reference, on the tensor's device. Row ids are never checked
against the row count (the exchange tables are built in range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from hpcgnn.kernels import cuda_modules as cm

#: Value dtypes of the kernels of ``rows.cu``.
KERNEL_DTYPES = (torch.float32, torch.float64)


@dataclass(frozen=True)
class ScatterMap:
    """The inverse map of row ids ``ids``: which rows go to each distinct target, in order.

    Attributes
    ----------
    ids : torch.Tensor
        The row ids themselves (int32 or int64), one per row to add.
    order : torch.Tensor
        int64, the stable argsort of ``ids`` (rows grouped by target, in ``i`` order).
    targets : torch.Tensor
        int64, the ``m`` distinct ids, ascending.
    seg : torch.Tensor
        int64, ``m + 1`` offsets: rows ``order[seg[j]:seg[j + 1]]`` go to ``targets[j]``.
    """

    ids: torch.Tensor
    order: torch.Tensor
    targets: torch.Tensor
    seg: torch.Tensor


def scatter_map(idx: torch.Tensor) -> ScatterMap:
    """The :class:`ScatterMap` of row ids ``idx``, built on ``idx``'s device.

    Worth precomputing for ids that are reused (an exchange's receive table): a scatter
    with the map skips the sort.
    """
    ids = idx.contiguous()
    sorted_ids, order = torch.sort(ids.long(), stable=True)
    targets, counts = torch.unique_consecutive(sorted_ids, return_counts=True)
    seg = torch.zeros(len(targets) + 1, dtype=torch.int64, device=ids.device)
    torch.cumsum(counts, 0, out=seg[1:])
    return ScatterMap(ids, order, targets, seg)


def _launch(kernel: str, out: torch.Tensor, *args: torch.Tensor, work: int) -> None:
    """Run ``kernel`` of ``rows.cu`` on ``args``, then ``out``, the count ``work`` and ``f``.

    One thread per element of the ``work x f`` block (``f`` the width of ``out``'s rows).
    """
    f = math.prod(out.shape[1:])
    launch_args = (*map(cm.as_cupy, (*args, out)), np.int64(work), np.int64(f))
    cm.launch("rows.cu", kernel, cm.device_index(out.device), cm.blocks(work * f), launch_args)


def _name(kernel: str, out: torch.Tensor, idx: torch.Tensor) -> str:
    """``kernel<T, I>`` for ``out``'s value type and ``idx``'s id type."""
    return f"{kernel}<{cm.c_type(out.dtype)}, {cm.c_type(idx.dtype)}>"


def take_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``x[idx]`` along the first axis, by ``index_select`` on a 2-D (one column: 1-D) view.

    The same values as ``x.index_select(0, idx)`` and ``x[idx]``, faster on the CPU: this
    torch's ``index_select`` copies the rows of a contiguous 2-D tensor (or the entries of
    a 1-D one) 3-6x faster than the rows of the same data with more axes or one column, and
    advanced indexing is slower still (20000 x 4 x 4 float32, 262144 ids, one thread: 4.6
    ms 3-D, 0.7 ms 2-D, 2.4 ms ``x[idx]``). A strided ``x`` (a view of some columns) is
    made contiguous first when ``idx`` has at least as many ids as ``x`` rows (the copy is
    then the smaller cost), else indexed as it is. Any device, ``idx`` int32 or int64;
    differentiable in ``x``.
    """
    if x.dim() == 0 or x.numel() == 0:
        return x[idx]
    if not x.is_contiguous():
        if len(idx) < x.shape[0]:
            return x.index_select(0, idx)
        x = x.contiguous()
    flat = x.reshape(x.shape[0], -1)
    word = _ROW_WORDS.get(flat.shape[1] * x.element_size())
    if word is not None and x.device.type == "cpu" and _aligned(flat, word):
        flat = flat.view(word).reshape(-1)  # one word per row: the 1-D copy, 3-4x faster
    elif flat.shape[1] == 1:
        flat = flat.reshape(-1)
    return flat.index_select(0, idx).view(x.dtype).reshape(len(idx), *x.shape[1:])


#: The word a row of 8 or 16 bytes is gathered as (the bits unchanged): this torch's 1-D
#: ``index_select`` moves such rows 3-4x faster than the 2-D one (20000 x 4 float32,
#: 339230 ids, one thread: 0.20 ms against 0.72 ms); GAT's per-head score terms.
_ROW_WORDS = {8: torch.int64, 16: torch.complex128}


def _aligned(flat: torch.Tensor, word: torch.dtype) -> bool:
    """Whether ``flat`` (contiguous, ``rows x f``) may be viewed as ``word``s."""
    ratio = word.itemsize // flat.element_size()
    return ratio >= 1 and flat.storage_offset() % ratio == 0


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
        return take_rows(x, idx).contiguous()
    out = x.new_empty((len(idx), *x.shape[1:]))
    if out.numel():
        _launch(_name("gather_rows", out, idx), out, x, idx.contiguous(), work=len(idx))
    return out


def scatter_add_rows(
    out: torch.Tensor, idx: torch.Tensor | ScatterMap, rows: torch.Tensor, unique: bool = False
) -> torch.Tensor:
    """Add ``rows[i]`` into ``out[idx[i]]`` in place and return ``out``.

    Parameters
    ----------
    out
        Target rows, updated in place.
    idx
        Row ids of ``out``, int32 or int64, one per row of ``rows``; or their
        :class:`ScatterMap` (from :func:`scatter_map`, for ids used more than once).
    rows
        The rows to add (``out``'s dtype, trailing shape and device).
    unique
        The caller guarantees that ``idx`` has no repeated id: one plain add per element
        (on the CPU ``out[idx] += rows``, on a GPU ``scatter_add_unique``). Otherwise
        repeated ids accumulate in ``i`` order (``index_add_``; on a GPU
        ``scatter_add_segments``, bit-identical to it).
    """
    ids = idx.ids if isinstance(idx, ScatterMap) else idx
    if not (out.is_cuda and out.dtype in KERNEL_DTYPES and out.is_contiguous()):
        if unique:
            out[ids] += rows
        else:
            out.index_add_(0, ids, rows)
        return out
    if not rows.numel():
        return out
    rows = rows.contiguous()
    if unique:
        _launch(_name("scatter_add_unique", out, ids), out, rows, ids.contiguous(),
                work=len(ids))
        return out
    inverse = idx if isinstance(idx, ScatterMap) else scatter_map(idx)
    kernel = f"scatter_add_segments<{cm.c_type(out.dtype)}>"
    _launch(kernel, out, rows, inverse.order, inverse.targets, inverse.seg,
            work=len(inverse.targets))
    return out
