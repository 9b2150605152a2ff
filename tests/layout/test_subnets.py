"""GIST's random groups: disjoint, covering, balanced, and the same on every rank."""


import numpy as np
import pytest

from hpcgnn.exchange.subnet_biases import ATTENTION, BIAS, SubnetBiases
from hpcgnn.kinds import GAT, GCN, GIN, SAGE, Layer, Weight
from hpcgnn.layout.subnets import (
    Placement,
    cut,
    entries,
    group_sizes,
    merge,
    model_params,
    split_block,
    split_ids,
    subnet_heads,
    subnets,
    vector_places,
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


@pytest.mark.parametrize(("ranks", "groups", "sizes", "roots"), [
    (4, 2, (2, 2), (0, 2)), (3, 2, (2, 1), (0, 2)), (2, 2, (1, 1), (0, 1)),
    (1, 2, (1, 1), (0, 0)), (2, 5, (1,) * 5, (0, 0, 0, 1, 1)),
    (3, 7, (1,) * 7, (0, 0, 0, 1, 1, 2, 2)),
])
def test_a_placement_gives_every_sub_network_one_group_and_every_rank_one(
    ranks, groups, sizes, roots
):
    """``M <= P``: groups of consecutive ranks; ``M > P``: a rank hosts several of one rank."""
    p = Placement.of(ranks, groups)
    assert (p.sizes, p.roots) == (sizes, roots)
    hosted = [p.hosted(r) for r in range(ranks)]
    assert all(h for h in hosted) and sorted({m for h in hosted for m in h}) == list(range(groups))
    if groups <= ranks:
        assert all(len(h) == 1 for h in hosted)
    else:  # disjoint, consecutive, the counts differing by at most one
        assert sum(len(h) for h in hosted) == groups
        assert max(map(len, hosted)) - min(map(len, hosted)) <= 1


def test_every_round_and_layer_draws_a_new_split_and_the_same_everywhere():
    a = split_ids(3, 0, 1, 64, 4)
    assert all(np.array_equal(x, y) for x, y in zip(a, split_ids(3, 0, 1, 64, 4), strict=True))
    assert not np.array_equal(a[0], split_ids(3, 1, 1, 64, 4)[0])
    assert not np.array_equal(a[0], split_ids(3, 0, 2, 64, 4)[0])


def test_inputs_and_outputs_are_never_split():
    nets = subnets(0, 2, [5, 10, 10, 3], 3)
    params = model_params([5, 10, 10, 3], GCN)
    for net in nets:
        assert net.ids[0].tolist() == list(range(5)) and net.ids[-1].tolist() == [0, 1, 2]
        sizes = cut(params, net).sizes()
        assert sizes[0][0] == 5 and sizes[-1][1] == 3
    for layer in (1, 2):
        assert sorted(np.concatenate([n.ids[layer] for n in nets]).tolist()) == list(range(10))
    # a sub-network has the same width in every hidden layer
    assert [n.sub_widths[1:3] for n in nets] == [[4, 4], [3, 3], [3, 3]]


def test_owned_entries_add_up_to_the_sub_model():
    from hpcgnn.layout.blocks import even_offsets

    widths = [6, 9, 9, 4]
    params = model_params(widths, GIN)
    offsets = [even_offsets(p.shape[0], 4) for p in params]
    for net in subnets(1, 0, widths, 3):
        sub = cut(params, net)
        assert sum(sub.owned_numel(offsets, r) for r in range(4)) == sub.numel()


def test_too_many_groups_is_an_error():
    with pytest.raises(ValueError, match="non-empty"):
        split_ids(0, 0, 1, 3, 4)


def test_gat_sub_networks_keep_whole_heads_and_the_output_layer():
    """GAT: K = 5 heads of f' = 3 units split into M = 2 groups of whole heads."""
    kind = GAT.replace(heads=5, output_heads=2)
    widths = [4, 15, 15, 3]
    params = model_params(widths, kind)
    assert split_block(kind, 15) == 3
    assert [p.shape for p in params if p.sharded] == [(4, 15), (15, 15), (15, 6)]
    nets = subnets(1, 0, widths, 2, block=3)
    heads = split_ids(1, 0, 1, 5, 2)  # the blocks are drawn as ids of a width-5 layer
    for net, mine in zip(nets, heads, strict=True):
        assert net.ids[1].tolist() == [3 * h + u for h in mine for u in range(3)]
        assert net.blocks(1, 3)[0] == 5 and net.blocks(1, 3)[1].tolist() == mine.tolist()
        sub = cut(params, net)  # the output layer's K' C columns, all kept
        assert sub.cols(2).tolist() == list(range(6)) and sub.rows(2) is net.ids[2]
    assert [n.sub_widths[1] for n in nets] == [9, 6]  # 3 and 2 heads
    # block 1 is the plain split, draw for draw
    plain = subnets(1, 0, widths, 2)
    assert all(np.array_equal(a.ids[1], b.ids[1])
               for a, b in zip(plain, subnets(1, 0, widths, 2, block=1), strict=True))


class _Conv(Layer):
    """GCNII's shape: a map in, a square convolution at the hidden width, a map out."""

    def weights(self, f_in, f_out, layer, last):
        width = f_out if layer == 0 else f_in
        out = [Weight((f_in, width))] if layer == 0 else []
        out.append(Weight((width, width)))
        if last and layer > 0:
            out.append(Weight((width, f_out)))
        out.append(Weight((4, 4), stream=1))  # a width of its own: never cut
        return out


@pytest.mark.parametrize(
    ("kind", "dims"),
    [
        (GCN, [(0, 1), (1, 2), (2, 3)]),
        (SAGE, [(0, 1), (0, 1), (1, 2), (1, 2), (2, 3), (2, 3)]),
        (GIN, [(0, 1), (1, 1), (1, 2), (2, 2), (2, 3), (3, 3)]),
        (GAT.replace(heads=2, output_heads=3),  # W (a, K f'), a_src, a_dst (K, f')
         [(0, 1), "1", "1", (1, 2), "2", "2", (2, None), (None, 3), (None, 3)]),
        (_Conv(), [(0, 1), (1, 1), None, (1, 1), None, (2, 2), (2, 3), None]),
    ],
    ids=["gcn", "sage", "gin", "gat", "internal-width"],
)
def test_the_declared_shapes_say_which_width_each_axis_follows(kind, dims):
    """``(rows, cols)`` of a row-sharded weight; ``"l"``: entries following width ``l``."""
    params = model_params([6, 8, 8, 3], kind)
    got = [(p.rows, p.cols) if p.sharded else (None if p.flat is None else str(p.flat))
           if p.rows is None and p.cols is None else (p.rows, p.cols) for p in params]
    assert got == dims


def _example(spec):
    import importlib
    import sys
    from pathlib import Path

    module, _, name = spec.partition(":")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "layers"))
    try:
        return getattr(importlib.import_module(module), name)()
    finally:
        sys.path.pop(0)


