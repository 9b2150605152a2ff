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

from hpcgnn.kernels.sampling import its_round, uniform_round
from hpcgnn.sampling.arrays import Array, HostOps, ops
from hpcgnn.sampling.setops import unique


def _segments(xp: HostOps, indptr: Array, rows: Array) -> tuple[Array, Array, Array]:
    """Entry ids, row position (within ``rows``) and in-row offset of the entries of ``rows``."""
    starts = indptr[rows]
    lens = indptr[rows + 1] - starts
    total = int(lens.sum())
    first = xp.cumsum(lens) - lens
    pos = xp.arange(total) - xp.repeat(first, lens)
    entry = xp.repeat(starts, lens) + pos
    owner = xp.owners(lens)
    return entry, owner, pos


def segment_cumsum(indptr: Array, weights: Array) -> Array:
    """Inclusive prefix sums of ``weights`` restarted at every row of ``indptr``.

    Sequential per row, on the host and on a device alike
    (:func:`hpcgnn.kernels.sampling.segment_cumsum`).
    """
    return ops(weights).segment_cumsum(indptr, weights)


def row_totals(indptr: Array, cum: Array) -> Array:
    """Row sums from the output of :func:`segment_cumsum` (0 for empty rows)."""
    xp = ops(cum)
    out = xp.zeros(len(indptr) - 1, "float64")
    ends = indptr[1:]
    nonempty = ends > indptr[:-1]
    out[nonempty] = cum[ends[nonempty] - 1]
    return out


def _rounds(xp: HostOps, have: Array, target: Array) -> Iterator[tuple[int, Array]]:
    """Yield ``(round, rows still short of target)`` until every row has its target.

    The caller adds each round's accepted entries to ``have`` in place.
    """
    rnd = 0
    while len(active := xp.flatnonzero(have < target)):
        yield rnd, active
        rnd += 1


def _targets(xp: HostOps, counts: int | Array, available: Array) -> Array:
    """``min(counts, available)`` per row (``counts`` a scalar or one per row)."""
    if isinstance(counts, (int, np.integer)):
        return xp.minimum(available, int(counts))
    return xp.minimum(xp.int64(xp.asarray(counts)), available)


def sample_rows(indptr: Array, weights: Array, counts: int | Array, row_keys: Array) -> Array:
    """Select distinct entries per row with probability proportional to their weights.

    Parameters
    ----------
    indptr
        CSR row pointer of the probability matrix (``R + 1`` entries, int64).
    weights
        Its values (float64); entries ``<= 0`` are never selected.
    counts
        Entries wanted per row (scalar or length ``R``); a row with fewer positive
        entries gets all of them.
    row_keys
        Key of each row's random stream (length ``R``; ``uint64``, or on a device int64
        tensors of the same bits).

    Returns
    -------
    array
        Boolean mask over the entries: ``True`` where selected (on the inputs' device).

    """
    xp = ops(weights)
    nrows = len(indptr) - 1
    w = xp.float64(weights)
    w = xp.where(w > 0.0, w, 0.0)
    row_of = xp.rows_of(indptr)
    target = _targets(xp, counts, xp.bincount(row_of[w > 0.0], nrows))
    have = xp.zeros(nrows)
    selected = xp.zeros(len(w), "bool")
    for rnd, active in _rounds(xp, have, target):
        entry, owner, _ = _segments(xp, indptr, active)
        sub_ptr = xp.ptr(indptr[active + 1] - indptr[active])
        cum = segment_cumsum(sub_ptr, w[entry])
        total = row_totals(sub_ptr, cum)
        hit = its_round(row_keys[active], target[active] - have[active], rnd, cum, sub_ptr,
                        total)
        hit = unique(hit)
        selected[entry[hit]] = True
        w[entry[hit]] = 0.0
        have[active] += xp.bincount(owner[hit], len(active))
    return selected


def sample_uniform_rows(indptr: Array, counts: int | Array, row_keys: Array) -> Array:
    """:func:`sample_rows` for rows whose entries all have the same weight.

    With equal weights the prefix sum of the ``m`` entries not chosen yet is their rank,
    so draw ``t`` of round ``k`` (uniform ``u = hash(row_key, k, t)``) picks the
    ``floor(u m)``-th remaining entry of its row. Round 0 needs no prefix sums at all
    (every entry remains), so it touches only the drawn entries; later rounds, for the
    few rows that drew a repeat, rank the remaining entries with an integer prefix sum
    (exact). Rows with ``d_r <= s_r`` take every entry without drawing.
    """
    xp = ops(indptr)
    lens = xp.diff(indptr)
    target = _targets(xp, counts, lens)
    selected = xp.zeros(int(indptr[-1]), "bool")
    whole = (target == lens) & (lens > 0)
    selected[_segments(xp, indptr, xp.flatnonzero(whole))[0]] = True
    have = xp.where(whole, lens, 0)
    for rnd, active in _rounds(xp, have, target):
        remaining = lens[active] - have[active]
        need = target[active] - have[active]
        draw_row = xp.owners(need)
        rank = uniform_round(row_keys[active], need, rnd, remaining)
        if rnd == 0:
            hit = indptr[active][draw_row] + rank
        else:
            entry, _, _ = _segments(xp, indptr, active)
            left = xp.cumsum(~selected[entry])  # integer prefix sums: exact
            sub_start = xp.cumsum(lens[active]) - lens[active]
            base = xp.where(sub_start > 0, left[xp.maximum(sub_start - 1, 0)], 0)
            hit = entry[xp.searchsorted(left, base[draw_row] + rank + 1)]
        hit = unique(hit)
        selected[hit] = True
        have[active] += xp.bincount(
            xp.searchsorted(indptr[active], hit, right=True) - 1, len(active)
        )
    return selected
