"""The real kernels of ``cuda/*.cu``, built for the host, against their CPU twins byte for byte.

Every kernel runs under every thread order and with the grid capped (the ``settings``
fixture), with the launch geometry of its dispatch, into outputs poisoned before the
launch (all-ones bytes: an element left unwritten shows). ``test_host_build.py`` runs
this file again in a subprocess under AddressSanitizer and UBSan.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hpcgnn.kernels import cuda_modules as cm
from hpcgnn.kernels.csr import ROW_BLOCK, ROW_BLOCKS, gather_ranges
from hpcgnn.kernels.rows import scatter_map
from hpcgnn.kernels.sampling import its_round, row_keys, uniform_round
from hpcgnn.rng import (
    chain,
    column_key,
    dropout_keep,
    dropout_keep_pairs,
    dropout_key,
    ids_of,
    keep_threshold,
)
from hpcgnn.sampling.its import row_totals, segment_cumsum
from tests.kernels.host import host, poisoned, same_bytes

FLOATS = [np.float32, np.float64]
INDICES = [np.int32, np.int64]


def _launch(source: str, name: str, work: int, args: tuple, block: int = cm.BLOCK) -> None:
    """Launch as the dispatch does: ``cm.blocks(work)`` blocks, nothing for no work."""
    grid = cm.blocks(work, block)
    if grid:
        host(source).launch(name, grid, block, args)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# rows.cu -----------------------------------------------------------------------------------

def _value(dtype: type, packed: bool) -> str:
    """rows.cu's value type: the scalar, or its 16-byte pack ``hpcgnn_vec16``."""
    c = cm.c_type(np.dtype(dtype))
    return f"hpcgnn_vec16<{c}>" if packed else c


def _rows_name(kernel: str, dtype: type, itype: type, packed: bool = False) -> str:
    return f"{kernel}<{_value(dtype, packed)}, {cm.c_type(np.dtype(itype))}>"


def _width(f: int, dtype: type, packed: bool, *arrays: np.ndarray) -> int:
    """``f`` in the kernel's units: 16-byte packs (the arrays aligned for them) or elements."""
    if not packed:
        return f
    assert f * np.dtype(dtype).itemsize % 16 == 0 and all(a.ctypes.data % 16 == 0 for a in arrays)
    return f * np.dtype(dtype).itemsize // 16


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("itype", INDICES)
@pytest.mark.parametrize(("n", "f", "packed"),
                         [(300, 5, False), (7, 1, False), (1, 900, False), (300, 8, True),
                          (7, 4, True), (1, 900, True)])
def test_gather_rows(settings, dtype, itype, n, f, packed):
    x = _rng(1).standard_normal((40, f)).astype(dtype)
    idx = _rng(2).integers(0, 40, n).astype(itype)  # duplicates, any order
    idx[0] = 39
    out = poisoned((n, f), dtype)
    w = _width(f, dtype, packed, x, out)
    args = (x, idx, out, np.int64(n), np.int64(w))
    _launch("rows.cu", _rows_name("gather_rows", dtype, itype, packed), n * w, args)
    assert same_bytes(out, x[idx])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("itype", INDICES)
@pytest.mark.parametrize(("f", "packed"), [(4, False), (3, False), (4, True), (12, True)])
def test_scatter_add_unique(settings, dtype, itype, f, packed):
    n = 250
    out = _rng(3).standard_normal((400, f)).astype(dtype)
    idx = _rng(4).permutation(400)[:n].astype(itype)
    rows = _rng(5).standard_normal((n, f)).astype(dtype)
    want = torch.from_numpy(out.copy())
    want[torch.from_numpy(idx).long()] += torch.from_numpy(rows)  # the CPU twin
    w = _width(f, dtype, packed, rows, out)
    args = (rows, idx, out, np.int64(n), np.int64(w))
    _launch("rows.cu", _rows_name("scatter_add_unique", dtype, itype, packed), n * w, args)
    assert same_bytes(out, want.numpy())


