"""Inverse transform sampling (ITS) without replacement, one distribution per CSR row.

Given the rows of a probability matrix ``P`` (any non-negative weights; rows need not be
normalised), :func:`sample_rows` selects ``min(s_r, #positive entries of row r)``
distinct entries per row:

1. prefix sums of each row (exact per row, see :func:`segment_cumsum`);
2. ``s_r - have_r`` uniforms per row, each scaled by the row total and binary-searched in
   the row's prefix sums; the distinct entries hit are accepted;
3. accepted entries get weight 0 and the rows still short of ``s_r`` repeat from 1.

For rows of equal weights (GraphSAGE: ``P = Q A^T`` normalised is uniform over each
row) the prefix sums are known in closed form, ``c_k = (k + 1) / d``, so the search is
``floor(u d)`` and :func:`sample_uniform_rows` only touches the drawn entries, never the
whole row; there a repeat is simply rejected and redrawn in the next round, the paper's
"repeat until ``s`` distinct".

Drawing from the remaining weights and rejecting repeats inside a round is the
sequential ("successive") sampling without replacement that rejection of already chosen
entries gives; setting chosen weights to zero only saves the rejected draws, so a row
needs at most ``s_r`` rounds. Draw ``t`` of round ``k`` of a row uses the uniform
``hash(row_key, k, t)``; prefix sums, totals and searches use only the row's own
entries, so the result for a row is bit-identical wherever and with whichever other rows
it is computed. A round's draws and searches are one kernel
(:func:`hpcgnn.kernels.sampling.its_round`, :func:`~hpcgnn.kernels.sampling.uniform_round`,
CPU reference and CUDA ``cuda/sampling.cu``); the rounds and acceptance stay here.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from hpcgnn.kernels.sampling import draw_rows, its_round, uniform_round
from hpcgnn.sampling.setops import unique


def _segments(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entry ids, row position (within ``rows``) and in-row offset of the entries of ``rows``."""
    starts = indptr[rows]
    lens = indptr[rows + 1] - starts
    total = int(lens.sum())
    first = np.cumsum(lens) - lens
    pos = np.arange(total, dtype=np.int64) - np.repeat(first, lens)
    entry = np.repeat(starts, lens) + pos
    owner = np.repeat(np.arange(len(rows), dtype=np.int64), lens)
    return entry, owner, pos


def segment_cumsum(indptr: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Inclusive prefix sums of ``weights`` restarted at every row of ``indptr``.

    Rows are grouped by length into power-of-two buckets and each bucket is summed as a
    dense 2D array along its rows, so every row's prefix sums are a sequential sum of
    that row's own entries only (no cancellation against other rows' offsets).
    """
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
        entry, owner, pos = _segments(indptr, rows)
        dense = np.zeros((len(rows), 1 << int(b)), dtype=np.float64)
        dense[owner, pos] = w[entry]
        np.cumsum(dense, axis=1, out=dense)
        out[entry] = dense[owner, pos]
    return out


def row_totals(indptr: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """Row sums from the output of :func:`segment_cumsum` (0 for empty rows)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    out = np.zeros(len(indptr) - 1, dtype=np.float64)
    ends = indptr[1:]
    nonempty = ends > indptr[:-1]
    out[nonempty] = cum[ends[nonempty] - 1]
    return out


def _rounds(have: np.ndarray, target: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(round, rows still short of target)`` until every row has its target.

    The caller adds each round's accepted entries to ``have`` in place.
    """
    rnd = 0
    while len(active := np.flatnonzero(have < target)):
        yield rnd, active
        rnd += 1


def sample_rows(
    indptr: np.ndarray, weights: np.ndarray, counts: int | np.ndarray, row_keys: np.ndarray
) -> np.ndarray:
    """Select distinct entries per row with probability proportional to their weights.

    Parameters
    ----------
    indptr
        CSR row pointer of the probability matrix (``R + 1`` entries).
    weights
        Its values; entries ``<= 0`` are never selected.
    counts
        Entries wanted per row (scalar or length ``R``); a row with fewer positive
        entries gets all of them.
    row_keys
        ``uint64`` key of each row's random stream (length ``R``).

    Returns
    -------
    numpy.ndarray
        Boolean mask over the entries: ``True`` where selected.

    """
    indptr = np.asarray(indptr, dtype=np.int64)
    nrows = len(indptr) - 1
    w = np.asarray(weights, dtype=np.float64)
    w = np.where(w > 0.0, w, 0.0)
    row_of = np.repeat(np.arange(nrows, dtype=np.int64), np.diff(indptr))
    positive = np.bincount(row_of[w > 0.0], minlength=nrows)
    target = np.minimum(np.broadcast_to(np.asarray(counts, dtype=np.int64), (nrows,)), positive)
    have = np.zeros(nrows, dtype=np.int64)
    selected = np.zeros(len(w), dtype=bool)
    keys = np.asarray(row_keys, dtype=np.uint64)
    for rnd, active in _rounds(have, target):
        entry, owner, _ = _segments(indptr, active)
        lens = indptr[active + 1] - indptr[active]
        sub_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        cum = segment_cumsum(sub_ptr, w[entry])
        total = row_totals(sub_ptr, cum)
        hit = its_round(keys[active], target[active] - have[active], rnd, cum, sub_ptr, total)
        hit = unique(hit)
        selected[entry[hit]] = True
        w[entry[hit]] = 0.0
        have[active] += np.bincount(owner[hit], minlength=len(active))
    return selected


def sample_uniform_rows(
    indptr: np.ndarray, counts: int | np.ndarray, row_keys: np.ndarray
) -> np.ndarray:
    """:func:`sample_rows` for rows whose entries all have the same weight.

    With equal weights the prefix sum of the ``m`` entries not chosen yet is their rank,
    so draw ``t`` of round ``k`` (uniform ``u = hash(row_key, k, t)``) picks the
    ``floor(u m)``-th remaining entry of its row. Round 0 needs no prefix sums at all
    (every entry remains), so it touches only the drawn entries; later rounds, for the
    few rows that drew a repeat, rank the remaining entries with an integer prefix sum
    (exact). Rows with ``d_r <= s_r`` take every entry without drawing.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    nrows = len(indptr) - 1
    lens = np.diff(indptr)
    target = np.minimum(np.broadcast_to(np.asarray(counts, dtype=np.int64), (nrows,)), lens)
    selected = np.zeros(int(indptr[-1]), dtype=bool)
    whole = (target == lens) & (lens > 0)
    selected[_segments(indptr, np.flatnonzero(whole))[0]] = True
    have = np.where(whole, lens, 0)
    keys = np.asarray(row_keys, dtype=np.uint64)
    for rnd, active in _rounds(have, target):
        remaining = lens[active] - have[active]
        need = target[active] - have[active]
        draw_row = draw_rows(need)
        rank = uniform_round(keys[active], need, rnd, remaining)
        if rnd == 0:
            hit = indptr[active][draw_row] + rank
        else:
            entry, _, _ = _segments(indptr, active)
            left = np.cumsum(~selected[entry])  # integer prefix sums: exact
            sub_start = np.cumsum(lens[active]) - lens[active]
            base = np.where(sub_start > 0, left[np.maximum(sub_start - 1, 0)], 0)
            hit = entry[np.searchsorted(left, base[draw_row] + rank + 1)]
        hit = unique(hit)
        selected[hit] = True
        have[active] += np.bincount(
            np.searchsorted(indptr[active], hit, side="right") - 1, minlength=len(active)
        )
    return selected
