"""APPNP (Gasteiger, Bojchevski and Günnemann, ICLR 2019): predict, then propagate.

Every layer is a linear map (ReLU on the hidden ones), an MLP on each vertex alone; the
last layer then propagates its logits ``K`` steps with personalised PageRank::

    Z_0 = H W        Z_{k+1} = (1 - alpha) Â^T Z_k + alpha Z_0

on GCN's normalised operator (``Â = D^-1/2 (A + I) D^-1/2``). Train it with::

    PYTHONPATH=examples/layers mpiexec -n 4 hpcgnn train G.h5 --model appnp:APPNP

``--layers 2 --hidden 8``: the MLP ``f -> 8 -> C``, then ``K = 10`` steps of ``C`` columns.
Settings: ``APPNP(steps=..., alpha=...)`` from Python (``hpcgnn.train(model=...)``).
"""

from hpcgnn.nn import Layer


class APPNP(Layer):
    """A linear layer; the last one followed by ``steps`` steps of teleport ``alpha``."""

    title = "APPNP (MLP, then K steps of (1 - alpha) Â^T Z + alpha Z_0)"

    def __init__(self, steps: int = 10, alpha: float = 0.1) -> None:
        self.steps, self.alpha = steps, alpha

    def forward(self, g, h, w):
        """``H W`` (ReLU unless last); on the last layer the propagation steps."""
        z = g.dense(h, w[0])
        if not g.last:
            return z.relu()
        z0 = z
        for _ in range(self.steps):
            z = (1.0 - self.alpha) * g.aggregate(z) + self.alpha * z0
        return z
