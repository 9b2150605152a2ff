"""The kernels that decide the bulk samplers' draws: ITS rounds, stream keys, prefix sums.

CUDA: ``cuda/sampling.cu``, for tensors on the sampling device (a GPU, or the emulated
device's host build); NumPy arrays run the CPU references. The samplers reach them
through :mod:`hpcgnn.sampling.arrays`, so a sample drawn on a GPU is the host's, bit for
bit. The two rounds take the ``rows`` rows still short of their sample (*active* rows),
row ``a`` drawing ``need[a]`` numbers in round ``rnd``: draw ``t`` uses
``u = to_uniform(chain(keys[a], rnd, t))``. Results come per draw, the rows' draws
concatenated in row order (draw ``t`` of row ``a`` at ``draw_off[a] + t``,
:func:`draw_rows` gives each draw's row).

- :func:`its_round`: weighted rows; the position hit in the rows' concatenated prefix
  sums (the first ``i`` of the row's range with ``cum[i] > min(u T_a, T_a^-)``, ``T_a``
  the row total and ``T_a^-`` the double below it);
- :func:`uniform_round`: rows of equal weights; the rank ``min(floor(u m_a), m_a - 1)``
  of the entry drawn among the row's ``m_a`` remaining ones;
- :func:`row_keys`: the rows' stream keys ``chain(key, batch, hop[, vertex])``;
- :func:`segment_cumsum`: each row's inclusive prefix sums, summed sequentially.

Keys travel as ``uint64`` NumPy arrays or as ``int64`` tensors holding the same bits
(torch has no ``uint64`` indexing; the kernels read them unsigned).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpcgnn.kernels import cuda_modules as cm
from hpcgnn.rng import chain, to_uniform


def draw_rows(need: np.ndarray) -> np.ndarray:
    """Row (position among the active rows) of every draw: ``need[a]`` times ``a``."""
    return np.repeat(np.arange(len(need), dtype=np.int64), need)


def _uniforms(keys: np.ndarray, need: np.ndarray, rnd: int) -> tuple[np.ndarray, np.ndarray]:
    """Each draw's row and its uniform ``to_uniform(chain(keys[row], rnd, t))``."""
    row = draw_rows(need)
    t = np.arange(len(row), dtype=np.int64) - np.repeat(np.cumsum(need) - need, need)
    return row, to_uniform(chain(np.asarray(keys, dtype=np.uint64)[row], rnd, t))


