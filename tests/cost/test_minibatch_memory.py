"""A minibatch rank's predicted memory: expected batch sizes and the parts."""

import math

import numpy as np
import pytest

from hpcgnn.cost.minibatch_memory import (
    MINIBATCH_PARTS,
    SampleSizes,
    distinct,
    expected_batch,
    minibatch_memory_parts,
)
from hpcgnn.sampling.memory import BYTES_PER_ENTRY, MAX_STACK_ENTRIES

BUDGET = float(BYTES_PER_ENTRY * MAX_STACK_ENTRIES)


def sage(batch=1024, sizes=(10, 10), bulk=16, eager=False):
    return SampleSizes("node", sizes, batch, bulk, BUDGET, eager)


def parts(sample, dims=(2, 1), replicated=True, n=50_000, nnz=850_000):
    return minibatch_memory_parts(n, nnz, 64, [64, 16, 8], 4, sample, dims, replicated, 1e5)


def test_distinct_draws_match_a_simulation():
    rng = np.random.default_rng(0)
    for draws, n in ((10_000, 50_000), (100_000, 50_000), (10, 1_000_000)):
        got = len(np.unique(rng.integers(0, n, draws)))
        assert distinct(draws, n) == pytest.approx(got, rel=0.02)
    assert distinct(5, 0) == 0.0


def test_node_wise_frontiers_grow_by_the_fanout_until_the_graph_is_covered():
    n, nnz = 50_000, 800_000
    b = expected_batch(n, nnz, sage())
    assert b.rows[0] == 1024 and b.rows[1] == b.cols[0]
    assert b.nnz[0] == 1024 * 10  # min(fanout, mean degree 16) draws per row
    # measured on an SBM of this size (batch 1024, fanout 10,10): 10,015 and 43,038
    assert b.cols[0] == pytest.approx(10_015, rel=0.02)
    assert 43_038 <= b.cols[1] <= 1.05 * 43_038  # communities repeat vertices: a bound
    whole = expected_batch(n, nnz, sage(sizes=(1000, 1000)))
    assert whole.nnz[0] == 1024 * 16 and max(whole.cols) <= n  # a fanout above the degree


def test_layer_wise_and_cluster_batches():
    n, nnz = 50_000, 800_000
    ladies = expected_batch(n, nnz, SampleSizes("layer", (512, 512), 1024, 16, BUDGET, False))
    assert ladies.cols == (512 + 1024, 512 + 1536)
    cluster = expected_batch(n, nnz, SampleSizes("cluster", (0, 0), 5_000, 16, BUDGET, False))
    assert cluster.rows == cluster.cols == (5_000, 5_000)
    assert cluster.nnz[0] == pytest.approx(nnz / 10)


def test_parts_are_every_part_and_follow_the_layout():
    held = parts(sage())
    assert tuple(held) == MINIBATCH_PARTS and all(v >= 0 for v in held.values())
    split = parts(sage(), replicated=False)
    assert split["graph_pattern"] < held["graph_pattern"] / 1.5  # a block row, not all of S
    # the partitioned layout holds its whole share of a bulk, the replicated one a group
    eager = parts(sage(eager=True), replicated=False)
    assert eager["samples"] == math.ceil(16 / 2) * split["samples"]
    assert parts(sage(), dims=(4, 1))["features"] == pytest.approx(held["features"] / 2)
    # the hop's working set is capped by the budget, whatever the bulk
    assert parts(sage(bulk=1024))["sampling_temporaries"] == BUDGET


def test_wider_batches_need_more():
    small, big = parts(sage(batch=256)), parts(sage(batch=4096))
    for part in ("samples", "batch_inputs", "activations"):
        assert big[part] > small[part]
