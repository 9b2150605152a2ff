"""GraphSAGE-mean (Hamilton et al.): ``act(H W_self + D_in^-1 A^T H W_neigh)``, no bias."""

from hpcgnn.kinds.base import LayerKind

SAGE = LayerKind(
    name="sage",
    title="GraphSAGE-mean (H W_self + D_in^-1 A^T H W_neigh)",
    self_weight=True,
    mean=True,
    self_loops=False,
    modes=frozenset({"1d", "1.5d", "2d", "3d", "halo", "offload", "minibatch", "gist"}),
)
