"""GCN (Kipf and Welling): ``act(Â^T H W)`` with ``Â = D^-1/2 (A + I) D^-1/2``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpcgnn.kinds.base import Layer, Primitives


class GCNLayer(Layer):
    """``act(Â^T H W)``: ReLU on hidden layers, the logits on the last."""

    name = "gcn"
    title = "GCN (Â^T H W)"

    def forward(self, g: Primitives, h: Any, w: Sequence[Any]) -> Any:
        """``Â^T H W`` in the narrower order (a bias where the run has one), ReLU unless last."""
        z = g.bias(g.propagate(h, w[0]))
        return z if g.last else z.relu()


GCN = GCNLayer()
