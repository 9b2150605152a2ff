"""GIST's random groups: disjoint, covering, balanced, and the same on every rank."""


import numpy as np
import pytest

from hpcgnn.exchange.subnet_biases import ATTENTION, BIAS, SubnetBiases, model_vectors
from hpcgnn.kinds import GAT, GCN, GIN, SAGE
from hpcgnn.layout.subnets import (
    ParamOrder,
    chain_subnet,
    group_sizes,
    split_ids,
    subnet_heads,
    subnets,
    vector_links,
    weight_chain,
)


@pytest.mark.parametrize(("width", "groups"), [(8, 1), (8, 2), (10, 4), (7, 3), (5, 5)])
def test_groups_are_disjoint_cover_and_differ_by_at_most_one(width, groups):
    for round_ in range(3):
        ids = split_ids(7, round_, 1, width, groups)
        assert len(ids) == groups
        assert sorted(np.concatenate(ids).tolist()) == list(range(width))
        sizes = [len(g) for g in ids]
        assert sizes == group_sizes(width, groups) and max(sizes) - min(sizes) <= 1
        assert all(np.all(np.diff(g) > 0) for g in ids)


def test_every_round_and_layer_draws_a_new_split_and_the_same_everywhere():
    a = split_ids(3, 0, 1, 64, 4)
    assert all(np.array_equal(x, y) for x, y in zip(a, split_ids(3, 0, 1, 64, 4), strict=True))
    assert not np.array_equal(a[0], split_ids(3, 1, 1, 64, 4)[0])
    assert not np.array_equal(a[0], split_ids(3, 0, 2, 64, 4)[0])


def test_inputs_and_outputs_are_never_split():
    nets = subnets(0, 2, [5, 10, 10, 3], 3)
    for net in nets:
        assert net.ids[0].tolist() == list(range(5)) and net.ids[-1].tolist() == [0, 1, 2]
        assert net.sizes()[0][0] == 5 and net.sizes()[-1][1] == 3
    for layer in (1, 2):
        assert sorted(np.concatenate([n.ids[layer] for n in nets]).tolist()) == list(range(10))
    # a sub-network has the same width in every hidden layer
    assert [n.sub_widths[1:3] for n in nets] == [[4, 4], [3, 3], [3, 3]]


def test_owned_entries_add_up_to_the_sub_model():
    from hpcgnn.layout.blocks import even_offsets

    widths = [6, 9, 9, 4]
    offsets = [even_offsets(f, 4) for f in widths[:-1]]
    for net in subnets(1, 0, widths, 3):
        assert sum(net.owned_numel(offsets, r) for r in range(4)) == net.numel()


def test_too_many_groups_is_an_error():
    with pytest.raises(ValueError, match="non-empty"):
        split_ids(0, 0, 1, 3, 4)


def test_gat_sub_networks_keep_whole_heads_and_the_output_layer():
    """GAT: K = 5 heads of f' = 3 units split into M = 2 groups of whole heads."""

    from hpcgnn.kinds import GAT
    from hpcgnn.layout.subnets import chain_subnet, split_block, weight_chain

    kind = GAT.replace(heads=5, output_heads=2)
    widths = [4, 15, 15, 3]
    assert split_block(kind, 15) == 3 and weight_chain(widths, kind) == ([4, 15, 15, 6], 1)
    nets = subnets(1, 0, widths, 2, block=3)
    heads = split_ids(1, 0, 1, 5, 2)  # the blocks are drawn as ids of a width-5 layer
    for net, mine in zip(nets, heads, strict=True):
        assert net.ids[1].tolist() == [3 * h + u for h in mine for u in range(3)]
        assert net.blocks(1, 3)[0] == 5 and net.blocks(1, 3)[1].tolist() == mine.tolist()
        chained = chain_subnet(net, kind)  # the output layer's K' C columns, all kept
        assert chained.widths == (4, 15, 15, 6) and chained.cols(2).tolist() == list(range(6))
        assert chained.ids[:3] == net.ids[:3]
    assert [n.sub_widths[1] for n in nets] == [9, 6]  # 3 and 2 heads
    # block 1 is the plain split, draw for draw
    plain = subnets(1, 0, widths, 2)
    assert all(np.array_equal(a.ids[1], b.ids[1])
               for a, b in zip(plain, subnets(1, 0, widths, 2, block=1), strict=True))


@pytest.mark.parametrize(
    ("kind", "per", "links"),
    [(GCN, 1, [0, 1, 2]), (SAGE, 1, [0, 1, 2]), (GIN, 1, [1, 3, 5]), (GAT, 2, [0, 0, 1, 1, 2, 2])],
    ids=["gcn", "sage", "gin", "gat"],
)
def test_a_layers_vectors_follow_its_last_weight_on_the_chain(kind, per, links):
    assert vector_links(kind, 3, per) == links


