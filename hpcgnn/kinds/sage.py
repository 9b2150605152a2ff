"""GraphSAGE-mean (Hamilton et al.): ``act(H W_self + D_in^-1 A^T H W_neigh)``, no bias."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpcgnn.kinds.base import MEAN, Layer, Primitives, Weight


class SAGELayer(Layer):
    """``act(H W_self + D_in^-1 A^T H W_neigh)``.

    Two weights per layer, ``W_self, W_neigh``: the ``W_self`` from the seed's stream, the
    ``W_neigh`` from ``seed + 1``'s. The self term is one more dense step on this rank's own
    rows, added before the layer's output is delivered (a SUMMA grid gathers the sum once).
    """

    name = "sage"
    title = "GraphSAGE-mean (H W_self + D_in^-1 A^T H W_neigh)"
    operator = MEAN
    input_weight = 1

    def weights(self, f_in: int, f_out: int, layer: int, last: bool) -> list[Weight]:
        """``W_self`` (stream 0) and ``W_neigh`` (stream 1), both ``f_in x f_out``."""
        return [Weight((f_in, f_out)), Weight((f_in, f_out), stream=1)]

    def forward(self, g: Primitives, h: Any, w: Sequence[Any]) -> Any:
        """``D_in^-1 A^T H W_neigh + H W_self`` (a bias where the run has one), ReLU unless last."""
        z = g.bias(g.propagate(h, w[1], self_weight=w[0]))
        return z if g.last else z.relu()


SAGE = SAGELayer()
