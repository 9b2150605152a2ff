"""The offload cost model's terms from a layer's chunk plan (exactness is checked against
measured runs in ``tests/models/test_offload.py``, ``tests/models/test_sparse_features.py``
and ``tests/examples/test_layers.py``)."""

from hpcgnn.cost.estimate import Problem
from hpcgnn.cost.offload import load_widths, own_rows, predict_offload, sparse_input_bytes
from hpcgnn.kinds import GAT, GCN, SAGE, Layer
from hpcgnn.layout.chunks import chunk_plan, leaves, stage_outputs, stages, stored, sweeps
from hpcgnn.planning.dedup import DedupVolumes


class Propagated(Layer):
    """APPNP's shape: a dense step, then ``K`` aggregations chained on the last layer."""

    def forward(self, g, h, w):
        z = g.dense(h, w[0])
        if not g.last:
            return z.relu()
        z0 = z
        for _ in range(3):
            z = 0.5 * g.aggregate(z) + 0.5 * z0
        return z


def test_gcn_loads_each_layer_input_once_and_again_where_it_recomputes():
    plans = chunk_plan([100, 16, 3], GCN)
    assert [p.raw for p in plans] == ["h", "h"]
    # the update reads the kept aggregate, never the input's own rows (only their loads)
    assert leaves(plans[1], ["out"], None, False) == ["a0"]
    assert leaves(plans[1], ["out"], 0, False) == []
    assert load_widths(plans, [True, True]) == [100, 16]
    assert load_widths(plans, [True, False]) == [100, 16, 16]
    # forward: output and aggregate out; backward: aggregate and output gradient back
    assert own_rows(plans[1], 1, True, False) == 2 * (16 + 3)
    assert own_rows(plans[1], 1, False, False) == 2 * 3


def test_a_self_term_reads_the_own_rows_from_the_host():
    plans = chunk_plan([10, 8, 3], SAGE)
    assert leaves(plans[1], ["out"], None, False) == ["a0", "h"]
    # the first layer's input needs no gradient; the second writes its own rows' gradient
    assert own_rows(plans[0], 0, True, False) == 2 * (10 + 8) + 2 * 10
    assert own_rows(plans[1], 1, True, False) == 2 * (8 + 3) + 2 * 8 + 8


def test_an_attention_loads_z_and_its_source_terms_twice():
    plans = chunk_plan([7, 8, 3], GAT.configured(heads=2))
    assert [(e.primitive, e.width, e.out) for p in plans for e in p.exchanges] == [
        ("attention", 8 + 2, 8), ("attention", 3 + 1, 3)]
    assert stored(plans[0], True) == [False] and stages(plans[0]) == [0, None]
    # [z | s_src] of the own rows needs the input; the attention on the loads does not
    assert leaves(plans[0], ["x0"], None, False) == ["h"]
    assert leaves(plans[0], ["out"], 0, False) == []
    assert load_widths(plans, [False, False]) == [10, 10, 4, 4]  # each layer's, reloaded


def test_chained_aggregations_are_one_sweep_and_one_stage_each():
    plans = chunk_plan([6, 5, 3], Propagated())
    assert plans[0].exchanges == [] and list(sweeps(plans[0])) == [0]
    last = plans[1]
    assert len(last.exchanges) == 3 and last.raw is None and stored(last, False) == [True] * 3
    assert list(sweeps(last)) == [0, 1, 2, 3] and stages(last) == [2, 1, 0, None]
    assert stage_outputs(last, 2) == ["out"] and stage_outputs(last, 1) == ["x2"]
    assert stage_outputs(last, 0) == ["out", "x1", "x2"] and stage_outputs(last, None) == ["x0"]
    # stage 1 recomputes X_2 = (A_1 + Z_0) / 2 alone: A_1 and the input, no other A_i
    assert leaves(last, stage_outputs(last, 1), None, False) == ["a1", "h"]


def test_sparse_features_trade_wide_loads_for_csr_blocks():
    problem = Problem(n=50, nnz=300, widths=(100, 16, 3), itemsize=4)
    volumes = DedupVolumes(80, 70, 60)
    dense = predict_offload(problem, 2, volumes, (10, 10), "full").bytes_total
    sparse = predict_offload(problem, 2, volumes, (10, 10), "full",
                             sparse_input=(250, 6)).bytes_total
    assert dense["offload_h2d"] == 60 * (100 + 16) * 4
    assert sparse["offload_h2d"] == 60 * (16 + 16) * 4
    assert dense["offload_d2h"] == 60 * 16 * 4
    assert sparse["offload_d2h"] == 60 * (16 + 16) * 4  # the products' gradients pushed too
    blocks = 8 * (50 + 6) + 8 * 6 * 101 + 2 * 250 * 12
    rows = 2 * 50 * 16 * 4  # T written, dT read
    assert sparse_input_bytes(50, 100, 4, 250, 6, [16]) == blocks + rows
    ckpt = 50 * 4 * (2 * (16 + 16) + 2 * (16 + 3)) + blocks + rows
    assert sparse["offload_ckpt"] == ckpt
    assert dense["offload_ckpt"] == 50 * 4 * (2 * (100 + 16) + 2 * (16 + 3))
