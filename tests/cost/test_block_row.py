"""The 1D / 1.5D cost model, rank by rank, against a count of what the SpMM sends."""

import numpy as np
import pytest

from hpcgnn.comm.stats import CommStats
from hpcgnn.config import TrainConfig
from hpcgnn.cost.block_row import predict_block_row, replication_note
from hpcgnn.cost.estimate import Problem
from hpcgnn.cost.ranking import rank_choices
from hpcgnn.cost.summa import predict_2d
from hpcgnn.io.reader import GraphMeta
from hpcgnn.layout.blocks import even_offsets, stage_chunks
from hpcgnn.layout.shapes import GridShape, admissible_shapes
from hpcgnn.layout.trace import aggregation_widths


def counted(problem: Problem, shape: GridShape) -> list[CommStats]:
    """Every rank's :class:`CommStats` after one epoch, recorded call by call as ``Comm`` does.

    ``StagedBroadcastSpMM`` broadcasts ``H_k`` (``n_k x f``) from process row ``k`` down
    process column ``j`` for each ``k`` of chunk ``j``; ``BlockRowAggregation`` all-reduces
    the ``n_i x f`` partial sums along the row; then each weight gradient is all-reduced
    over the column.
    """
    q, c = (shape.dims[0], 1) if shape.kind == "1d" else shape.dims
    off, s = even_offsets(problem.n, q), problem.itemsize
    chunks = stage_chunks(q, c)
    stats = {(i, j): CommStats() for i in range(q) for j in range(c)}
    for f, backward in aggregation_widths(problem.widths):
        for _ in range(2 if backward else 1):
            for (i, j), st in stats.items():
                for k in range(chunks[j], chunks[j + 1]):
                    st.record("dense_bcast", 0 if k == i else (off[k + 1] - off[k]) * f * s, 0.0)
                if c > 1:
                    st.record("allreduce", 2 * ((off[i + 1] - off[i]) * f * s) * (c - 1) / c, 0.0)
    for fin, fout in zip(problem.widths[:-1], problem.widths[1:], strict=True):
        for st in stats.values():
            st.record("allreduce", 2 * (fin * fout * s) * (q - 1) / q, 0.0)
    return list(stats.values())


@pytest.mark.parametrize("procs", [3, 6, 8])
@pytest.mark.parametrize("itemsize", [4, 8])
def test_every_rank_exactly_with_uneven_blocks(procs, itemsize):
    # 1001 rows never split evenly; 2 m (P-1)/P is no whole number of bytes for these widths
    problem = Problem(1001, 9000, (5, 7, 3), itemsize)
    for shape in [*admissible_shapes("1d", procs), *admissible_shapes("1.5d", procs)]:
        ranks = counted(problem, shape)
        est = predict_block_row(problem, shape)
        cats = {c for st in ranks for c, v in st.categories.items() if v.bytes}
        assert set(est.bytes_total) == cats, shape
        for cat in cats:
            per = [st.categories[cat].bytes if cat in st.categories else 0 for st in ranks]
            assert est.bytes_total[cat] == sum(per), (shape, cat)
            assert est.bytes_max_rank[cat] == max(per), (shape, cat)


def test_a_root_does_not_receive_its_own_block():
    # P = 8: every rank receives the 7 blocks of the others, (1 - 1/8) n f per pass
    problem = Problem(2000, 18_000, (32, 16, 4))
    est = predict_block_row(problem, GridShape("1d", (8,)))
    words = sum(f * (2 if back else 1) for f, back in aggregation_widths(problem.widths))
    assert est.bytes_max_rank["dense_bcast"] == 2000 * 7 // 8 * words * 4
    assert est.bytes_total["dense_bcast"] == 8 * est.bytes_max_rank["dense_bcast"]


@pytest.mark.parametrize("procs", [3, 6, 8])
def test_1d_and_2d_px1_move_the_same_bytes_and_rank_together(procs):
    problem = Problem(1001, 9000, (32, 16, 4))
    one = predict_block_row(problem, GridShape("1d", (procs,)))
    two = predict_2d(problem, GridShape("2d", (procs, 1)))
    assert one.bytes_max_rank["dense_bcast"] == two.bytes_max_rank["dense_bcast"]
    assert one.bytes_total["dense_bcast"] == two.bytes_total["dense_bcast"]
    # the gradient all-reduce: one per weight (1D) or fused (SUMMA), the same bytes
    assert one.bytes_max_rank["allreduce"] == pytest.approx(two.bytes_max_rank["allreduce"], abs=2)
    # bandwidth alone: the same time, so next to each other in the ranking (only grids of
    # the same time, such as 3d 1x1xP, may sit between them)
    meta = GraphMeta("g", 1001, 8000, 32, 4, False, "g", np.dtype(np.float32), 1, None, None)
    rows = rank_choices(meta, TrainConfig(), procs, 0.0, 1e-10)
    where = {(r["algo"], r["grid"]): k for k, r in enumerate(rows)}
    group = [where[key] for key in [
        ("1d", str(procs)), ("1.5d", f"{procs}x1"), ("2d", f"{procs}x1"), ("3d", f"{procs}x1x1")
    ]]
    times = {rows[k]["time_s"] for k in range(min(group), max(group) + 1)}
    assert len(times) == 1


def test_replication_beyond_sqrt_p_is_noted():
    problem = Problem(1000, 9000, (32, 16, 4))
    note = replication_note(problem, GridShape("1.5d", (1, 8)))
    assert note.startswith("c=8 > sqrt(P): 7 of 8 process columns have no stage;")
    assert note.endswith("x the bytes of grid 8x1")
    ratio = float(note.split(" moves ")[1].split("x")[0])
    assert 1.9 < ratio < 2.0  # an all-reduce of 2 n f (P-1)/P against 1D's (P-1)/P n f
    assert "2 of 4 process columns" in replication_note(problem, GridShape("1.5d", (2, 4)))
    assert replication_note(problem, GridShape("1.5d", (3, 2))).endswith("differ by one")
    assert replication_note(problem, GridShape("1.5d", (4, 2))) == ""
    assert replication_note(problem, GridShape("1.5d", (2, 2))) == ""
    assert replication_note(problem, GridShape("2d", (1, 8))) == ""
