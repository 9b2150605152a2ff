"""GIN (Xu et al.): ``act(MLP((1 + eps) H + A^T H))``, the MLP ``ReLU(. W_1) W_2``, no bias.

The sum aggregation runs on the unnormalised operator ``A^T + (1 + eps) I`` (``eps``
fixed, ``--gin-eps``), so every layout's SpMM carries it unchanged; the MLP is PyG's
``GIN`` layer ``MLP([f_in, f_out, f_out])`` without biases, as GCN's layers have none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpcgnn.kinds.base import Layer, Operator, Primitives, Weight


class GINLayer(Layer):
    """``act(ReLU((A^T + (1 + eps) I) H W_1) W_2)``.

    ``W_1`` (``f_in x f_out``) from the seed's stream, ``W_2`` (``f_out x f_out``) from
    ``seed + 1``'s.
    """

    name = "gin"
    title = "GIN (ReLU(((1+eps) H + A^T H) W_1) W_2)"
    flags = frozenset({"gin_eps"})

    def __init__(self, eps: float = 0.0) -> None:
        self.eps = eps

    def configured(self, **settings: Any) -> GINLayer:
        """With ``--gin-eps``."""
        return GINLayer(eps=settings.get("gin_eps", self.eps))

    @property
    def operator(self) -> Operator:  # type: ignore[override]
        """``A^T + (1 + eps) I``, unnormalised."""
        return Operator("sum", 1.0 + self.eps)

    def weights(self, f_in: int, f_out: int, layer: int, last: bool) -> list[Weight]:
        """``W_1`` (stream 0, ``f_in x f_out``) and ``W_2`` (stream 1, ``f_out x f_out``)."""
        return [Weight((f_in, f_out)), Weight((f_out, f_out), stream=1)]

    def forward(self, g: Primitives, h: Any, w: Sequence[Any]) -> Any:
        """The sum and ``W_1`` in the narrower order, ReLU, ``W_2`` (+ bias), ReLU unless last."""
        u = g.propagate(h, w[0]).relu()
        z = g.bias(g.dense(u, w[1]))
        return z if g.last else z.relu()


GIN = GINLayer()
