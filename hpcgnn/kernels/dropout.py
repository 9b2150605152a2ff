"""Dropout keep-masks on the device they are applied on, bit-identical to :mod:`hpcgnn.rng`.

CUDA: ``cuda/dropout.cu``. The CPU references are :func:`hpcgnn.rng.dropout_keep` (block
stream) and :func:`hpcgnn.rng.dropout_keep_rows` (hash stream), which define the streams;
the functions here return their masks as boolean tensors on the device:

- :func:`block_keep`: full-batch masks. On a GPU the host computes each chunk's SFC64
  initial state with NumPy (:func:`chunk_states`, seeding only: four words a chunk) and
  ``sfc64_block_keep`` advances it, one thread per chunk (see the cost note in the
  source); a column index array is served by drawing its span ``[min, max]`` and
  selecting the columns on the device;
- :func:`rows_keep`: minibatch masks, one hash per entry (``hash_rows_keep``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from hpcgnn.backend import Device, get_device
from hpcgnn.kernels import cuda_modules as cm
from hpcgnn.rng import (
    CHUNK_ROWS,
    TAG_DROPOUT,
    TAG_DROPOUT_BLOCK,
    Columns,
    chunk_seed,
    dropout_keep,
    dropout_keep_rows,
    stream_key,
)

#: Threads per block of ``sfc64_block_keep``: one, so the chunks' long serial chains spread
#: over all the SMs. With 256 a Reddit-sized input's 228 chunks shared one SM (one block):
#: 173 ms of masks per epoch on an H200, 33 ms with one thread per block (torch.profiler,
#: perf/bench_gpu.py, 2026-11-26; the epoch went from 212 to 79 ms).
CHUNK_BLOCK = 1


def keep_threshold(p: float) -> np.uint64:
    """The integer form of ``u >= p`` for ``u = (bits >> 11) * 2^-53``: ``ceil(p 2^53)``.

    ``u >= p`` exactly when ``bits >> 11 >= ceil(p 2^53)`` (the scaling by a power of two
    is exact), so the kernels compare integers and keep the CPU's decisions bit for bit.
    """
    return np.uint64(math.ceil(p * 2.0**53))


def chunk_states(key: np.uint64, first: int, count: int) -> np.ndarray:
    """Initial SFC64 states of chunks ``first .. first + count - 1`` of the block stream.

    Returns
    -------
    numpy.ndarray
        ``count x 4`` ``uint64``: NumPy's ``SFC64(chunk_seed(key, k))`` state words
        ``a, b, c, counter`` (after seeding), what ``sfc64_block_keep`` starts from.
    """
    out = np.empty((max(count, 0), 4), dtype=np.uint64)
    for i in range(count):
        out[i] = np.random.SFC64(chunk_seed(key, first + i)).state["state"]["state"]
    return out


def block_launch(
    seed: int, epoch: int, layer: int, rows: tuple[int, int], cols: Columns, num_cols: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Host side of ``sfc64_block_keep`` for the block ``rows x cols`` of a layer's mask.

    Returns
    -------
    states
        ``count x 4`` ``uint64`` initial states of the chunks the rows overlap.
    ints
        The kernel's integer arguments ``chunk0, chunks, chunk_rows, r0, r1, num_cols, c0,
        c1`` (int64): the kernel fills the ``(r1 - r0) x (c1 - c0)`` window of columns.
    pick
        ``None`` for a column range; for an index array, the window's columns to keep
        (``cols - c0``), in the order of ``cols``.
    """
    r0, r1 = rows
    pick = None
    if isinstance(cols, tuple):
        c0, c1 = cols[0], max(cols[0], cols[1])
    else:
        ids = np.asarray(cols, dtype=np.int64)
        c0, c1 = (int(ids.min()), int(ids.max()) + 1) if len(ids) else (0, 0)
        pick = ids - c0
    first = r0 // CHUNK_ROWS
    count = max(0, (r1 - 1) // CHUNK_ROWS + 1 - first) if r1 > r0 else 0
    key = stream_key(seed, TAG_DROPOUT_BLOCK, epoch, layer)
    ints = np.array([first, count, CHUNK_ROWS, r0, r1, num_cols, c0, c1], dtype=np.int64)
    return chunk_states(key, first, count), ints, pick


def block_keep(
    seed: int, epoch: int, layer: int, rows: tuple[int, int], cols: Columns, num_cols: int,
    p: float, device: Device | None = None,
) -> torch.Tensor:
    """:func:`hpcgnn.rng.dropout_keep` as a boolean tensor on ``device`` (default: CPU)."""
    device = get_device(device)
    if device.kind != "cuda":
        return device.from_numpy(dropout_keep(seed, epoch, layer, rows, cols, num_cols, p))
    states, ints, pick = block_launch(seed, epoch, layer, rows, cols, num_cols)
    tdev = device.torch_device
    out = torch.empty((max(0, rows[1] - rows[0]), int(ints[7] - ints[6])), dtype=torch.bool,
                      device=tdev)
    if out.numel():
        dev_states = torch.from_numpy(states.view(np.int64)).to(tdev)
        args = (cm.as_cupy(dev_states), *ints, keep_threshold(p), cm.as_cupy(out))
        grid = cm.blocks(len(states), CHUNK_BLOCK)
        cm.launch("dropout.cu", "sfc64_block_keep", cm.device_index(tdev), grid, args,
                  block=CHUNK_BLOCK)
    if pick is not None:
        out = out[:, torch.from_numpy(pick).to(tdev)]
    return out


def rows_keep(
    seed: int, epoch: int, batch: int, layer: int, row_ids: np.ndarray, width: int, p: float,
    device: Device | None = None, cols: np.ndarray | None = None,
) -> torch.Tensor:
    """:func:`hpcgnn.rng.dropout_keep_rows` as a boolean tensor on ``device`` (default: CPU).

    ``cols``: only these columns of the ``width`` (a GIST sub-network's), as there.
    """
    device = get_device(device)
    if device.kind != "cuda":
        return device.from_numpy(
            dropout_keep_rows(seed, epoch, batch, layer, row_ids, width, p, cols)
        )
    tdev = device.torch_device
    ids = torch.from_numpy(np.ascontiguousarray(row_ids, dtype=np.int64)).to(tdev)
    col_ids = torch.arange(width) if cols is None else torch.from_numpy(
        np.ascontiguousarray(cols, dtype=np.int64)
    )
    col_ids = col_ids.to(tdev)
    ncols = len(col_ids)
    out = torch.empty((len(ids), ncols), dtype=torch.bool, device=tdev)
    if out.numel():
        key = stream_key(seed, TAG_DROPOUT, epoch, batch, layer)
        args = (cm.as_cupy(ids), np.int64(len(ids)), np.int64(width), cm.as_cupy(col_ids),
                np.int64(ncols),
                np.uint64(key), keep_threshold(p), cm.as_cupy(out))
        cm.launch("dropout.cu", "hash_rows_keep", cm.device_index(tdev), cm.blocks(out.numel()),
                  args)
    return out
