"""The GIST traffic model, by hand on a small case."""

from hpcgnn.cost.gist import data_parallel_bytes, round_bytes
from hpcgnn.layout.blocks import even_offsets
from hpcgnn.layout.subnets import subnets


def test_one_group_of_all_ranks_moves_what_the_root_does_not_own_then_broadcasts():
    widths = [4, 6, 2]
    offsets = [even_offsets(f, 2) for f in widths[:-1]]  # rank 0 owns rows 0-1 and 0-2
    (net,) = subnets(0, 0, widths, 1)
    got = round_bytes([net], offsets, [0], group_size=2, itemsize=4)
    fetched = (2 * 6 + 3 * 2) * 3 * 4  # rank 1's rows, weight and two moments
    whole = (4 * 6 + 6 * 2) * 3 * 4
    assert got == {"gist_scatter": fetched + whole, "gist_gather": fetched}


def test_data_parallel_is_an_all_reduce_of_every_weight_per_step():
    assert data_parallel_bytes([4, 6, 2], ranks=4, itemsize=4, steps=3) == 3 * 2 * 36 * 4 * 3
