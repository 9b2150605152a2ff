"""GAT (Veličković et al.): attention over each vertex's in-edges and itself, ``K`` heads.

Per layer ``z = H W`` split into ``K`` heads, scores ``e_ij = LeakyReLU(a_dst . z_i +
a_src . z_j)`` over the pattern of ``A^T + I``, a softmax over each row, ``h'_i =
ELU(||_k sum_j alpha_ij z_j)`` (the mean of the heads, no activation, on the last layer);
as PyG's ``GATConv`` without bias. The operator is a pattern only: its values are unused
(:func:`hpcgnn.graph.normalize.operator_block` gives the ones of ``A^T + I``). The
attention is the layouts' primitive (:mod:`hpcgnn.nn.gat`); it needs each row's whole
neighbourhood on the rank that owns the row or a reduction along the ranks that split its
sources: the block-row layouts with a gather of rows (``1d``: every row, ``halo``: the halo
rows; ``1.5d``: the stage chunk's rows, each row's softmax reduced along the process row),
SUMMA grids (``2d``, ``3d``: the stage loop scores the row block's edges, the heads split
along the process row, the softmax reduced along the fiber;
:mod:`hpcgnn.spmm.summa_attention`), and HongTu's offload (a chunk holds whole rows: the
edge computation runs inside the chunk sweep).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpcgnn.kinds.base import PATTERN, Layer, Primitives, Weight


class GATLayer(Layer):
    """``ELU(||_k sum_j alpha_ij z_j)`` with ``K`` heads (the mean of ``K'`` on the last).

    Per layer ``W`` (``f_in x K f'``, from the seed's stream) and the score vectors
    ``a_src, a_dst`` (``K x f'``, from ``seed + 1``'s); a hidden layer's ``f'`` is
    ``f_out / K``, the last layer's ``f_out``.
    """

    name = "gat"
    title = "GAT (ELU(||_k sum_j alpha_ij z_j), alpha = softmax_j LeakyReLU(a . [z_i, z_j]))"
    operator = PATTERN
    flags = frozenset({"heads", "output_heads", "attention_dropout"})
    attention = True

    def __init__(self, heads: int = 1, output_heads: int = 1) -> None:
        self.heads, self.output_heads = heads, output_heads

    def configured(self, **settings: Any) -> GATLayer:
        """With ``--heads`` and ``--output-heads``."""
        return GATLayer(settings.get("heads", self.heads),
                        settings.get("output_heads", self.output_heads))

    def width_groups(self, width: int) -> int:
        """The hidden layers' heads: GIST's sub-networks own whole heads."""
        return self.heads

    def weights(self, f_in: int, f_out: int, layer: int, last: bool) -> list[Weight]:
        """``W`` (stream 0), then ``a_src, a_dst`` (stream 1)."""
        heads = self.layer_heads(last)
        per_head = f_out if last else f_out // heads
        return [Weight((f_in, heads * per_head)), Weight((heads, per_head), stream=1),
                Weight((heads, per_head), stream=1)]

    def forward(self, g: Primitives, h: Any, w: Sequence[Any]) -> Any:
        """The attention primitive on ``W, a_src, a_dst`` (a bias inside, where the run has one)."""
        return g.attention(h, w[0], w[1], w[2])


GAT = GATLayer()
