"""GAT (Veličković et al.): attention over each vertex's in-edges and itself, ``K`` heads.

Per layer ``z = H W`` split into ``K`` heads, scores ``e_ij = LeakyReLU(a_dst . z_i +
a_src . z_j)`` over the pattern of ``A^T + I``, a softmax over each row, ``h'_i =
ELU(||_k sum_j alpha_ij z_j)`` (the mean of the heads, no activation, on the last layer);
as PyG's ``GATConv`` without bias. The operator is a pattern only: its values are unused
(:func:`hpcgnn.graph.normalize.operator_block` gives the ones of ``A^T + I``). The layer
is :mod:`hpcgnn.nn.gat`; it needs each row's whole neighbourhood on the rank that owns
the row or a reduction along the ranks that split its sources: the block-row layouts
with a gather of rows (``1d``: every row, ``halo``: the halo rows; ``1.5d``: the stage
chunk's rows, each row's softmax reduced along the process row), SUMMA grids (``2d``,
``3d``: the stage loop scores the row block's edges, the heads split along the process
row, the softmax reduced along the fiber; :mod:`hpcgnn.spmm.summa_attention`), and
HongTu's offload (a chunk holds whole rows: the edge computation runs inside the chunk
sweep).
"""

from hpcgnn.kinds.base import LayerKind

GAT = LayerKind(
    name="gat",
    title="GAT (ELU(||_k sum_j alpha_ij z_j), alpha = softmax_j LeakyReLU(a . [z_i, z_j]))",
    self_weight=False,
    mean=False,
    self_loops=True,
    modes=frozenset({"1d", "1.5d", "2d", "3d", "halo", "offload", "minibatch", "gist"}),
    attention=True,
)
