"""The graph primitives of a sampled block: any layer's forward on one hop of a minibatch.

A sampled model runs :meth:`hpcgnn.kinds.Layer.forward` on :class:`BlockPrimitives`, the
:class:`~hpcgnn.kinds.Primitives` of one hop (:mod:`hpcgnn.models.minibatch` builds its
:class:`Block`): ``g.aggregate(h)`` is the hop's matrix of the layer's operator times
``h`` (its input rows -> its output rows), ``g.own(h)`` the output rows' own rows among
the input rows, ``g.dense`` a local product, ``g.propagate`` the aggregation and the
product in the block's order, ``g.attention`` GAT's attention over the hop's sampled
in-edges and self loops, and ``g.bias(z)`` adds the layer's bias (the sampled models have
one per layer; GAT's attention adds it itself, before its activation). The full-graph
evaluation runs the same forward on a :class:`Block` of the whole graph (output rows =
input rows). Backward by autograd; nothing here names a layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from hpcgnn.kernels.attention import AttentionDrop
from hpcgnn.kernels.gemm import matmul
from hpcgnn.kernels.sparse_input import SparseFeatures, as_dense
from hpcgnn.nn.gat import Neighbourhood, gat_layer

#: A layer input: dense, or the sparse input features.
Input = torch.Tensor | SparseFeatures


@dataclass(frozen=True)
class Block:
    """What a layer reads of one hop (or of the whole graph, in evaluation).

    Attributes
    ----------
    aggregate
        ``H -> S H``: the hop's matrix of the layer's operator (input rows -> output rows).
    own
        The output rows' own rows of a layer input.
    attend
        The attention's source rows of the block's edges and the positions of its output
        rows among the input rows (``None``: the first ones), built when asked for.
    transform_first
        Dense inputs are multiplied as ``S (H W)`` rather than ``(S H) W`` (the sampler's
        choice, :attr:`~hpcgnn.sampling.samplers.Sampler.transform_first`); sparse input
        features always as ``S (X W)``.
    """

    aggregate: Callable[[torch.Tensor], torch.Tensor]
    own: Callable[[Input], Input]
    attend: Callable[[], tuple[Neighbourhood, torch.Tensor | None]]
    transform_first: bool


class BlockPrimitives:
    """The primitives of layer ``layer`` on one :class:`Block`, with the layer's ``bias``.

    ``drop``: the batch's attention dropout (``None``: evaluation, or probability 0);
    ``state``: what the layers keep for the later ones in this forward pass (``g.state``).
    """

    def __init__(self, block: Block, layer: int, last: bool, bias: torch.Tensor,
                 drop: AttentionDrop | None, state: dict[str, Any]) -> None:
        self.block, self.layer, self.last = block, layer, last
        self.b, self.drop, self.state = bias, drop, state

    def aggregate(self, h: Input) -> torch.Tensor:
        """The block's matrix times ``h``: the output rows' aggregates."""
        return self.block.aggregate(as_dense(h))

    def dense(self, h: Input, w: torch.Tensor) -> torch.Tensor:
        """``H W`` (a sparse ``X`` by an SpMM)."""
        return matmul(h, w)

    def own(self, h: Input) -> Input:
        """The output rows' own rows of ``h`` (the seeds lead the input rows node-wise)."""
        return self.block.own(h)

    def propagate(
        self, h: Input, w: torch.Tensor, self_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``S H W`` in the block's order (plus ``H_own W_self``)."""
        if isinstance(h, SparseFeatures) or self.block.transform_first:
            z = self.aggregate(self.dense(h, w))
        else:
            z = self.dense(self.aggregate(h), w)
        return z if self_weight is None else z + self.dense(self.own(h), self_weight)

    def attention(
        self, h: Input, w: torch.Tensor, a_src: torch.Tensor, a_dst: torch.Tensor
    ) -> torch.Tensor:
        """GAT's attention over the block's edges, the layer's bias added before the ELU."""
        nbh, dst = self.block.attend()
        return gat_layer(h, w, a_src, a_dst, self.layer, self.last, nbh, matmul, self.drop,
                         bias=self.b, dst=dst)

    def bias(self, z: torch.Tensor) -> torch.Tensor:
        """``z`` plus the layer's bias (of the layer's output width)."""
        return z + self.b
