"""What each sampler's blocks provide, and the one-line refusal of a layer they cannot run."""

from __future__ import annotations

import pytest

from hpcgnn.errors import ConfigError
from hpcgnn.kinds import GAT, GCN, GIN, SAGE, Layer, Operator, Weight
from hpcgnn.sampling.samplers import CLUSTER, LAYER_WISE, NODE_WISE

WIDTHS = [6, 8, 3]


class OwnOnNormalized(Layer):
    """A self term on GCN's operator: LADIES must keep each row's own vertex."""

    def weights(self, f_in, f_out, layer, last):
        return [Weight((f_in, f_out)), Weight((f_in, f_out), stream=1)]

    def forward(self, g, h, w):
        return g.propagate(h, w[0], self_weight=w[1])


class DenseOnly(Layer):
    """Never aggregates: its output has its input's rows."""

    def forward(self, g, h, w):
        return g.dense(h, w[0])


class Weighted(Layer):
    operator = Operator("weighted")

    def forward(self, g, h, w):
        return g.propagate(h, w[0])


@pytest.mark.parametrize(("sampler", "layers"), [
    (NODE_WISE, [SAGE, GIN, GAT, Weighted()]), (LAYER_WISE, [GCN, GIN, GAT]),
    (CLUSTER, [GCN, SAGE, GIN, GAT, Weighted()]),
])
def test_each_sampler_runs_the_built_ins_whose_operators_it_provides(sampler, layers):
    for kind in layers:
        sampler.check(kind, WIDTHS)


@pytest.mark.parametrize(("sampler", "kind", "words"), [
    (NODE_WISE, GCN, "--model gcn does not exist with --sampler sage: it aggregates over the"
                     " normalized operator and the blocks of --sampler sage provide mean, sum,"
                     " pattern, weighted; use --sampler ladies for gcn"),
    (LAYER_WISE, SAGE, "--model sage does not exist with --sampler ladies: it aggregates over"
                       " the mean operator and the blocks of --sampler ladies provide"
                       " normalized, sum, pattern; use --sampler sage for sage"),
    (LAYER_WISE, Weighted(), "over the weighted operator and the blocks of --sampler ladies"
                             " provide normalized, sum, pattern; use --sampler sage for"),
    (LAYER_WISE, DenseOnly(), "a sampled block's output rows are some of its input rows, and"
                              " layer 0's output has its input's rows"),
])
def test_a_layer_the_blocks_cannot_run_is_one_line(sampler, kind, words):
    with pytest.raises(ConfigError) as err:
        sampler.check(kind, WIDTHS)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_layer_wise_blocks_keep_a_row_s_own_vertex_where_the_layer_reads_it():
    assert not LAYER_WISE.self_rows(GCN, WIDTHS)
    assert LAYER_WISE.self_rows(GIN, WIDTHS) and LAYER_WISE.self_rows(GAT, WIDTHS)
    assert LAYER_WISE.self_rows(OwnOnNormalized(), WIDTHS)  # through g.own
    assert not NODE_WISE.self_rows(SAGE, WIDTHS)  # the rows lead the columns
