"""The layer kinds: facts, registry, and the one check that reads a kind's modes."""

from __future__ import annotations

import pytest

from hpcgnn import kinds
from hpcgnn.config import MODELS, TrainConfig
from hpcgnn.errors import ConfigError
from hpcgnn.kinds import GAT, GCN, GIN, KINDS, SAGE, layer_kind
from hpcgnn.layout.order import weight_shapes
from hpcgnn.layout.trace import aggregation_widths


def test_the_registry_names_every_kind_once_in_the_cli_order():
    assert MODELS == ("gcn", "sage", "gin", "gat")
    assert KINDS == {"gcn": GCN, "sage": SAGE, "gin": GIN, "gat": GAT}
    assert layer_kind("sage") is SAGE and str(GCN) == "gcn"
    with pytest.raises(ConfigError, match="--model must be one of gcn, sage, gin, gat, got gin2"):
        layer_kind("gin2")


def test_facts_of_gcn_and_graphsage():
    assert (GCN.weights_per_layer, GCN.self_loops, GCN.mean) == (1, True, False)
    assert (SAGE.weights_per_layer, SAGE.self_loops, SAGE.mean) == (2, False, True)
    assert TrainConfig(model="sage").kind is SAGE and TrainConfig().weights_per_layer == 1
    for kind in (GCN, SAGE):  # every mode trains both
        assert {"1d", "1.5d", "2d", "3d", "halo", "offload", "minibatch", "gist"} <= kind.modes


def test_gin_is_an_mlp_on_the_unnormalised_sum():
    assert (GIN.weights_per_layer, GIN.self_loops, GIN.summed) == (2, True, True)
    assert GIN.modes == {"1d", "1.5d", "2d", "3d", "halo", "offload", "gist", "minibatch"}
    assert weight_shapes([7, 5, 3], GIN) == [(7, 5), (5, 5), (5, 3), (3, 3)]
    assert weight_shapes([7, 5, 3], SAGE) == [(7, 5), (7, 5), (5, 3), (5, 3)]
    assert weight_shapes([7, 5, 3]) == [(7, 5), (5, 3)]
    assert TrainConfig(model="gin", gin_eps=0.5).kind == GIN.replace(eps=0.5)


def test_gat_weights_are_w_and_the_score_vectors_per_head():
    assert (GAT.weights_per_layer, GAT.self_loops, GAT.attention) == (3, True, True)
    assert GAT.modes == {"1d", "1.5d", "2d", "3d", "halo", "offload", "minibatch", "gist"}
    kind = TrainConfig(model="gat", hidden=8, heads=4, output_heads=2).kind
    assert kind == GAT.replace(heads=4, output_heads=2)
    assert weight_shapes([7, 8, 8, 3], kind) == [(7, 8), (4, 2), (4, 2), (8, 8), (4, 2), (4, 2),
                                                 (8, 6), (2, 3), (2, 3)]
    assert aggregation_widths([7, 8, 3], kind) == [(8 + 4, True), (6 + 2, True)]


def test_a_mode_a_kind_lacks_is_refused_in_one_line(monkeypatch):
    from hpcgnn.training.modes import FullBatchMode, OffloadMode

    narrow = SAGE.replace(name="narrow", modes=frozenset({"1d"}))
    monkeypatch.setitem(kinds.KINDS, "narrow", narrow)
    cfg = TrainConfig(model="narrow")
    assert FullBatchMode().resolve(cfg, 4) is cfg
    with pytest.raises(ConfigError, match="--model narrow is not available with --mode offload"):
        OffloadMode().resolve(cfg, 4)


def test_a_layer_is_its_class_and_settings():
    class Mine(kinds.Layer):
        def __init__(self, k: int = 2) -> None:
            self.k = k

    assert Mine() == Mine(2) != Mine(3) and hash(Mine()) == hash(Mine(2))
    assert Mine(3).settings() == {"k": 3} and repr(Mine(3)) == "Mine(k=3)"
    assert str(Mine()).endswith("test_kinds:test_a_layer_is_its_class_and_settings.<locals>.Mine")
    assert Mine().layer_shapes(7, 5, 0, False) == [(7, 5)] and Mine().weights_per_layer == 1
    assert GIN.replace(eps=0.5).operator == kinds.Operator("sum", 1.5)
    assert GIN.operator.name == "sum"


def test_weights_are_drawn_per_stream_in_the_models_order():
    from hpcgnn.nn.init import glorot_shapes, init_weights

    class TwoStreams(kinds.Layer):
        def weights(self, f_in, f_out, layer, last):
            return [kinds.Weight((f_in, f_out), 1), kinds.Weight((f_out, 2))]

    got = init_weights([5, 4, 3], 7, kind=TwoStreams())
    first = glorot_shapes([(4, 2), (3, 2)], 7)
    second = glorot_shapes([(5, 4), (4, 3)], 8)
    want = [second[0], first[0], second[1], first[1]]
    assert all((g.detach().numpy() == w).all() for g, w in zip(got, want, strict=True))
