"""Memory bounds of a run, from the file's sizes and the hyper-parameters alone."""

import numpy as np
import pytest

from hpcgnn.config import TrainConfig
from hpcgnn.cost.ranking import (
    RankBlock,
    block_parts,
    fastest_per_algo,
    memory_estimate,
    memory_parts,
    rank_blocks,
    rank_choices,
    weight_bytes,
)
from hpcgnn.errors import ConfigError
from hpcgnn.io.reader import GraphMeta
from hpcgnn.layout.block_counts import BlockCounts
from hpcgnn.layout.shapes import GridShape


def meta(n=100, features=8, classes=3):
    return GraphMeta("g.h5", n, 400, features, classes, False, "g", np.dtype(np.float32), 1,
                     None, None)


def test_weights_are_counted_five_times_plus_the_float64_draw():
    cfg = TrainConfig(layers=3, hidden=16)  # 8 -> 16 -> 16 -> 3
    sizes = [8 * 16, 16 * 16, 16 * 3]
    assert weight_bytes(meta(), cfg) == 5 * 4 * sum(sizes) + 8 * max(sizes)
    assert weight_bytes(meta(), cfg, per_layer=2) == 10 * 4 * sum(sizes) + 8 * max(sizes)


def test_estimates_grow_with_the_declared_class_count():
    cfg = TrainConfig()
    shape = GridShape("1.5d", (2, 2))
    small, huge = meta(classes=3), meta(classes=2**31 - 1)
    assert memory_estimate(small, cfg, shape) < 2**20
    assert memory_estimate(huge, cfg, shape) > 5 * 4 * 16 * (2**31 - 1)  # the last weights
    assert memory_estimate(huge, cfg, shape) > weight_bytes(huge, cfg)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(layers=0), "--layers must be in [1, 4096], got 0"),
        (dict(layers=10**9), "--layers must be in [1, 4096]"),
        (dict(hidden=0), "--hidden must be in [1, 2147483647], got 0"),
        (dict(hidden=10**400), "--hidden must be in [1, 2147483647]"),
    ],
)
def test_model_sizes_are_bounded(kwargs, words):
    with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        TrainConfig(**kwargs)


# CAGNET's qualitative findings, as the model states them for a Reddit-like shape on Summit
# (CAGNET Table 2: 232,965 vertices, 114,848,857 edges, 602 features, 41 classes).
REDDIT = dict(n=232_965, features=602, classes=41)


def reddit_on_summit(procs, alpha=None):
    from hpcgnn.cost.machine import load_machine

    link = load_machine("summit").link(procs)
    m = GraphMeta("reddit", REDDIT["n"], 114_848_857, REDDIT["features"], REDDIT["classes"],
                  False, "reddit", np.dtype(np.float32), 1, None, None)
    alpha = link.alpha if alpha is None else alpha
    return rank_choices(m, TrainConfig(), procs, alpha, link.beta)  # fastest first


def best_per_algo(procs, alpha=None):
    return fastest_per_algo(reddit_on_summit(procs, alpha))


def test_reddit_on_summit_follows_cagnet():
    small, large = best_per_algo(16), best_per_algo(1024)
    # 1D moves about (1 - 1/P) n f per rank (all blocks but its own) whatever P is; 1.5D's
    # busiest rank moves less as c grows.
    ratio = large["1d"]["max_rank_bytes"] / small["1d"]["max_rank_bytes"]
    assert ratio == pytest.approx((1 - 1 / 1024) / (1 - 1 / 16), rel=1e-3)
    assert large["1.5d"]["max_rank_bytes"] < small["1.5d"]["max_rank_bytes"] / 4
    # At P = 1024 1D is latency bound (P broadcasts per SpMM; about 3/4 of its time with
    # the network's injection contention) and 1.5D (32x32) comes first.
    lat = large["1d"]["time_by_phase_s"]["latency"]
    assert lat > 0.7 * large["1d"]["time_s"]
    assert min(large.values(), key=lambda r: r["time_s"]) is large["1.5d"]
    assert large["1.5d"]["grid"] == "32x32" and large["1.5d"]["time_s"] < large["1d"]["time_s"] / 10
    # Pure bandwidth (alpha = 0): 1.5D still beats 1D, and 3D moves the fewest bytes.
    bw = best_per_algo(1024, alpha=0.0)
    assert bw["1.5d"]["time_s"] < bw["1d"]["time_s"] / 5
    # Where 3D wins: at 16 ranks (a Pr x 1 x Pl grid, no sparse broadcast); 2D never leads.
    assert min(small.values(), key=lambda r: r["time_s"]) is small["3d"]
    assert small["2d"]["time_s"] > small["1.5d"]["time_s"]


