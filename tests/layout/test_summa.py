"""The SUMMA / Split-3D block layout (pure, no MPI)."""

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.layout.shapes import factorizations
from hpcgnn.layout.summa import (
    ALLGATHER,
    GATHER,
    REDUCE,
    REDUCE_SCATTER,
    SummaLayout,
    count_block_nnz,
    dense_variant,
    index_dtype,
    layer_plans,
    message_bytes,
    owned_blocks,
    pack_block,
    sparse_block_bytes,
)

DIMS = [d for p in range(1, 9) for d in factorizations(p, 3)] + [(2, 3, 1), (3, 2, 2)]


def _check_segments(layout: SummaLayout) -> None:
    for layer in range(layout.pl):
        q = layout.inner_offsets(layer)
        c = layout.column_split(layer)
        segs = layout.segments(layer)
        assert len(c) == layout.pc + 1 and c[0] == 0 and c[-1] == q[-1]
        assert np.all(np.diff(c) >= 0)
        pos = 0
        for idx, s in enumerate(segs):
            assert s.index == idx and s.lo == pos and s.hi > s.lo
            pos = s.hi
            # inside one fine block (dense owner k) and one sparse column block (owner j)
            assert q[s.k] <= s.lo and s.hi <= q[s.k + 1]
            assert c[s.j] <= s.lo and s.hi <= c[s.j + 1]
            lo, hi = layout.fine_range(s.k, layer)
            assert s.g0 == lo + s.r0 and s.g0 + s.size <= hi
        assert pos == q[-1]


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("n", [1, 5, 47])
@pytest.mark.parametrize("split", ["auto", "even"])
def test_segments_tile_every_layer(dims, n, split):
    _check_segments(SummaLayout(n, dims, split=split))


@pytest.mark.parametrize("dims", DIMS)
def test_segments_with_uneven_partition(dims):
    pr, _, pl = dims
    rng = np.random.default_rng(sum(dims))
    sizes = rng.integers(0, 9, pr * pl)
    part = tuple(int(x) for x in np.concatenate([[0], np.cumsum(sizes)]))
    layout = SummaLayout(part[-1], dims, part)
    assert tuple(layout.fine) == part
    _check_segments(layout)
    # every vertex lies in exactly one stage of exactly one layer
    ids, first = layout.segment_ids()
    assert len(ids) == part[-1] and (ids.size == 0 or ids.max() < first[-1])


def test_fine_and_row_blocks():
    layout = SummaLayout(10, (2, 3, 2))
    assert layout.fine.tolist() == [0, 3, 6, 8, 10]
    assert layout.fine_range(1, 0) == (6, 8) and layout.fine_range(0, 1) == (3, 6)
    assert layout.row_block(0) == (0, 6) and layout.row_block(1) == (6, 10)
    assert layout.fine_sizes().tolist() == [[3, 3], [2, 2]]
    assert layout.inner_offsets(1).tolist() == [0, 3, 5]
    assert layout.cols(2).tolist() == [0, 1, 2, 2]  # widths below Pc: empty blocks
    assert SummaLayout(10, (2, 3)).dims == (2, 3, 1)


@pytest.mark.parametrize(
    "pr,pc", [(1, 1), (2, 2), (3, 3), (4, 2), (2, 4), (1, 4), (4, 1), (3, 6)]
)
def test_divisible_grids_need_max_stages(pr, pc):
    layout = SummaLayout(101, (pr, pc, 1))
    assert len(layout.segments(0)) == max(pr, pc)


def test_square_layer_is_textbook_summa():
    layout = SummaLayout(23, (3, 3, 2))
    for layer in range(2):
        for s in layout.segments(layer):
            assert s.k == s.j and s.r0 == 0 and s.size == layout.fine_rows(s.k, layer)


def test_general_split_has_at_most_pr_plus_pc_minus_one_stages():
    for pr, pc in [(2, 3), (3, 2), (3, 4), (5, 3)]:
        layout = SummaLayout(97, (pr, pc, 1))
        assert max(pr, pc) <= len(layout.segments(0)) <= pr + pc - 1


def test_hypersparse_blocks_are_sent_as_coordinates():
    a = sp.csr_matrix(([1.0, 2.0], ([3, 90], [0, 1])), shape=(100, 2))
    assert message_bytes(100, 100, 2, np.float32) == (2 + 2) * 4 + 2 * 4
    assert message_bytes(3, 100, 8, np.float64) == (4 + 8) * 4 + 8 * 8
    assert index_dtype(100, 2) is np.int32 and index_dtype(2**31, 2) is np.int64
    assert pack_block(a, 100, np.float32).nbytes == 24
    got = sparse_block_bytes(np.array([[100.0], [3.0]]), 100, np.array([[2, 0], [8, 8]]), 4)
    assert got.tolist() == [[24.0, 0.0], [80.0, 80.0]]


