"""Dropout keep-masks on the device they are applied on, bit-identical to :mod:`hpcgnn.rng`.

The streams are defined by :func:`hpcgnn.rng.dropout_keep` (a block of rows x columns)
and :func:`hpcgnn.rng.dropout_keep_pairs` (chosen entries, e.g. a sparse matrix's
nonzeros), in NumPy. Here they are drawn where they are applied, as boolean tensors:

- CUDA: ``cuda/dropout.cu`` (``hash_keep``, ``hash_pair_keep``), one thread per entry;
- CPU: :func:`keep_matrix` computes the 64-bit row and column words with NumPy (one hash
  per row and per column) and each entry's 32-bit hash with in-place torch ``int32``
  operations on all of torch's threads, block by block in the caches (:data:`HASH_BLOCK`;
  two's-complement wrap-around is the ``uint32`` arithmetic; a logical shift is an
  arithmetic shift and a mask); :func:`keep_pairs` is NumPy's (a sparse matrix's
  nonzeros are few); :func:`keep_pair_words` (GAT's edges and heads) hashes each id's
  word once and runs the entry hash as :func:`keep_matrix` does.

:func:`block_keep` keys the full-batch masks by ``(seed, epoch, layer)``, :func:`rows_keep`
the minibatch masks by ``(seed, epoch, batch, layer)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from hpcgnn.backend import Device, get_device
from hpcgnn.kernels import cuda_modules as cm
from hpcgnn.kernels.rows import row_word
from hpcgnn.rng import (
    Columns,
    column_key,
    dropout_keep_pairs,
    dropout_key,
    ids_of,
    keep_threshold,
    words,
)

_LB = ((16, 0x7FEB352D), (15, 0x846CA68B - (1 << 32)), (16, 0))  # lowbias32's steps
_SIGN = -(1 << 31)  # int32's sign bit


def _signed(w: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(w.view(np.int32))


def _lowbias32_(x: torch.Tensor, tmp: torch.Tensor) -> torch.Tensor:
    """:func:`hpcgnn.rng.lowbias32` of an ``int32`` tensor (its ``uint32`` bits), in place."""
    for shift, mul in _LB:
        torch.bitwise_right_shift(x, shift, out=tmp)
        tmp.bitwise_and_((1 << (32 - shift)) - 1)
        x.bitwise_xor_(tmp)
        if mul:
            x.mul_(mul)
    return x


def _cpu_keep(key: np.uint64, rows: Columns, cols: Columns, p: float) -> torch.Tensor:
    r = _signed(words(key, rows))
    c = _signed(words(column_key(key), cols))
    t = keep_threshold(p)
    if t >= 1 << 32:  # keeps nothing (and t - 2^31 is no int32)
        return torch.zeros((len(r), len(c)), dtype=torch.bool)

    def entry_words(lo: int, hi: int, out: torch.Tensor) -> None:
        torch.bitwise_xor(r[lo:hi, None], c[None, :], out=out)

    return _keep_blocks(len(r), len(c), entry_words, t)


#: Entries per block of the CPU keep-mask hash: a block's ``int32`` words and their shifted
#: copy (512 KiB each) stay in the caches through ``lowbias32``'s eleven passes, which over
#: a whole mask ran at memory speed (a 1M x 64 mask, one thread, busy 2-core machine:
#: 0.38 s against 0.98 s; 2^16 to 2^20 entries alike, 2^14 0.55 s). On a machine with 4
#: MiB of L2 for two cores 2^17 beat 2^18 by 8% (SBM-20k GAT's two attention masks: 6.7
#: against 7.3 ms).
HASH_BLOCK = 1 << 17


def _keep_blocks(
    rows: int,
    width: int,
    entry_words: Callable[[int, int, torch.Tensor], None],
    t: int,
    dtype: torch.dtype = torch.bool,
) -> torch.Tensor:
    """Keep decisions ``lowbias32(w) >= t`` of a ``rows x width`` matrix of entry words.

    ``entry_words(lo, hi, out)`` writes the ``int32`` words of rows ``lo:hi`` into ``out``;
    the hash runs block by block (:data:`HASH_BLOCK` entries) in two reused buffers, so no
    ``int32`` matrix of the whole mask is made. Element-wise integer operations: the same
    decisions whatever the blocks. ``dtype``: booleans, or ones and zeros of a value dtype
    (the comparison writes them directly, faster than booleans).
    """
    out = torch.empty((rows, width), dtype=dtype)
    step = max(1, HASH_BLOCK // max(1, width))
    x = torch.empty((min(step, rows), width), dtype=torch.int32)
    tmp = torch.empty_like(x)
    for lo in range(0, rows, step):
        hi = min(lo + step, rows)
        block = x[: hi - lo]
        entry_words(lo, hi, block)
        _lowbias32_(block, tmp[: hi - lo])
        block.bitwise_xor_(_SIGN)  # unsigned order as signed: u >= t <=> u - 2^31 >= t - 2^31
        torch.ge(block, t + _SIGN, out=out[lo:hi])
    return out


def _device_ids(sel: Columns | torch.Tensor, tdev: torch.device) -> torch.Tensor:
    if isinstance(sel, torch.Tensor):
        return sel.to(device=tdev, dtype=torch.int64)
    if isinstance(sel, tuple):
        return torch.arange(sel[0], max(sel[0], sel[1]), dtype=torch.int64, device=tdev)
    return torch.from_numpy(ids_of(sel)).to(tdev)


def keep_matrix(
    key: np.uint64,
    rows: Columns | torch.Tensor,
    cols: Columns,
    p: float,
    device: Device | None = None,
) -> torch.Tensor:
    """:func:`hpcgnn.rng.dropout_keep` as a boolean tensor on ``device`` (default: CPU).

    ``rows``: ids on the host, or a tensor of them on ``device`` (a hop sampled there).
    """
    device = get_device(device)
    if device.kind != "cuda":
        return _cpu_keep(
            key, rows.cpu().numpy() if isinstance(rows, torch.Tensor) else rows, cols, p
        )
    tdev = device.torch_device
    r, c = _device_ids(rows, tdev), _device_ids(cols, tdev)
    out = torch.empty((len(r), len(c)), dtype=torch.bool, device=tdev)
    if out.numel():
        args = (
            cm.as_cupy(r),
            np.int64(len(r)),
            cm.as_cupy(c),
            np.int64(len(c)),
            np.uint64(key),
            column_key(key),
            np.uint64(keep_threshold(p)),
            cm.as_cupy(out),
        )
        cm.launch("dropout.cu", "hash_keep", cm.device_index(tdev), cm.blocks(out.numel()), args)
    return out


def global_columns(sel: Columns, cols: torch.Tensor) -> torch.Tensor:
    """The global ids of the local columns ``cols`` of a selection ``sel`` (range or ids)."""
    if isinstance(sel, tuple):
        return cols + sel[0]
    return torch.from_numpy(np.asarray(sel, dtype=np.int64)).to(cols.device)[cols]


def keep_pairs(
    key: np.uint64,
    rows: torch.Tensor,
    cols: torch.Tensor,
    p: float,
) -> torch.Tensor:
    """:func:`hpcgnn.rng.dropout_keep_pairs` of the entries ``(rows[k], cols[k])``.

    ``rows``, ``cols``: ``int64`` tensors (a sparse matrix's nonzeros, global indices) on
    the device where the mask is returned.
    """
    if rows.device.type != "cuda":
        return torch.from_numpy(dropout_keep_pairs(key, rows.numpy(), cols.numpy(), p))
    out = torch.empty(len(rows), dtype=torch.bool, device=rows.device)
    if out.numel():
        args = (
            cm.as_cupy(rows.contiguous()),
            cm.as_cupy(cols.contiguous()),
            np.int64(len(rows)),
            np.uint64(key),
            column_key(key),
            np.uint64(keep_threshold(p)),
            cm.as_cupy(out),
        )
        cm.launch(
            "dropout.cu",
            "hash_pair_keep",
            cm.device_index(rows.device),
            cm.blocks(out.numel()),
            args,
        )
    return out


def keep_pair_words(
    key: np.uint64,
    row_ids: torch.Tensor,
    col_ids: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    p: float,
    dtype: torch.dtype = torch.bool,
) -> torch.Tensor:
    """:func:`keep_pairs` of ``(row_ids[rows[e]], col_ids[cols[e], k])``, ``E x K`` (CPU).

    The same decisions as :func:`keep_pairs` of the expanded pairs, with each id's 64-bit
    word hashed once: ``row_ids`` (``R``) and ``col_ids`` (``C x K``) are the distinct
    global ids, ``rows`` and ``cols`` (``E``) index them. The words are gathered per entry
    and only the 32-bit ``lowbias32`` runs on every entry (in place, torch ``int32``): an
    edge pattern's keep decisions at a tenth of the per-pair hashing's time. A column's
    ``K`` words are gathered as one where they make one (:func:`row_word`; 0.3x a 2-D
    gather's time at ``K = 4``). ``dtype``: booleans, or ones and zeros of a value dtype
    (what a product with values multiplies by fastest: a mixed product with booleans took
    3x as long).
    """
    t = keep_threshold(p)
    heads = col_ids.shape[1]
    if t >= 1 << 32:  # keeps nothing
        return torch.zeros((len(rows), heads), dtype=dtype)
    r = _signed(words(key, row_ids.numpy()))
    c = _signed(words(column_key(key), col_ids.reshape(-1).numpy())).view(-1, heads)
    word = torch.int32 if heads == 1 else row_word(4 * heads)

    def entry_words(lo: int, hi: int, out: torch.Tensor) -> None:
        if word is None:
            torch.index_select(c, 0, cols[lo:hi], out=out)
        else:
            torch.index_select(c.view(word).view(-1), 0, cols[lo:hi], out=out.view(word).view(-1))
        out.bitwise_xor_(r.index_select(0, rows[lo:hi])[:, None])

    return _keep_blocks(len(rows), heads, entry_words, t, dtype)


def block_keep(
    seed: int,
    epoch: int,
    layer: int,
    rows: Columns,
    cols: Columns,
    p: float,
    device: Device | None = None,
) -> torch.Tensor:
    """The full-batch keep-mask of the block ``rows x cols`` of a layer's input."""
    return keep_matrix(dropout_key(seed, epoch, layer), rows, cols, p, device)


def rows_keep(
    seed: int,
    epoch: int,
    batch: int,
    layer: int,
    row_ids: np.ndarray | torch.Tensor,
    width: int,
    p: float,
    device: Device | None = None,
    cols: np.ndarray | None = None,
) -> torch.Tensor:
    """The minibatch keep-mask of the rows ``row_ids`` of a batch's layer input.

    ``width``: the layer input's width; ``cols``: only these of its columns (a GIST
    sub-network's global ids; default all).
    """
    return keep_matrix(
        dropout_key(seed, epoch, layer, batch),
        row_ids,
        (0, width) if cols is None else cols,
        p,
        device,
    )
