"""The GIST traffic model, by hand on a small case."""

from hpcgnn.cost.gist import data_parallel_bytes, round_bytes
from hpcgnn.kinds import GAT, GCN
from hpcgnn.layout.blocks import even_offsets
from hpcgnn.layout.subnets import cut, model_params, subnets


def test_one_group_of_all_ranks_moves_what_the_root_does_not_own_then_broadcasts():
    widths = [4, 6, 2]
    offsets = [even_offsets(f, 2) for f in widths[:-1]]  # rank 0 owns rows 0-1 and 0-2
    (net,) = subnets(0, 0, widths, 1)
    got = round_bytes([cut(model_params(widths, GCN), net)], offsets, [0], group_sizes=[2],
                      itemsize=4)
    fetched = (2 * 6 + 3 * 2) * 3 * 4  # rank 1's rows, weight and two moments
    whole = (4 * 6 + 6 * 2) * 3 * 4
    assert got == {"gist_scatter": fetched + whole, "gist_gather": fetched}


def test_data_parallel_is_an_all_reduce_of_every_weight_per_step():
    assert data_parallel_bytes(36, ranks=4, itemsize=4, steps=3) == 3 * 2 * 36 * 4 * 3


def test_evaluation_reduce_scatters_hidden_layers_and_all_reduces_the_logits():
    from hpcgnn.cost.gist import eval_bytes

    # N = 10 vertices, widths 4 -> 6 -> 5 -> 2 on P = 3 ranks, 4-byte entries:
    # each hidden layer (6, 5) sends (P - 1) N f_l entries; the logits' all-reduce
    # 2 (P - 1) / P of their N f_L entries on each rank, rounded to whole bytes per rank
    # as Comm records it (2 x 80 x 2 / 3 = 106.7 -> 107 bytes)
    widths = [4, 6, 5, 2]
    gcn = model_params(widths, GCN)
    want = 4 * 10 * (2 * 6 + 2 * 5) + 3 * 107
    assert eval_bytes(gcn, widths, GCN, num_nodes=10, ranks=3, itemsize=4) == want
    assert eval_bytes(gcn, widths, GCN, num_nodes=10, ranks=1, itemsize=4) == 0
    # GAT (K = 2 heads of 3 and 2.5 -> widths 4 -> 6 -> 6, one output head of 2 classes):
    # each hidden layer all-reduces the N x 2K partial score terms too
    # (2 x 160 x 2 / 3 = 213.3 -> 213 bytes per rank)
    widths = [4, 6, 6, 2]
    kind = GAT.replace(heads=2, output_heads=1)
    gat = eval_bytes(model_params(widths, kind), widths, kind, num_nodes=10, ranks=3,
                     itemsize=4)
    assert gat == 4 * 10 * (2 * 6 + 2 * 6) + 3 * 107 + 2 * 3 * 213


def test_a_gist_rank_holds_its_rows_not_the_model():
    from hpcgnn.cost.gist import memory_bytes

    wide = [(16, 4096), (4096, 4096), (4096, 4)]
    sub = [(16, 512), (512, 512), (512, 4)]
    one = memory_bytes(wide, sub, num_nodes=100, num_edges=400, ranks=1, itemsize=4)
    eight = memory_bytes(wide, sub, num_nodes=100, num_edges=400, ranks=8, itemsize=4)
    rows = 3 * 4 * (16 * 4096 + 4096 * 4096 + 4096 * 4)  # weights and two moments, whole
    assert one > rows and eight < rows / 4  # the shards shrink with the ranks
