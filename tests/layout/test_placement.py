import pytest

from hpcgnn.layout.placement import axis_dims, spans_nodes


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