@pytest.mark.parametrize("spec", ["gcn", "sage", "gin", "gat", "appnp:APPNP", "gcnii:GCNII",
                                  "graphconv:GraphConv", "conv"])
@pytest.mark.parametrize("sampled", [False, True])
def test_a_sub_networks_cut_is_the_layer_declared_at_its_widths(spec, sampled):
    """Every sub-weight (sharded or replicated) has the shape the sub-model declares."""
    kinds = {"gcn": GCN, "sage": SAGE, "gin": GIN, "gat": GAT.replace(heads=3, output_heads=2),
             "conv": _Conv()}
    kind = kinds[spec] if spec in kinds else _example(spec)
    widths = [5, 12, 12, 12, 3]
    block = split_block(kind, 12)
    params = model_params(widths, kind, sampled)
    for net in subnets(4, 1, widths, 3, block=block):
        sub_kind = kind.replace(heads=kind.heads * net.sub_widths[1] // 12)
        want = [p.shape for p in model_params(net.sub_widths, sub_kind, sampled)]
        sharded = iter(cut(params, net).sizes())
        got = [next(sharded) if p.sharded else
               np.zeros(p.shape).reshape(-1)[entries(p, net)[0]].reshape(entries(p, net)[1]).shape
               for p in params]
        assert got == want


def test_gin_biases_follow_w2_and_take_the_layers_ids():
    """``b^l`` follows ``W_2^l`` (the layer's last weight) and reads the layer's output ids."""
    widths = [5, 8, 8, 3]
    params = model_params(widths, GIN, biased=True)
    weights = [f"W_{j}^{layer}" for layer in (1, 2, 3) for j in (1, 2)]
    assert merge(params, weights, ["b^1", "b^2", "b^3"]) == [
        "W_1^1", "W_2^1", "b^1", "W_1^2", "W_2^2", "b^2", "W_1^3", "W_2^3", "b^3"
    ]
    assert vector_places(params) == [2, 4, 6]
    vec = [p for p in params if not p.sharded]
    initial = [np.arange(f, dtype=np.float64) for f in widths[1:]]
    vectors = SubnetBiases(None, vec, widths, np.float64, initial=initial)
    assert vectors.averaged == [False, False, True]
    for net in subnets(3, 0, widths, 2):
        picked = vectors.select(net)
        for layer, b in enumerate(picked[0]):  # entry j of b^l is layer l's output id j
            np.testing.assert_array_equal(b, net.ids[layer + 1])
        assert all(not b.any() for b in picked[1])  # moments start at zero


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
    params = model_params(widths, kind, biased=True)
    vec = [p for p in params if not p.sharded]
    assert [p.shape for p in vec] == [(2, 4), (2, 4), (8,), (2, 4), (2, 4), (8,), (2, 3),
                                      (2, 3), (3,)]
    assert vector_places(params) == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    names = [f"{v}^{layer}" for layer in (1, 2, 3) for v in ("a_src", "a_dst", "b")]
    assert merge(params, ["W^1", "W^2", "W^3"], names) == [
        "W^1", "a_src^1", "a_dst^1", "b^1", "W^2", "a_src^2", "a_dst^2", "b^2",
        "W^3", "a_src^3", "a_dst^3", "b^3",
    ]
    full = model_params(widths, kind)  # full-batch GAT: the scores alone
    assert [p.bias for p in full if not p.sharded] == [False] * 6
    initial = [np.arange(np.prod(p.shape), dtype=np.float64).reshape(p.shape) for p in vec]
    world = _Recorder()
    biases = SubnetBiases(world, vec, widths, np.float64, initial=initial)
    assert biases.categories == (ATTENTION, BIAS)
    assert biases.sizes_of(ATTENTION) == [8, 8, 8, 8, 6, 6] and biases.sizes_of(BIAS) == [8, 8, 3]
    net = subnets(3, 0, widths, 2, block=4)[1]  # one head of each hidden layer
    picked = biases.select(net)
    heads = [net.ids[layer + 1][::4] // 4 for layer in (0, 1)]
    for layer in (0, 1):  # a hidden layer's: the sub-network's head and its units
        a_src, _, b = picked[0][3 * layer : 3 * layer + 3]
        np.testing.assert_array_equal(a_src, initial[3 * layer][heads[layer]])
        np.testing.assert_array_equal(b, net.ids[layer + 1])
    for got, want in zip(picked[0][6:], initial[6:], strict=True):  # the output's, whole
        np.testing.assert_array_equal(got, want)
    assert entries(vec[0], net)[1] == (-1, 4)
    biases.write_back(1, [(net, picked)])  # one category at a time
    assert world.calls == [(ATTENTION, 3 * 44), (BIAS, 3 * 19)]
    drops = subnet_heads(net, kind, 4, 1)
    assert drops is not None and drops(2) is None
    assert [int(drops(layer)[0]) for layer in (0, 1)] == [2, 2]
    np.testing.assert_array_equal(drops(1)[1], heads[1])
    assert subnet_heads(None, kind, 8, 2) is None
