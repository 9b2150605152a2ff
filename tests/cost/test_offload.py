"""The offload cost model's terms for sparse input features (exactness is checked against
measured runs in ``tests/models/test_sparse_features.py``)."""

from hpcgnn.cost.estimate import Problem
from hpcgnn.cost.offload import load_widths, predict_offload, sparse_input_bytes
from hpcgnn.planning.dedup import DedupVolumes


def test_the_first_layer_on_sparse_features_loads_rows_of_x_w():
    assert load_widths([100, 16, 8, 3], False) == [100, 16, 8]
    assert load_widths([100, 16, 8, 3], True) == [16, 16, 8]


def test_sparse_features_trade_wide_loads_for_csr_blocks():
    problem = Problem(n=50, nnz=300, widths=(100, 16, 3), itemsize=4)
    volumes = DedupVolumes(80, 70, 60)
    dense = predict_offload(problem, 2, volumes, (10, 10), "full").bytes_total
    sparse = predict_offload(problem, 2, volumes, (10, 10), "full",
                             sparse_input=(250, 6)).bytes_total
    assert dense["offload_h2d"] == 60 * (100 + 16) * 4
    assert sparse["offload_h2d"] == 60 * (16 + 16) * 4
    assert sparse["offload_d2h"] == 60 * (16 + 16) * 4  # layer 0's gradients pushed too
    blocks = 8 * (50 + 6) + 8 * 6 * 101 + 2 * 250 * 12
    rows = 2 * 50 * 16 * 4  # T written, dT read
    assert sparse_input_bytes(50, (100, 16), 4, 1, 250, 6, True) == blocks + rows
    ckpt = 2 * 50 * ((16 + 16) + (16 + 3)) * 4 + blocks + rows
    assert sparse["offload_ckpt"] == ckpt
    # GraphSAGE: S written and read, dZ written and read, S again when recomputed
    assert sparse_input_bytes(50, (100, 16), 4, 2, 250, 6, False) == blocks + 7 * 50 * 16 * 4
