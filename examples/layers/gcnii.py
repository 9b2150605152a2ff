"""GCNII (Chen, Wei, Huang, Ding and Li, ICML 2020): initial residual and identity mapping.

A GCNII convolution at width ``f`` (layer ``l``, 1-based) mixes the aggregate with the
initial representation ``H_0`` and maps it through ``W`` near the identity::

    S = (1 - alpha) Â^T H + alpha H_0
    H' = ReLU((1 - beta_l) S + beta_l S W)        beta_l = log(theta / l + 1)

as PyG's ``GCN2Conv`` (shared weights). The model is GCNII's: a linear map from the
features into ``f`` (``H_0 = ReLU(X W_in)``, kept for every later layer), convolutions, and a
linear map out to the classes. Here each layer of the stack is one convolution: the first
also holds the linear map in, the last the linear map out, so ``--layers L`` gives ``L``
convolutions (``--layers 2 --hidden 8``: ``X W_in`` into 8 columns, two convolutions, the
logits). Train it with::

    PYTHONPATH=examples/layers mpiexec -n 4 hpcgnn train G.h5 --model gcnii:GCNII
"""

import math

from hpcgnn.nn import Layer, Weight


class GCNII(Layer):
    """One GCNII convolution; the first layer maps the features in, the last maps out."""

    title = "GCNII (((1 - alpha) Â^T H + alpha H_0)((1 - beta) I + beta W))"

    def __init__(self, alpha: float = 0.1, theta: float = 0.5) -> None:
        self.alpha, self.theta = alpha, theta

    def weights(self, f_in, f_out, layer, last):
        """``W_in`` (first layer), the convolution's ``W``, ``W_out`` (last layer)."""
        width = f_out if layer == 0 else f_in  # the convolution's
        out = [Weight((f_in, width))] if layer == 0 else []  # W_in
        out.append(Weight((width, width)))  # the convolution's W
        if last and layer > 0:
            out.append(Weight((width, f_out)))  # W_out
        return out

    def forward(self, g, h, w):
        """The linear map in (first layer), the convolution, the map out (last layer)."""
        if g.layer == 0:
            h = g.dense(h, w[0]).relu()
            g.state["h0"] = h
            w = w[1:]
        beta = math.log(self.theta / (g.layer + 1) + 1.0)
        s = (1.0 - self.alpha) * g.aggregate(h) + self.alpha * g.state["h0"]
        z = (1.0 - beta) * s + beta * g.dense(s, w[0])
        if not g.last:
            return z.relu()
        return z if len(w) == 1 else g.dense(z.relu(), w[1])
