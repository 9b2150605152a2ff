"""A layer's forward traced on shapes: the calls the cost models and plans read."""

from __future__ import annotations

import pytest

from hpcgnn.errors import ConfigError
from hpcgnn.kinds import GAT, GCN, GIN, SAGE, Layer, Weight
from hpcgnn.layout.trace import AGGREGATE, DENSE, aggregation_widths, check_layer, trace


class Propagated(Layer):
    """A dense step, then ``steps`` aggregations of the logits (APPNP's shape)."""

    def __init__(self, steps: int = 3) -> None:
        self.steps = steps

    def forward(self, g, h, w):
        out = g.dense(h, w[0])
        for _ in range(self.steps if g.last else 0):
            out = g.aggregate(out) / 2.0 - out
        return out if g.last else out.relu()


class Residual(Layer):
    """Layer 0 keeps its output; the later layers read it (``g.state``), GCNII's way."""

    def weights(self, f_in, f_out, layer, last):
        return [Weight((f_in, f_out))] + ([Weight((f_out, f_out), 1)] if layer == 0 else [])

    def forward(self, g, h, w):
        z = g.dense(h, w[0])
        if g.layer == 0:
            g.state["first"] = z = g.dense(z, w[1])
        return g.aggregate(z) + (g.state["first"] if z.width == 8 else 0.0)


def test_the_built_in_layers_trace_to_their_exchanges():
    assert aggregation_widths([7, 8, 3]) == [(7, False), (3, True)]  # (Â^T X) W, Â^T (H W)
    assert aggregation_widths([7, 8, 3], SAGE) == [(7, False), (3, True)]
    assert aggregation_widths([7, 8, 3], GIN) == [(7, False), (3, True)]
    assert aggregation_widths([7, 8, 3], GAT.replace(heads=2)) == [(8 + 2, True), (3 + 1, True)]
    dense = [(c.layer, c.f_in, c.f_out) for c in trace([7, 8, 3], GIN) if c.primitive == DENSE]
    assert dense == [(0, 7, 8), (0, 8, 8), (1, 8, 3), (1, 3, 3)]
    assert [c.primitive for c in trace([7, 8, 3], GCN)] == [AGGREGATE, DENSE, DENSE, AGGREGATE]


def test_a_layer_of_ones_own_is_traced_as_it_runs():
    calls = trace([7, 8, 3], Propagated(steps=4))
    assert [(c.layer, c.primitive, c.width) for c in calls] == [
        (0, DENSE, 8), (1, DENSE, 3), *[(1, AGGREGATE, 3)] * 4]
    assert aggregation_widths([7, 8, 3], Propagated(steps=4)) == [(3, True)] * 4
    assert [c.width for c in trace([7, 8, 8, 3], Residual()) if c.primitive == AGGREGATE] == [
        8, 8, 3]


def test_a_layer_that_cannot_run_its_widths_is_refused_in_one_line():
    class Wrong(Layer):
        def forward(self, g, h, w):
            return g.aggregate(h)  # f_in columns, not f_out

    class Foreign(Layer):
        def forward(self, g, h, w):
            return h.numpy()

    check_layer([7, 8, 3], Propagated())
    with pytest.raises(ConfigError, match=r"cannot run on widths 7-8-3 .*gives 7 columns, not 8"):
        check_layer([7, 8, 3], Wrong())
    with pytest.raises(ConfigError, match="AttributeError") as err:
        check_layer([7, 8, 3], Foreign())
    assert "\n" not in str(err.value)


def test_one_hop_says_why_a_layer_needs_its_input_rows_as_its_output_rows():
    from hpcgnn.layout.trace import one_hop

    class Own(Layer):
        def forward(self, g, h, w):
            return g.aggregate(g.dense(h, w[0])) + g.dense(g.own(h), w[0])

    class Forgot(Layer):  # the self term without g.own: right in full-batch layouts only
        def forward(self, g, h, w):
            return g.aggregate(g.dense(h, w[0])) + g.dense(h, w[0])

    class TwoHops(Layer):
        def forward(self, g, h, w):
            return g.aggregate(g.aggregate(g.dense(h, w[0])))

    class Kept(Layer):
        def forward(self, g, h, w):
            if g.layer == 0:
                g.state["x"] = g.aggregate(h)
            return g.aggregate(g.dense(h if g.layer == 0 else g.state["x"], w[0]))

    for kind in (GCN, SAGE, GIN, GAT.replace(heads=2), Own()):
        assert one_hop([7, 8, 3], kind) is None, kind
    assert one_hop([7, 8, 3], Forgot()) == "layer 0's output has mixed rows"
    assert one_hop([7, 3], TwoHops()) == (
        "layer 0's aggregation reads a value of its output rows (an aggregation's): two hops")
    assert "an earlier layer kept" in one_hop([8, 8, 3], Kept())