def test_owned_blocks_and_counts_match_the_matrix():
    n = 29
    m = sp.random(n, n, density=0.2, format="csr", random_state=3) + sp.eye(n, format="csr")
    m = sp.csr_matrix(m)
    layout = SummaLayout(n, (2, 3, 2), split="even")
    counts = count_block_nnz(layout, lambda lo, hi: m[lo:hi])
    total = 0
    for i in range(2):
        lo, hi = layout.row_block(i)
        for layer in range(2):
            for j in range(3):
                blocks = owned_blocks(layout, i, j, layer, lambda a, b: m[a:b])
                for idx, block in blocks.items():
                    s = layout.segments(layer)[idx]
                    assert s.j == j
                    want = m[lo:hi, s.g0 : s.g0 + s.size]
                    assert abs(block - want).sum() == 0
                    assert counts[layer][i, idx] == want.nnz
                    total += block.nnz
    assert total == m.nnz == sum(c.sum() for c in counts)


def test_dense_variant_picks_the_smaller_volume():
    assert dense_variant(False, False, 5, 6, 2) == ALLGATHER  # 5 <= 12
    assert dense_variant(False, False, 500, 16, 4) == REDUCE_SCATTER  # wide input features
    assert dense_variant(True, False, 16, 16, 4) == ALLGATHER  # tie
    assert dense_variant(True, False, 64, 16, 4) == REDUCE_SCATTER
    assert dense_variant(True, True, 16, 40, 32) == GATHER  # logits: 2 * 15 vs 2 * 31 * 40
    assert dense_variant(True, True, 256, 2, 4) == REDUCE  # binary classes, wide hidden layer
    assert dense_variant(False, True, 8, 3, 2) == GATHER  # one layer: no backward scatter


def test_layer_plans_follow_the_serial_order():
    from hpcgnn.layout.order import transform_first
    from hpcgnn.layout.trace import aggregation_widths

    for widths in [(5, 6, 6, 3), (5, 2, 2, 3), (100, 16, 7), (8, 3), (3, 8), (4, 4)]:
        for pc in (1, 2, 3, 4):
            plans = layer_plans(widths, pc)
            agg = aggregation_widths(widths)
            for t, plan in enumerate(plans):
                f_in, f_out = widths[t], widths[t + 1]
                tf = transform_first(t, f_in, f_out)
                spmm = next(s for s in plan.steps if s.primitive == "aggregate")
                (_, _, dense), = plan.dense_steps
                assert [s.primitive for s in plan.steps] == (
                    ["dense", "aggregate"] if tf else ["aggregate", "dense"])
                assert (spmm.f_in, spmm.backward) == agg[t]
                # the dense step always communicates the narrower side
                if pc == 1:
                    continue
                if tf:
                    assert dense == REDUCE_SCATTER
                elif t < len(plans) - 1:
                    assert dense == ALLGATHER
                else:
                    assert dense == GATHER
                assert plan.gather_logits == (t == len(plans) - 1 and tf)


def test_head_slices_tile_every_column_block():
    from hpcgnn.layout.blocks import even_offsets
    from hpcgnn.layout.summa import head_slices

    for width, heads in ((3, 4), (5, 2), (1, 7), (4, 1)):
        total = width * heads
        for pc in (1, 2, 3, 5, 8):
            offsets = even_offsets(total, pc)
            seen = np.zeros(total, dtype=int)
            for j in range(pc):
                c0, c1 = int(offsets[j]), int(offsets[j + 1])
                for h in head_slices((c0, c1), width):
                    assert 0 <= h.lo < h.hi <= c1 - c0
                    assert h.head * width <= c0 + h.lo and c0 + h.hi <= (h.head + 1) * width
                    seen[c0 + h.lo : c0 + h.hi] += 1
            assert (seen == 1).all()


def test_gat_layer_plans():

    from hpcgnn.kinds import GAT

    kind = GAT.replace(heads=2, output_heads=3)
    plans = layer_plans((12, 4, 4, 5), 2, kind)
    # z = H W into K f' columns, and the last layer's K' C; then the attention
    assert [[s.f_out for s in p.steps] for p in plans] == [[4, 4], [4, 4], [15, 15]]
    assert plans[0].dense_steps == [(12, 4, REDUCE_SCATTER)]  # 12 to 4: the narrow side
    assert [p.attention.final for p in plans] == [False, False, True]  # heads to column 0
    assert not any(p.gather_logits for p in plans)


def test_gin_sage_and_a_layer_of_ones_own_plan_each_dense_step():
    from hpcgnn.kinds import GIN, SAGE, Layer

    # GIN: (Â^T H) W_1 then U W_2; only the last U W_2 delivers the logits (gather)
    plans = layer_plans((10, 8, 3), 2, GIN)
    assert [v for p in plans for _, _, v in p.dense_steps] == [
        ALLGATHER, ALLGATHER, REDUCE_SCATTER, GATHER]
    assert not any(p.gather_logits for p in plans)
    # GraphSAGE, order (Â^T H) W: both terms of the last layer deliver their part
    last = layer_plans((4, 6, 8), 2, SAGE)[-1]
    assert [v for _, _, v in last.dense_steps] == [GATHER, GATHER] and not last.gather_logits

    class Teleport(Layer):  # an SpMM after the dense step, its input kept: gathered at the end
        def forward(self, g, h, w):
            z = g.dense(h, w[0])
            return z if not g.last else 0.9 * g.aggregate(z) + 0.1 * z

    last = layer_plans((12, 8, 3), 2, Teleport())[-1]
    assert [s.primitive for s in last.steps] == ["dense", "aggregate"]
    assert last.dense_steps == [(8, 3, REDUCE_SCATTER)] and last.gather_logits
