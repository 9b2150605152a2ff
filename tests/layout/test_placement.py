import pytest

from hpcgnn.layout.placement import axis_dims, ring_streams, spans_nodes


def test_axes_vary_the_grid_dimensions():
    assert axis_dims("col", 2) == (0,) and axis_dims("row", 2) == (1,)
    assert axis_dims("fiber", 3) == (2,) and axis_dims("fiber", 2) == ()
    assert axis_dims("world", 3) == (0, 1, 2)
    with pytest.raises(ValueError, match="unknown axis"):
        axis_dims("diagonal", 2)


@pytest.mark.parametrize(
    "dims,per_node,inside",
    [
        ((10, 6), 6, {"row"}),  # 1.5D rows of 6 consecutive ranks: one node each
        ((32, 2), 6, {"row"}),  # pairs never straddle a node of 6
        ((16, 4), 6, set()),  # ranks 4..7 straddle nodes 0 and 1
        ((2, 3, 2), 6, {"row", "fiber"}),  # a grid layer of one row is one node
        ((4, 2, 2), 4, {"row", "fiber"}),
        ((8,), 8, {"row", "col", "fiber", "world"}),  # one node holds every rank
        ((8,), 0, {"row", "col", "fiber", "world"}),  # a machine without nodes
    ],
)
def test_which_axes_stay_inside_a_node(dims, per_node, inside):
    got = {a for a in ("row", "col", "fiber", "world") if not spans_nodes(dims, a, per_node)}
    # an axis the grid does not have has no group to span nodes
    assert got == inside | {a for a in ("row", "fiber") if not axis_dims(a, len(dims))}


@pytest.mark.parametrize(
    "dims,axis,per_node,ports,streams",
    [
        ((12, 1), "col", 6, 2, 1),  # 1.5D c = 1 on 2 nodes of 6: one ring, out from rank 5
        ((6, 2), "col", 6, 2, 2),  # c = 2: two rings, out from ranks 4 and 5 (one socket)
        ((4, 3), "col", 6, 2, 3),  # c = 3: ranks 3, 4, 5
        ((6, 2), "col", 6, 1, 2),  # one port: the same two
        ((6, 2), "col", 1, 2, 1),  # a rank per node: each ring's stream has a port alone
        ((6, 2), "row", 6, 2, 0),  # the row pairs stay inside a node
        ((4, 6), "col", 6, 2, 3),  # 6 rings, a rank of each per node: 3 per socket
        ((16, 4), "row", 6, 2, 1),  # rows of 4 that straddle a node leave it once
        ((2, 3, 2), "fiber", 6, 2, 0),
        ((8,), "world", 8, 2, 0),  # one node holds every rank
        ((8,), "world", 0, 1, 0),  # a machine without nodes
    ],
)
def test_ring_streams_count_what_leaves_a_port_at_once(dims, axis, per_node, ports, streams):
    assert ring_streams(dims, axis, per_node, ports) == streams
    # a stream leaves a node exactly where some group spans two
    assert (streams > 0) == spans_nodes(dims, axis, per_node)
