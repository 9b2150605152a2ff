"""The CUDA kernels' algorithms in plain Python integers, to check them on a CPU.

Each function follows its kernel in ``cuda/`` loop for loop (one thread = one call of the
inner function), with ``uint64`` wrap-around done by masking.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

M64 = (1 << 64) - 1


def mix(x: int) -> int:
    """``hpcgnn_mix`` of ``cuda/hash.cuh``."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def chain(key: int, w: int) -> int:
    """``hpcgnn_chain``: ``mix(key ^ (uint64)(int64)w)``."""
    return mix(key ^ (w & M64))


def uniform(bits: int) -> float:
    """``hpcgnn_uniform``: the top 53 bits times ``2^-53``."""
    return (bits >> 11) * (1.0 / 9007199254740992.0)


def sfc64_next(s: list[int]) -> int:
    """``hpcgnn_sfc64_next`` on the state ``[a, b, c, counter]`` (updated in place)."""
    tmp = (s[0] + s[1] + s[3]) & M64
    s[3] = (s[3] + 1) & M64
    s[0] = s[1] ^ (s[1] >> 11)
    s[1] = (s[2] + (s[2] << 3)) & M64
    s[2] = ((((s[2] << 24) | (s[2] >> 40)) & M64) + tmp) & M64
    return tmp


def sfc64_block_keep(states: np.ndarray, ints: np.ndarray, p: float) -> np.ndarray:
    """``sfc64_block_keep`` of ``cuda/dropout.cu``, one chunk after the other."""
    chunk0, chunks, chunk_rows, r0, r1, num_cols, c0, c1 = (int(v) for v in ints)
    out = np.zeros((max(0, r1 - r0), c1 - c0), dtype=bool)
    for c in range(chunks):
        s = [int(v) for v in states[c]]
        base = (chunk0 + c) * chunk_rows
        lo, hi = max(r0, base), min(r1, base + chunk_rows)
        for _ in range((lo - base) * num_cols):
            sfc64_next(s)
        for r in range(lo, hi):
            for j in range(num_cols):
                u = uniform(sfc64_next(s))
                if c0 <= j < c1:
                    out[r - r0, j - c0] = u >= p
    return out


def hash_rows_keep(
    row_ids: np.ndarray, width: int, key: int, p: float, cols: np.ndarray | None = None
) -> np.ndarray:
    """``hash_rows_keep`` of ``cuda/dropout.cu`` (``cols``: all ``width`` columns by default)."""
    cols = np.arange(width) if cols is None else cols
    out = np.zeros((len(row_ids), len(cols)), dtype=bool)
    for i, v in enumerate(row_ids.tolist()):
        for j, c in enumerate(cols.tolist()):
            counter = ((v & M64) * width + c) & M64
            out[i, j] = uniform(mix(counter ^ key)) >= p
    return out


def _draws(keys, need, rnd):
    """``(a, t, u)`` of every draw, in output order (``draw_off[a] + t``)."""
    for a, (k, n) in enumerate(zip(keys.tolist(), need.tolist(), strict=True)):
        key = chain(k, rnd)
        for t in range(n):
            yield a, t, uniform(chain(key, t))


def its_round(keys, need, rnd, cum, sub_ptr, total) -> np.ndarray:
    """``its_round`` of ``cuda/sampling.cu``."""
    out = []
    for a, _, u in _draws(keys, need, rnd):
        tot = float(total[a])
        x = min(u * tot, math.nextafter(tot, -math.inf))
        lo, hi = int(sub_ptr[a]), int(sub_ptr[a + 1])
        out.append(bisect.bisect_right(cum[lo:hi].tolist(), x) + lo)
    return np.array(out, dtype=np.int64)


def uniform_round(keys, need, rnd, remaining) -> np.ndarray:
    """``uniform_round`` of ``cuda/sampling.cu``."""
    out = []
    for a, _, u in _draws(keys, need, rnd):
        m = int(remaining[a])
        out.append(min(int(u * m), m - 1))
    return np.array(out, dtype=np.int64)


def gather_ranges(indptr, indices, pos) -> tuple[np.ndarray, np.ndarray]:
    """``gather_ranges`` of ``cuda/csr.cu`` (``out_ptr`` as its caller computes it)."""
    lens = [int(indptr[q + 1] - indptr[q]) for q in pos]
    out_ptr = np.concatenate([[0], np.cumsum(lens, dtype=np.int64)]).astype(np.int64)
    out = np.empty(int(out_ptr[-1]), dtype=indices.dtype)
    for k, q in enumerate(pos):
        src = int(indptr[q])
        for e in range(lens[k]):
            out[out_ptr[k] + e] = indices[src + e]
    return out_ptr, out
