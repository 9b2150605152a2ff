"""Gather-pack and scatter-add-unpack of rows: the exchanges' pack and unpack kernels.

CUDA: ``cuda/rows.cu`` (templated on float/double values and int32/int64 row ids). The
CPU references here have the same contract and are what the CPU path runs:

- :func:`gather_rows`: ``out[i, :] = x[idx[i], :]`` (a new contiguous tensor; on the
  CPU :func:`take_rows`, the fastest way this torch has);
- :func:`copy_rows`: ``out[dst[i], :] = x[src[i], :]`` in place (HongTu's in-place
  buffers: rows written at precomputed positions, no packed rows in between); ``x`` may be
  a page-locked host tensor read by the kernel itself (zero-copy);
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

16-byte packing (the default): where a row is a whole number of 16 bytes (float32: a width
divisible by 4; float64: by 2) and every value tensor of the launch starts on a 16-byte
boundary, the kernels run on ``hpcgnn_vec16<T>`` (one vector load or store per 16 bytes);
otherwise on ``T``, element by element (:func:`row_kernel` chooses). The bytes are the same
either way. ``packed=False`` forces the scalar kernels (a check or a benchmark of the two).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from hpcgnn.kernels import cuda_modules as cm

#: Value dtypes of the kernels of ``rows.cu``.
KERNEL_DTYPES = (torch.float32, torch.float64)
#: Bytes of ``rows.cu``'s packs (``hpcgnn_vec16<T>``): their size and their alignment.
PACK_BYTES = 16


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


def packs(values: tuple[torch.Tensor, ...]) -> bool:
    """Whether the rows of contiguous ``values`` (one dtype and width) move as 16-byte packs.

    True when a row is a whole number of :data:`PACK_BYTES` bytes and every tensor's data
    starts on a :data:`PACK_BYTES` boundary (so does each row then). A fresh allocation is
    aligned (torch's CUDA and CPU allocators give 256- and 64-byte aligned blocks); a view
    that starts inside one may not be.
    """
    row = math.prod(values[0].shape[1:]) * values[0].element_size()
    return row > 0 and row % PACK_BYTES == 0 and all(v.data_ptr() % PACK_BYTES == 0 for v in values)


def row_kernel(
    kernel: str,
    values: tuple[torch.Tensor, ...],
    idx: torch.Tensor | None = None,
    packed: bool = True,
) -> tuple[str, int]:
    """The launch name of ``kernel`` of ``rows.cu`` for ``values``, and ``f`` in its units.

    Parameters
    ----------
    kernel
        ``gather_rows``, ``copy_rows``, ``scatter_add_unique`` or ``scatter_add_segments``.
    values
        The contiguous value tensors the kernel reads and writes (one dtype and row width;
        the output among them).
    idx
        The row ids (int32 or int64) for a kernel templated on their type, else None.
    packed
        Allow 16-byte packs (:func:`packs`); False: the scalar kernel always.

    Returns
    -------
    tuple of (str, int)
        ``kernel<hpcgnn_vec16<T>, I>`` and the row width in packs where the values pack,
        else ``kernel<T, I>`` and the width in elements (``I`` only with ``idx``).
    """
    f = math.prod(values[0].shape[1:])
    value = cm.c_type(values[0].dtype)
    if packed and packs(values):
        f = f * values[0].element_size() // PACK_BYTES
        value = f"hpcgnn_vec16<{value}>"
    types = value if idx is None else f"{value}, {cm.c_type(idx.dtype)}"
    return f"{kernel}<{types}>", f


def _launch(
    kernel: str,
    values: tuple[torch.Tensor, ...],
    args: tuple[torch.Tensor, ...],
    work: int,
    idx: torch.Tensor | None = None,
    packed: bool = True,
) -> None:
    """Run ``kernel`` (:func:`row_kernel` names it) on ``args``, the count ``work`` and ``f``.

    One thread per element (or pack) of the ``work x f`` block; ``args`` end with the output.
    """
    name, f = row_kernel(kernel, values, idx, packed)
    launch_args = (*map(cm.as_cupy, args), np.int64(work), np.int64(f))
    out = args[-1]
    cm.launch("rows.cu", name, cm.device_index(out.device), cm.blocks(work * f), launch_args)


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
    word = row_word(flat.shape[1] * x.element_size())
    if word is not None and x.device.type == "cpu" and _aligned(flat, word):
        flat = flat.view(word).reshape(-1)  # one word per row: the 1-D copy, 3-4x faster
    elif flat.shape[1] == 1:
        flat = flat.reshape(-1)
    return flat.index_select(0, idx).view(x.dtype).reshape(len(idx), *x.shape[1:])


#: The word a row of 8 or 16 bytes is gathered as (the bits unchanged): this torch's 1-D
#: ``index_select`` moves such rows 3-4x faster than the 2-D one (20000 x 4 float32,
#: 339230 ids, one thread: 0.20 ms against 0.72 ms); GAT's per-head score terms.
_ROW_WORDS = {8: torch.int64, 16: torch.complex128}


def row_word(nbytes: int) -> torch.dtype | None:
    """The dtype whose one element is a row of ``nbytes`` bytes (8 or 16), else ``None``.

    :func:`take_rows` gathers such rows as these words (the bits unchanged).
    """
    return _ROW_WORDS.get(nbytes)


def _aligned(flat: torch.Tensor, word: torch.dtype) -> bool:
    """Whether ``flat`` (contiguous, ``rows x f``) may be viewed as ``word``s."""
    ratio = word.itemsize // flat.element_size()
    return ratio >= 1 and flat.storage_offset() % ratio == 0


def gather_rows(x: torch.Tensor, idx: torch.Tensor, *, packed: bool = True) -> torch.Tensor:
    """Rows ``idx`` of ``x`` packed into a new contiguous tensor: ``out[i] = x[idx[i]]``.

    Parameters
    ----------
    x
        Source rows (any trailing shape; made contiguous for the kernel).
    idx
        Row ids, int32 or int64, on ``x``'s device; may repeat.
    packed
        On a GPU, move 16-byte packs where the rows allow (:func:`row_kernel`); False: the
        scalar kernel. The same result either way.

    Returns
    -------
    torch.Tensor
        ``len(idx) x x.shape[1:]``, ``x``'s dtype and device.
    """
    if not x.is_cuda or x.dtype not in KERNEL_DTYPES:
        return take_rows(x, idx).contiguous()
    out = x.new_empty((len(idx), *x.shape[1:]))
    if out.numel():
        x, idx = x.contiguous(), idx.contiguous()
        _launch("gather_rows", (x, out), (x, idx, out), len(idx), idx, packed)
    return out


def copy_rows(
    x: torch.Tensor, src: torch.Tensor, out: torch.Tensor, dst: torch.Tensor
) -> torch.Tensor:
    """Write rows ``src`` of ``x`` into rows ``dst`` of ``out`` in place; returns ``out``.

    ``out[dst[i]] = x[src[i]]``: the gather and the scatter in one pass (``copy_rows`` of
    ``rows.cu``), nothing packed in between.

    Parameters
    ----------
    x
        Source rows: on ``out``'s device, or (zero-copy, ``out`` on a GPU) a page-locked
        host tensor that the kernel reads over the bus, with no host-side gather and no
        staging copy (:meth:`~hpcgnn.backend.Device.pinned_empty` memory).
    src, dst
        Row ids of ``x`` and of ``out`` (one type, int32 or int64, on ``out``'s device);
        ``dst`` distinct.
    out
        Target rows (contiguous), updated in place.

    On the CPU, or for other dtypes: ``out.index_copy_(0, dst, take_rows(x, src))``.
    """
    if not (out.is_cuda and out.dtype in KERNEL_DTYPES and out.is_contiguous()):
        return out.index_copy_(0, dst.long(), take_rows(x, src))
    if x.dtype != out.dtype or not (x.is_cuda or x.is_pinned()):
        raise ValueError(
            "copy_rows reads a device tensor or a page-locked host tensor of "
            f"out's dtype, not a {x.dtype} on {x.device} (pinned: {x.is_pinned()})"
        )
    if len(src):
        x = x.contiguous()
        _launch(
            "copy_rows",
            (x, out),
            (x, src.contiguous(), dst.contiguous(), out),
            work=len(src),
            idx=src,
        )
    return out


def scatter_add_rows(
    out: torch.Tensor,
    idx: torch.Tensor | ScatterMap,
    rows: torch.Tensor,
    unique: bool = False,
    *,
    packed: bool = True,
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
    packed
        On a GPU, add 16-byte packs where the rows allow (:func:`row_kernel`); False: the
        scalar kernel. The same result either way.
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
        ids = ids.contiguous()
        _launch("scatter_add_unique", (rows, out), (rows, ids, out), len(ids), ids, packed)
        return out
    inv = idx if isinstance(idx, ScatterMap) else scatter_map(idx)
    _launch(
        "scatter_add_segments",
        (rows, out),
        (rows, inv.order, inv.targets, inv.seg, out),
        len(inv.targets),
        packed=packed,
    )
    return out
