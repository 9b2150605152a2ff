import pickle

import numpy as np
import pytest

from hpcgnn.cost.machine import Link
from hpcgnn.cost.minibatch import (
    CONTROL,
    FEATURE_FETCH,
    FEATURE_REQUEST,
    Members,
    Traffic,
    charge_fetch,
    charge_gradients,
    charge_partial_products,
    charge_sampling,
    charge_stacked_frontier,
    paper_spgemm_words,
    pickled_bytes,
    seconds,
    spgemm_bytes_per_process,
)


def test_pickled_bytes_is_what_an_object_allgather_records():
    for v in (0, 7, 255, 256, 65535, 65536, 2**31, 2**40):
        assert pickled_bytes(v) == len(pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL))


def test_fetch_charges_the_owners_for_ids_and_this_rank_for_rows():
    # column of 3 ranks (world 1, 4, 7), this rank is its second member (world 4)
    col = Members(np.array([1, 4, 7]), 1)
    t = Traffic(8)
    charge_fetch(t, col, np.array([0, 0, 1, 2, 2, 2]), row_bytes=16)
    assert t.received[FEATURE_REQUEST].tolist() == [0, 16, 0, 0, 0, 0, 0, 24]
    assert t.received[FEATURE_FETCH].tolist() == [0, 0, 0, 0, 5 * (16 + 8), 0, 0, 0]
    assert t.received[CONTROL].tolist() == [0, 0, 0, 0, 16, 0, 0, 0]


def test_a_multi_label_fetch_charges_a_label_row_of_c_bytes():
    col = Members(np.array([1, 4, 7]), 1)
    t = Traffic(8)  # 5 classes: a remote vertex's label row is 5 uint8 entries, not 8 bytes
    charge_fetch(t, col, np.array([0, 0, 1, 2, 2, 2]), row_bytes=16, label_bytes=5)
    assert t.received[FEATURE_FETCH].tolist() == [0, 0, 0, 0, 5 * (16 + 5), 0, 0, 0]


def test_a_sparse_fetch_charges_the_nonzeros_of_the_remote_rows():
    col = Members(np.array([1, 4, 7]), 1)
    t = Traffic(8)
    # rows 2 and 3 are this rank's own: their 5 + 6 nonzeros do not travel
    charge_fetch(t, col, np.array([0, 0, 1, 1, 2, 2]), row_bytes=4,
                 nonzeros=np.array([3, 0, 5, 6, 1, 2]))
    remote_nnz = 3 + 0 + 1 + 2
    assert t.received[FEATURE_FETCH].tolist() == [0, 0, 0, 0, remote_nnz * (4 + 4) + 4 * 8,
                                                  0, 0, 0]
    assert t.messages[FEATURE_FETCH] == 3 * 2  # indices, values, labels from 2 peers


def test_gradient_allreduce_rounds_like_the_stats():
    t = Traffic(3)
    charge_gradients(t, Members(np.arange(3), 2), 100)
    assert t.received["allreduce"].tolist() == [0, 0, round(2 * 100 * 2 / 3)]
    one = Traffic(1)
    charge_gradients(one, Members(np.arange(1), 0), 100)
    assert one.received == {}


def test_seconds_are_alpha_beta_per_category():
    got = seconds({"a": 1e6}, {"a": 4}, Link(alpha=1e-6, beta=1e-9))
    assert got == {"a": 4e-6 + 1e-3}


def test_sampling_hop_charges_stage_roots_for_requests_and_replicas_for_partials():
    # 2 x 2 grid, world rank = 2 i + j; this rank is (1, 0): column [0, 2], row [2, 3]
    col, row = Members(np.array([0, 2]), 1), Members(np.array([2, 3]), 0)
    t = Traffic(4)
    # stage 0 (root: world 0) asked for 3 rows of 7 nonzeros; stage 1 is this rank's own
    charge_sampling(t, col, row, frontier=5, stages=[(0, 3, 7), (1, 0, 0)],
                    parts=[(3, 7), (2, 4)])
    assert t.received["sample_frontier"].tolist() == [0, 0, 0, 40]
    assert t.received["sample_request"].tolist() == [24, 0, 0, 0]
    assert t.received["sample_rows"].tolist() == [0, 0, 8 * (3 + 7), 0]
    assert t.received["sample_combine"].tolist() == [0, 0, 8 * (2 + 4), 0]
    assert t.received["control"].tolist() == [8, 0, 0, pickled_bytes(5)]


def test_partial_products_chain_to_the_next_replica_and_the_last_scatters():
    # a process row of 3 replicas, world ranks [4, 5, 6]
    row = [Members(np.array([4, 5, 6]), q) for q in range(3)]
    t = Traffic(8)
    charge_partial_products(t, row[0], running=10, scattered=[])
    charge_partial_products(t, row[1], running=25, scattered=[])
    charge_partial_products(t, row[2], running=0, scattered=[7, 11, 9])
    # each key and value: 16 bytes; the counts: 8 bytes of control. Replica 1 gets the
    # running sum of replica 0 and its own rows; the last keeps its own rows
    assert t.received["sample_partial_products"].tolist() == [0] * 4 + [16 * 7, 16 * (10 + 11),
                                                                         16 * 25, 0]
    assert t.received["control"].tolist() == [0] * 4 + [8, 16, 8, 0]
    t1 = Traffic(1)
    charge_partial_products(t1, Members(np.array([0]), 0), running=5, scattered=[5])
    assert t1.received == {}  # one replica: nothing moves


def test_the_stacked_frontier_gather_sends_lengths_and_ids():
    row = Members(np.array([2, 3]), 0)
    t = Traffic(4)
    charge_stacked_frontier(t, row, batches=3, ids=20)
    assert t.received["sample_frontier"].tolist() == [0, 0, 0, 8 * 3 + 8 * 20]
    assert t.received["control"].tolist() == [0, 0, 0, pickled_bytes(3)]


def test_paper_spgemm_words_is_the_harmonic_mean_form_by_hand():
    # b k d = 120 nonzeros; row data b k d / c, all-reduce b k d c / P (Sec. 5.2.1)
    assert paper_spgemm_words(4, 2, 120) == 120 / 2 + 120 * 2 / 4 == 120.0
    assert paper_spgemm_words(8, 2, 120) == 60 + 30
    assert paper_spgemm_words(4, 1, 120) == 120 + 30  # 1D: the all-reduce over 1 rank kept
    assert paper_spgemm_words(1, 1, 120) == 240
    for p, c in [(4, 2), (16, 2), (16, 4), (64, 8), (12, 3)]:
        harmonic = 2 / (1 / c + 1 / (p / c))  # of c and P/c
        assert np.isclose(paper_spgemm_words(p, c, 120), 2 * 120 / harmonic)
    with pytest.raises(ValueError, match="grid"):
        paper_spgemm_words(6, 4, 1)


def test_spgemm_bytes_per_process_averages_columns_and_ranks():
    assert spgemm_bytes_per_process(4, 2, 800, 800) == 400 + 200
    assert spgemm_bytes_per_process(8, 1, 800, 0) == 800
