"""The 2D / 3D cost model: closed forms, consistency, and the estimate from statistics."""

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.cost.block_row import predict_block_row
from hpcgnn.cost.estimate import Problem
from hpcgnn.cost.summa import (
    BlockNnzCounter,
    SummaBlockNnz,
    SummaProblem,
    predict_2d,
    predict_3d,
    predict_summa,
    summa_block_nnz,
)
from hpcgnn.graph.normalize import normalize_block
from hpcgnn.io import GraphFile
from hpcgnn.layout.shapes import GridShape
from hpcgnn.layout.summa import SummaLayout, count_block_nnz
from tests.graphs import write_random_graph


def test_one_process_communicates_nothing():
    est = predict_3d(Problem(50, 300, (5, 6, 3)), GridShape("3d", (1, 1, 1)))
    assert est.bytes_total == {} and est.messages == 0


@pytest.mark.parametrize("dims", [(2, 2, 1), (1, 4, 1), (4, 1, 1), (2, 1, 2), (1, 2, 2), (2, 3, 2)])
def test_closed_forms(dims):
    # widths 64 -> 16 -> 16 -> 4: layer 0 and 2 run as A^T (H W) (SpMM on 16 and 4
    # columns, dense step reduce-scatter), layer 1 as (A^T H) W (all-gather); every SpMM
    # has a backward; the logits (4 columns) are gathered to column 0
    n, widths, s = 1000, (64, 16, 16, 4), 4
    pr, pc, pl = dims
    p = pr * pc * pl
    est = predict_summa(Problem(n, 20_000, widths, s), dims)
    spmm = 2 * (16 + 16 + 4)
    assert est.bytes_total.get("dense_bcast", 0) == (pr - 1) * n * spmm * s
    m = s * sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=True))
    assert est.bytes_total.get("allreduce", 0) == pytest.approx(p * round(2 * m * (p - 1) / p))
    dense = (pc - 1) * n * (16 + 16 + 4) * s
    assert est.bytes_total.get("allgather", 0) == dense
    assert est.bytes_total.get("reduce_scatter", 0) == (pl - 1) * n * spmm * s + dense
    w0 = -(-4 // pc)
    assert est.bytes_total.get("gather", 0) == est.bytes_total.get("scatter", 0) == n * (4 - w0) * s
    if pc == 1:
        assert "sparse_bcast" not in est.bytes_total
    else:
        # no hypersparse block (nnz / n^2 = 2%), so per SpMM pass and row block the
        # Pc - 1 receivers get indptr, indices and values of every stage
        layout = SummaLayout(n, dims)
        per_pass = 0.0
        for i in range(pr):
            lo, hi = layout.row_block(i)
            for layer in range(pl):
                for seg in layout.segments(layer):
                    z = 20_000 * (hi - lo) * seg.size / n**2
                    per_pass += (pc - 1) * ((hi - lo + 1 + z) * 4 + z * s)
        assert est.bytes_total["sparse_bcast"] == pytest.approx(6 * per_pass)


def test_2d_is_3d_with_one_layer_and_px1x1_is_block_rows():
    prob = Problem(333, 4000, (20, 8, 5), 8)
    a = predict_2d(prob, GridShape("2d", (3, 2)))
    b = predict_3d(prob, GridShape("3d", (3, 2, 1)))
    assert a.bytes_total == b.bytes_total and a.messages == b.messages
    # P x 1 x 1 moves the 1D algorithm's dense volume (no sparse traffic)
    c = predict_3d(prob, GridShape("3d", (4, 1, 1)))
    d = predict_block_row(prob, GridShape("1d", (4,)))
    assert c.bytes_total["dense_bcast"] == d.bytes_total["dense_bcast"]
    with pytest.raises(ValueError):
        predict_2d(prob, GridShape("3d", (1, 2, 2)))


def test_max_rank_is_at_least_the_mean_and_messages_grow_with_stages():
    prob = Problem(1000, 12_000, (32, 16, 8))
    for dims in [(2, 2, 2), (4, 2, 1), (2, 3, 1)]:
        est = predict_summa(prob, dims)
        p = np.prod(dims)
        for cat, total in est.bytes_total.items():
            assert total / p - 1e-9 <= est.bytes_max_rank[cat] <= total
    assert predict_summa(prob, (2, 3, 1)).messages > predict_summa(prob, (2, 2, 1)).messages


def _uniform_graph(n, m, seed):
    rng = np.random.default_rng(seed)
    a = sp.csr_matrix((np.ones(m), (rng.integers(0, n, m), rng.integers(0, n, m))), shape=(n, n))
    a.data[:] = 1.0
    a.setdiag(0)
    a.eliminate_zeros()
    return normalize_block(a, 0, np.ones(n), np.ones(n))


@pytest.mark.parametrize("dims", [(4, 4, 1), (2, 4, 2), (8, 2, 2), (3, 5, 1)])
def test_estimate_from_statistics_is_close_on_a_uniform_graph(dims):
    n = 3000
    a = _uniform_graph(n, 60_000, 5)
    layout = SummaLayout(n, dims)
    nnz = tuple(count_block_nnz(layout, lambda lo, hi: a[lo:hi]))
    exact = SummaProblem(
        n, a.nnz, (100, 16, 7), 4, None, block_nnz=SummaBlockNnz(layout.dims, nnz, nnz)
    )
    est = predict_summa(Problem(n, a.nnz, (100, 16, 7), 4), dims)
    got = predict_summa(exact, dims)
    for cat in got.bytes_total:
        assert est.bytes_total[cat] == pytest.approx(got.bytes_total[cat], rel=0.02), cat


def test_block_nnz_of_a_file(tmp_path):
    path = write_random_graph(tmp_path / "g.h5", n=40, directed=True, seed=2)
    counts = summa_block_nnz(path, (2, 2, 2))
    with GraphFile(path) as gf:
        a = gf.read_csr(0, 40)
        nnz = (a + sp.eye(40)).tocsr()
        nnz.sum_duplicates()
        total = nnz.nnz
    assert sum(c.sum() for c in counts.forward) == total == sum(c.sum() for c in counts.backward)
    assert counts.dims == (2, 2, 2) and summa_block_nnz(path, (2, 2)).dims == (2, 2, 1)
    # a mismatching grid falls back to the estimate instead of failing
    prob = SummaProblem(40, total, (6, 5, 3), 4, None, block_nnz=counts)
    plain = Problem(40, total, (6, 5, 3))
    assert predict_summa(prob, (4, 1, 1)).bytes_total == predict_summa(plain, (4, 1, 1)).bytes_total


@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_block_nnz_counter_reads_once_and_counts_like_the_file(tmp_path, directed):
    path = write_random_graph(tmp_path / "g.h5", n=47, directed=directed, seed=3)
    counter = BlockNnzCounter(path)
    for dims in [(2, 2), (3, 2), (2, 3, 2), (1, 4, 2), (4, 1, 1), (2, 2, 3)]:
        got, want = counter(dims), summa_block_nnz(path, dims)
        assert got.dims == want.dims
        for a, b in zip(got.forward + got.backward, want.forward + want.backward, strict=True):
            np.testing.assert_array_equal(a, b)
    assert BlockNnzCounter(path, max_cells=3)((2, 2)) is None  # 2 row blocks x 2 stages
    assert not BlockNnzCounter(path, max_nnz=10).loaded