def test_gin_biases_follow_w2_and_take_the_layers_ids():
    """GIN's chain has two links per layer: ``b^l`` follows ``W_2^l`` and reads its columns."""
    widths = [5, 8, 8, 3]
    chain, per = weight_chain(widths, GIN)
    links = vector_links(GIN, 3)
    weights = [f"W_{j}^{layer}" for layer in (1, 2, 3) for j in (1, 2)]
    assert ParamOrder(per).with_biases(weights, ["b^1", "b^2", "b^3"], links) == [
        "W_1^1", "W_2^1", "b^1", "W_1^2", "W_2^2", "b^2", "W_1^3", "W_2^3", "b^3"
    ]
    initial = [np.arange(f, dtype=np.float64) for f in widths[1:]]
    vectors = SubnetBiases(None, [(f,) for f in widths[1:]], links, np.float64, initial=initial)
    for net in subnets(3, 0, widths, 2):
        picked = vectors.select(chain_subnet(net, GIN))
        for layer, b in enumerate(picked[0]):  # entry j of b^l is layer l's output id j
            np.testing.assert_array_equal(b, net.ids[layer + 1])
        assert all(not b.any() for b in picked[1])  # moments start at zero
    by_link = vectors.by_link(len(chain) - 1)
    assert [b is None for b in by_link] == [True, False] * 3


class _Recorder:
    """A world of one rank that records each all-reduce's category and entries."""

    def __init__(self):
        self.calls = []

    def allreduce(self, buf, category):
        self.calls.append((category, buf.size))


def test_a_sampled_gat_replicates_scores_and_biases_in_the_models_order():
    """Per layer ``W, a_src, a_dst, b``; the output bias (``C``) is taken whole."""
    kind = GAT.replace(heads=2, output_heads=2)
    widths = [5, 8, 8, 3]
    vectors = model_vectors(widths, kind, sampled=True)
    assert vectors.shapes == [(2, 4), (2, 4), (8,), (2, 4), (2, 4), (8,), (2, 3), (2, 3), (3,)]
    assert vectors.links == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert vectors.categories == [ATTENTION, ATTENTION, BIAS] * 3
    full = model_vectors(widths, kind, sampled=False)  # full-batch GAT: the scores alone
    assert full.categories == [ATTENTION] * 6 and full.links == [0, 0, 1, 1, 2, 2]
    assert model_vectors(widths, GIN, sampled=True).links == [1, 3, 5]
    names = [f"{v}^{layer}" for layer in (1, 2, 3) for v in ("a_src", "a_dst", "b")]
    assert ParamOrder(1).with_biases(["W^1", "W^2", "W^3"], names, vectors.links) == [
        "W^1", "a_src^1", "a_dst^1", "b^1", "W^2", "a_src^2", "a_dst^2", "b^2",
        "W^3", "a_src^3", "a_dst^3", "b^3",
    ]
    initial = [np.arange(np.prod(s), dtype=np.float64).reshape(s) for s in vectors.shapes]
    world = _Recorder()
    biases = SubnetBiases(world, vectors.shapes, vectors.links, np.float64,
                          category=vectors.categories, initial=initial)
    assert biases.categories == (ATTENTION, BIAS)
    assert biases.sizes_of(ATTENTION) == [8, 8, 8, 8, 6, 6] and biases.sizes_of(BIAS) == [8, 8, 3]
    net = subnets(3, 0, widths, 2, block=4)[1]  # one head of each hidden layer
    chained = chain_subnet(net, kind)
    picked = biases.select(chained)
    heads = [net.ids[layer + 1][::4] // 4 for layer in (0, 1)]
    for layer in (0, 1):  # a hidden layer's: the sub-network's head and its units
        a_src, _, b = picked[0][3 * layer : 3 * layer + 3]
        np.testing.assert_array_equal(a_src, initial[3 * layer][heads[layer]])
        np.testing.assert_array_equal(b, net.ids[layer + 1])
    for got, want in zip(picked[0][6:], initial[6:], strict=True):  # the output's, whole
        np.testing.assert_array_equal(got, want)
    biases.write_back(1, chained, picked)  # one category at a time
    assert world.calls == [(ATTENTION, 3 * 44), (BIAS, 3 * 19)]
    drops = subnet_heads(net, kind, 4, 1)
    assert drops is not None and drops(2) is None
    assert [int(drops(layer)[0]) for layer in (0, 1)] == [2, 2]
    np.testing.assert_array_equal(drops(1)[1], heads[1])
    assert subnet_heads(None, kind, 8, 2) is None and subnet_heads(net, GCN, 8, 2) is None
