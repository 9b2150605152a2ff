"""One round of inverse transform sampling: the draws of the bulk samplers.

CUDA: ``cuda/sampling.cu`` (for CuPy arrays); NumPy arrays run the CPU references, which
:mod:`hpcgnn.sampling.its` calls once per round. Both functions take the ``rows`` rows
still short of their sample (*active* rows), row ``a`` drawing ``need[a]`` numbers in
round ``rnd``: draw ``t`` uses ``u = to_uniform(chain(keys[a], rnd, t))``. Results come
per draw, the rows' draws concatenated in row order (draw ``t`` of row ``a`` at
``draw_off[a] + t``, :func:`draw_rows` gives each draw's row).

- :func:`its_round`: weighted rows; the position hit in the rows' concatenated prefix
  sums (the first ``i`` of the row's range with ``cum[i] > min(u T_a, T_a^-)``, ``T_a``
  the row total and ``T_a^-`` the double below it);
- :func:`uniform_round`: rows of equal weights; the rank ``min(floor(u m_a), m_a - 1)``
  of the entry drawn among the row's ``m_a`` remaining ones.
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
        One position per draw (NumPy, or CuPy for CuPy inputs).
    """
    if cm.is_cupy(cum):
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
    if cm.is_cupy(remaining):
        return _round_cuda("uniform_round", keys, need, rnd, remaining)
    row, u = _uniforms(keys, need, rnd)
    return np.minimum((u * remaining[row]).astype(np.int64), remaining[row] - 1)


def _round_cuda(kernel: str, keys: Any, need: Any, rnd: int, *rest: Any) -> Any:
    """Launch ``kernel`` of ``sampling.cu``: one thread per active row."""
    import cupy

    keys = cupy.ascontiguousarray(keys, dtype=cupy.uint64)
    need = cupy.ascontiguousarray(need, dtype=cupy.int64)
    off = cupy.cumsum(need) - need
    out = cupy.empty(int(need.sum()), dtype=cupy.int64)
    typed = [
        cupy.ascontiguousarray(a, dtype=cupy.float64 if a.dtype.kind == "f" else cupy.int64)
        for a in rest
    ]
    rows = len(keys)
    args = (keys, need, off, np.int64(rows), np.int64(rnd), *typed, out)
    grid = cm.blocks(rows) if len(out) else 0
    cm.launch("sampling.cu", kernel, keys.device.id, grid, args, torch_stream=False)
    return out
