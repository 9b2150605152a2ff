"""GCN (Kipf and Welling): ``act(Â^T H W)`` with ``Â = D^-1/2 (A + I) D^-1/2``."""

from hpcgnn.kinds.base import LayerKind

GCN = LayerKind(
    name="gcn",
    title="GCN (Â^T H W)",
    self_weight=False,
    mean=False,
    self_loops=True,
    modes=frozenset({"1d", "1.5d", "2d", "3d", "halo", "offload", "minibatch", "gist"}),
)