def test_phase_times_sum_to_the_time():
    row = next(r for r in reddit_on_summit(64) if (r["algo"], r["grid"]) == ("2d", "8x8"))
    assert sum(row["time_by_phase_s"].values()) == pytest.approx(row["time_s"])
    assert {"dense_bcast", "sparse_bcast", "latency"} <= set(row["time_by_phase_s"])


def test_a_3d_grid_with_a_dimension_of_1_is_named_as_what_it_moves():
    """3d Pr x Pc x 1 moves 2d Pr x Pc's bytes in every category, and the note says so."""
    from hpcgnn.cli.model import shape_meta
    from hpcgnn.config import TrainConfig
    from hpcgnn.cost.ranking import cost_problem, grid_note
    from hpcgnn.cost.summa import predict_summa
    from hpcgnn.layout.shapes import GridShape

    meta = shape_meta("5000,80000,40,6")
    for model in ("gcn", "sage", "gin"):
        problem = cost_problem(meta, TrainConfig(layers=3, hidden=16, model=model), None)
        for pr, pc in ((2, 4), (4, 2), (3, 4), (1, 8), (8, 1)):
            flat = predict_summa(problem, (pr, pc, 1))
            assert flat.bytes_max_rank == predict_summa(problem, (pr, pc)).bytes_max_rank
            assert flat.bytes_total == predict_summa(problem, (pr, pc)).bytes_total
            assert f"2d {pr}x{pc}" in grid_note(problem, GridShape("3d", (pr, pc, 1)))
        assert grid_note(problem, GridShape("3d", (2, 1, 3))) == ""


def partitioned_meta(blocks):
    """1,000 vertices, 10,000 stored edges in 2 parts, the second part holding most edges."""
    return GraphMeta("g.h5", 1000, 10_000, 16, 4, False, "g", np.dtype(np.float32), 1,
                     (0, 400, 1000), "metis", partition_blocks=blocks)


TWO_PARTS = (
    (1, BlockCounts((10_000,), (10_000,), (0,), (0,), (0,), (0,))),
    (2, BlockCounts((2_000, 8_000), (2_000, 8_000), (300, 90), (90, 300), (300, 90),
                    (90, 300))),
)


def test_memory_follows_the_files_busiest_block():
    cfg = TrainConfig(hidden=16)  # 16 -> 16 -> 4
    meta = partitioned_meta(TWO_PARTS)
    shape = GridShape("1d", (2,))
    blocks = rank_blocks(meta, shape, halo=True)
    assert blocks == [RankBlock(400, 2_400, 2_400, 300, 90), RankBlock(600, 8_600, 8_600, 90, 300)]
    for algo in ("halo", "1d"):
        parts = memory_parts(meta, cfg, shape, algo)
        each = [block_parts(meta, cfg, shape, b, algo == "halo")
                for b in rank_blocks(meta, shape, algo == "halo")]
        assert parts == max(each, key=lambda p: p.total)
    # halo: the busiest block's [owned | halo] rows, one more received block and the sent
    halo = memory_parts(meta, cfg, shape, "halo").parts
    assert halo["comm_buffers"] == 4 * 16 * (600 + 2 * 90 + 300)
    assert halo["graph_blocks"] == 8_600 * 12 + 8 * 601 + 8_600 * 12 + 8 * (600 + 90 + 1) \
        + 8_600 * 8
    assert memory_parts(meta, cfg, GridShape("1d", (1,)), "halo").parts["comm_buffers"] == (
        4 * 16 * 1000
    )


def test_memory_without_the_files_blocks_bounds_the_halo():
    cfg = TrainConfig(hidden=16)
    shape = GridShape("1d", (2,))
    for meta in (partitioned_meta(()), partitioned_meta(TWO_PARTS[:1])):  # no 2-block counts
        rows, nnz = 500, 11_000 / 2
        remote = min(1000 - rows, nnz - 2 * rows)
        assert rank_blocks(meta, shape, halo=True) == [RankBlock(rows, nnz, nnz, remote, remote)]
        assert rank_blocks(meta, shape) == [RankBlock(rows, nnz, nnz)]
        buffers = memory_parts(meta, cfg, shape, "halo").parts["comm_buffers"]
        assert buffers == 4 * 16 * (rows + 3 * remote)  # three blocks of the bound
    # SUMMA grids split n / P vertices, whatever the partition
    meta = partitioned_meta(TWO_PARTS)
    assert rank_blocks(meta, GridShape("2d", (2, 1))) == [RankBlock(500, 5_500, 5_500)]


def test_a_pulled_backward_holds_the_wider_exchange():
    directed = ((2, BlockCounts((2_000, 8_000), (3_000, 7_000), (300, 90), (90, 300),
                                (50, 20), (20, 50))),)  # A's halos are smaller: pull
    blocks = rank_blocks(partitioned_meta(directed), GridShape("1d", (2,)), halo=True)
    assert blocks == [RankBlock(400, 2_400, 3_400, 300, 90), RankBlock(600, 8_600, 7_600, 90, 300)]
