"""GIN (Xu et al.): ``act(MLP((1 + eps) H + A^T H))``, the MLP ``ReLU(. W_1) W_2``, no bias.

The sum aggregation runs on the unnormalised operator ``A^T + (1 + eps) I`` (``eps``
fixed, ``--gin-eps``), so every layout's SpMM carries it unchanged; the MLP is PyG's
``GIN`` layer ``MLP([f_in, f_out, f_out])`` without biases, as GCN's layers have none.
"""

from hpcgnn.kinds.base import LayerKind

GIN = LayerKind(
    name="gin",
    title="GIN (ReLU(((1+eps) H + A^T H) W_1) W_2)",
    self_weight=False,
    mean=False,
    self_loops=True,
    modes=frozenset({"1d", "1.5d", "2d", "3d", "halo", "offload", "gist", "minibatch"}),
    summed=True,
    mlp=True,
)