def search(cum: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each query, the first index ``i`` in ``[lo, hi)`` with ``cum[i] > x`` (vectorised)."""
    lo = lo.copy()
    hi = hi.copy()
    last = len(cum) - 1
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) >> 1
        right = open_ & (cum[np.minimum(mid, last)] <= x)
        left = open_ & ~right
        lo[right] = mid[right] + 1
        hi[left] = mid[left]


def its_round(
    keys: Any, need: Any, rnd: int, cum: Any, sub_ptr: Any, total: Any
) -> Any:
    """Positions in ``cum`` hit by the draws of round ``rnd`` (weighted rows).

    Parameters
    ----------
    keys
        ``uint64`` stream key of each active row.
    need
        Draws of each active row (int64).
    rnd
        The round.
    cum
        The active rows' inclusive prefix sums, concatenated (float64).
    sub_ptr
        Row pointer of ``cum`` (``len(keys) + 1`` entries).
    total
        Each active row's total (float64, positive).

    Returns
    -------
    int64 array
        One position per draw (NumPy, or a tensor on the inputs' device for tensors).
    """
    if cm.is_tensor(cum):
        return _round_cuda("its_round", keys, need, rnd, cum, sub_ptr, total)
    row, u = _uniforms(keys, need, rnd)
    tot = total[row]
    x = np.minimum(u * tot, np.nextafter(tot, -np.inf))
    return search(cum, sub_ptr[row], sub_ptr[row + 1], x)


def uniform_round(keys: Any, need: Any, rnd: int, remaining: Any) -> Any:
    """Rank, among its row's ``remaining`` entries, of each draw of round ``rnd``.

    ``keys``, ``need``, ``rnd`` as for :func:`its_round`; ``remaining`` (int64, ``>= 1``)
    counts each active row's entries not chosen yet. One int64 rank per draw.
    """
    if cm.is_tensor(remaining):
        return _round_cuda("uniform_round", keys, need, rnd, remaining)
    row, u = _uniforms(keys, need, rnd)
    return np.minimum((u * remaining[row]).astype(np.int64), remaining[row] - 1)


def row_keys(key: np.uint64, batch: Any, hop: int, vertex: Any | None = None) -> Any:
    """The stream key ``chain(key, batch[i], hop, vertex[i])`` of every element.

    ``vertex`` ``None``: ``chain(key, batch[i], hop)``. ``uint64`` NumPy keys for NumPy
    ``batch``; for a device tensor, an ``int64`` tensor of the same bits.
    """
    if not cm.is_tensor(batch):
        words = (batch, hop) if vertex is None else (batch, hop, vertex)
        return chain(np.uint64(key), *words)
    import torch

    n = len(batch)
    out = torch.empty(n, dtype=torch.int64, device=batch.device)
    batch = batch.to(torch.int64).contiguous()
    vert = batch if vertex is None else vertex.to(torch.int64).contiguous()
    args = (np.uint64(key), np.int64(n), batch, np.int64(hop), vert,
            np.int64(vertex is not None), out)
    _launch("row_keys", batch, n, args)
    return out


def segment_cumsum(indptr: Any, weights: Any) -> Any:
    """Inclusive prefix sums of ``weights`` restarted at every row of ``indptr`` (float64).

    Each row's prefix sums are a sequential sum of that row's own entries only, on both
    paths (no cancellation against other rows' offsets, no parallel scan's rounding).
    NumPy: rows are grouped by length into power-of-two buckets and each bucket is summed
    as a dense 2D array along its rows; tensors: the ``segment_cumsum`` kernel.
    """
    if cm.is_tensor(weights):
        import torch

        wt = weights.to(torch.float64).contiguous()
        res = torch.empty_like(wt)
        rows = len(indptr) - 1
        _launch("segment_cumsum", wt, rows, (indptr.contiguous(), np.int64(rows), wt, res))
        return res
    indptr = np.asarray(indptr, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    out = np.empty_like(w)
    lens = np.diff(indptr)
    nonempty = np.flatnonzero(lens)
    if len(nonempty) == 0:
        return out
    bucket = np.ceil(np.log2(lens[nonempty])).astype(np.int64)
    for b in np.unique(bucket):
        rows = nonempty[bucket == b]
        starts = indptr[rows]
        rl = indptr[rows + 1] - starts
        pos = np.arange(int(rl.sum()), dtype=np.int64) - np.repeat(np.cumsum(rl) - rl, rl)
        entry = np.repeat(starts, rl) + pos
        owner = np.repeat(np.arange(len(rows), dtype=np.int64), rl)
        dense = np.zeros((len(rows), 1 << int(b)), dtype=np.float64)
        dense[owner, pos] = w[entry]
        np.cumsum(dense, axis=1, out=dense)
        out[entry] = dense[owner, pos]
    return out


def _launch(kernel: str, like: Any, work: int, args: tuple) -> None:
    """Launch ``kernel`` of ``sampling.cu`` on ``like``'s device, one thread per work item."""
    cast = tuple(cm.as_cupy(a) if cm.is_tensor(a) else a for a in args)
    cm.launch("sampling.cu", kernel, cm.device_index(like.device), cm.blocks(work), cast)


def _round_cuda(kernel: str, keys: Any, need: Any, rnd: int, *rest: Any) -> Any:
    """Launch ``kernel`` of ``sampling.cu``: one thread per active row."""
    import torch

    need = need.to(torch.int64).contiguous()
    off = torch.cumsum(need, 0) - need
    total = int(off[-1] + need[-1]) if len(need) else 0
    out = torch.empty(total, dtype=torch.int64, device=need.device)
    typed = [a.to(torch.float64 if a.is_floating_point() else torch.int64) for a in rest]
    rows = len(keys)
    args = (keys.to(torch.int64), need, off, np.int64(rows), np.int64(rnd), *typed, out)
    if total:
        _launch(kernel, need, rows, args)
    return out
