"""The buffers an exchange or an aggregation keeps from call to call."""

import torch

from hpcgnn.exchange.workspace import Workspace


def test_one_buffer_per_use_and_row_shape_kept_while_the_rows_agree():
    work = Workspace()
    x = torch.zeros((3, 4), dtype=torch.float32)
    a = work.take("fwd", x, 5)
    assert a.shape == (5, 4) and a.dtype == x.dtype
    assert work.take("fwd", x, 5) is a  # kept
    assert work.take("bwd", x, 5) is not a  # another use
    assert work.take("fwd", torch.zeros((1, 8)), 5).shape == (5, 8)  # another width
    assert work.take("fwd", x, 5) is a
    b = work.take("fwd", x, 6)  # other rows: a new buffer in its place
    assert b.shape == (6, 4) and work.take("fwd", x, 6) is b
    assert work.take("fwd", x.double(), 6).dtype == torch.float64