def _order_sensitive_rows(dtype: type, n: int, f: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids with many duplicates, rows whose sums depend on the order of the adds (target 0:
    values that cancel), and rows of subnormals, the only ones of target 36."""
    ids = _rng(6).integers(1, 36, n)
    ids[:4], ids[4:8] = 0, 36
    rows = _rng(7).standard_normal((n, f)) * 10.0 ** _rng(8).integers(-3, 9, (n, f))
    rows = rows.astype(dtype)
    rows[:4] = np.array([1e20, 1.0, -1e20, 1.0], dtype=dtype)[:, None]
    rows[4:8] = np.finfo(dtype).tiny / 8
    return ids, rows


def _sum_backwards(start: np.ndarray, rows: np.ndarray) -> np.ndarray:
    for r in rows[::-1]:
        start = start + r
    return start


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("itype", INDICES)
@pytest.mark.parametrize(("f", "packed"), [(3, False), (4, True)])
def test_scatter_add_segments_is_index_add(settings, dtype, itype, f, packed):
    n = 900
    ids, rows = _order_sensitive_rows(dtype, n, f)
    out = _rng(9).standard_normal((40, f)).astype(dtype)
    out[[0, 36]] = 0
    want = torch.from_numpy(out.copy()).index_add_(
        0, torch.from_numpy(ids), torch.from_numpy(rows)
    ).numpy()
    assert not same_bytes(want[0], _sum_backwards(out[0], rows[ids == 0]))  # order matters
    assert np.all((want[36] > 0) & (want[36] < np.finfo(dtype).tiny))  # subnormal sums
    inverse = scatter_map(torch.from_numpy(ids.astype(itype)))
    m = len(inverse.targets)
    w = _width(f, dtype, packed, rows, out)
    args = (rows, inverse.order, inverse.targets, inverse.seg, out, np.int64(m), np.int64(w))
    _launch("rows.cu", f"scatter_add_segments<{_value(dtype, packed)}>", m * w, args)
    assert same_bytes(out, want)


# dropout.cu --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("rows", "cols"),
    [
        ((1000, 1030), (1, 3)),  # ranges
        ((5, 9), np.array([2, 0, 2])),  # index columns in any order, repeated
        (np.array([0, 9, 9, 2**40 + 3]), np.array([30, 2, 7, 2])),  # a batch, GIST columns
        ((7, 7), (0, 3)),  # no rows: no launch
        ((3, 5), np.zeros(0, np.int64)),  # no columns: no launch
    ],
    ids=["ranges", "index-cols", "batch-gist", "no-rows", "no-cols"],
)
@pytest.mark.parametrize("p", [0.0, 0.4, 1 - 2**-40])
def test_hash_keep(settings, rows, cols, p):
    r, c = ids_of(rows), ids_of(cols)
    key = dropout_key(11, 2, 1)
    out = poisoned((len(r), len(c)), np.bool_)
    if out.size:
        args = (r, np.int64(len(r)), c, np.int64(len(c)), np.uint64(key), column_key(key),
                np.uint64(keep_threshold(p)), out)
        _launch("dropout.cu", "hash_keep", out.size, args)
    assert same_bytes(out, dropout_keep(key, rows, cols, p))


def test_hash_pair_keep(settings):
    r = np.concatenate([[0, 9, 9, 2**40 + 3], _rng(10).integers(0, 10**6, 96)])
    c = _rng(11).integers(0, 5000, len(r))
    key = dropout_key(4, 1, 0, 2)
    out = poisoned(len(r), np.bool_)
    args = (r, c, np.int64(len(r)), np.uint64(key), column_key(key),
            np.uint64(keep_threshold(0.3)), out)
    _launch("dropout.cu", "hash_pair_keep", len(r), args)
    assert same_bytes(out, dropout_keep_pairs(key, r, c, 0.3))


# sampling.cu -------------------------------------------------------------------------------

def _round(kernel: str, keys, need, rnd, *rest) -> np.ndarray:
    """One round as ``kernels.sampling`` launches it on a GPU, into a poisoned output."""
    off = np.cumsum(need) - need
    out = poisoned(int(need.sum()), np.int64)
    args = (keys, need, off, np.int64(len(keys)), np.int64(rnd), *rest, out)
    if len(out):
        _launch("sampling.cu", kernel, len(keys), args)
    return out


def _weighted_rows(rows: int, fanout: int):
    """Active rows of 1..12 entries (zero weights among them), drawing 0..fanout each
    (never more than their positive entries: rows shorter than the fanout)."""
    lens = _rng(11).integers(1, 13, rows)
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    w = _rng(12).random(int(ptr[-1])) * (_rng(13).random(int(ptr[-1])) < 0.7)
    w[ptr[:-1]] = 0.5  # every row has a positive entry
    positive = np.add.reduceat(w > 0, ptr[:-1])
    need = np.minimum(_rng(14).integers(0, fanout + 1, rows), positive).astype(np.int64)
    cum = segment_cumsum(ptr, w)
    return ptr, w, cum, row_totals(ptr, cum), need


@pytest.mark.parametrize("rows", [1000, 3])
def test_its_round(settings, rows):
    ptr, w, cum, total, need = _weighted_rows(rows, fanout=5)
    keys = chain(np.uint64(9), np.arange(rows))
    got = _round("its_round", keys, need, 3, cum, ptr, total)
    want = its_round(keys, need, 3, cum, ptr, total)
    assert same_bytes(got, want)
    assert np.all(w[got] > 0)


def test_its_round_without_draws(settings):
    ptr, _, cum, total, need = _weighted_rows(20, fanout=5)
    got = _round("its_round", chain(np.uint64(9), np.arange(20)), need * 0, 0, cum, ptr, total)
    assert got.shape == (0,)


@pytest.mark.parametrize("rows", [1000, 4])
def test_uniform_round(settings, rows):
    remaining = _rng(15).integers(1, 50, rows)
    remaining[:4] = [5, 3, 1, 2**40]
    need = np.minimum(_rng(16).integers(0, 6, rows), remaining)
    keys = chain(np.uint64(9), np.arange(rows))
    got = _round("uniform_round", keys, need, 1, remaining)
    assert same_bytes(got, uniform_round(keys, need, 1, remaining))


@pytest.mark.parametrize("vertex", [True, False])
def test_row_keys(settings, vertex):
    batch = _rng(18).integers(0, 40, 700).astype(np.int64)
    ids = _rng(19).integers(0, 10**12, 700).astype(np.int64)
    key = np.uint64(0xDEADBEEF12345678)
    want = row_keys(key, batch, 3, ids if vertex else None)
    out = poisoned(700, np.uint64)
    _launch("sampling.cu", "row_keys", 700,
            (key, np.int64(700), batch, np.int64(3), ids, np.int64(vertex), out))
    assert same_bytes(out, want)
    assert same_bytes(want, chain(key, batch, 3, *([ids] if vertex else [])))


@pytest.mark.parametrize("rows", [600, 2])
def test_segment_cumsum(settings, rows):
    ptr, w, *_ = _weighted_rows(rows, fanout=5)
    ptr[1:] = np.cumsum(np.diff(ptr) * (np.arange(rows) % 3 != 1))  # empty rows among them
    w = w[: ptr[-1]]
    out = poisoned(len(w), np.float64)
    _launch("sampling.cu", "segment_cumsum", rows, (ptr, np.int64(rows), w, out))
    assert same_bytes(out, segment_cumsum(ptr, w))


# csr.cu ------------------------------------------------------------------------------------

@pytest.mark.parametrize("itype", INDICES)
@pytest.mark.parametrize(
    "pos", [[4, 0, 4, 5, 1, 3, 5], [1, 3], [2, 1, 0, 1]], ids=["repeat", "empty-rows", "mixed"]
)
def test_gather_ranges(settings, itype, pos):
    ptr = np.array([0, 3, 3, 4, 4, 7, 307], dtype=np.int64)  # rows 1, 3 empty; row 5 long
    indices = _rng(17).integers(0, 1000, 307).astype(itype)
    pos = np.array(pos, dtype=np.int64)
    want_ptr, want = gather_ranges(ptr, indices, pos)
    out = poisoned(int(want_ptr[-1]), itype)
    args = (ptr, indices, pos, want_ptr, np.int64(len(pos)), out)
    if len(out):  # as the dispatch: min(rows, ROW_BLOCKS) blocks of ROW_BLOCK
        name = f"gather_ranges<{cm.c_type(np.dtype(itype))}>"
        host("csr.cu").launch(name, min(len(pos), ROW_BLOCKS), ROW_BLOCK, args)
    assert same_bytes(out, want)
