"""What a layer kind is: the facts about a GNN layer that every mode and model reads.

A kind is data, not code: the layer computation itself is :func:`hpcgnn.nn.gcn.propagate`
(``Â^T H W`` plus an optional self term ``H W_self``) on the operator the kind names,
followed for an MLP kind (GIN) by a second dense step. The kinds are defined one per
module beside this one and registered in :mod:`hpcgnn.kinds`; nothing else compares a
layer's name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerKind:
    """One kind of GNN layer (``--model``).

    Attributes
    ----------
    name
        The ``--model`` choice and the metrics' ``config.model``.
    title
        The layer as a formula, for help texts and reports.
    self_weight
        A self term ``H W_self`` with its own weight: two weights per layer,
        ``W_self, W_neigh``, the ``W_self`` from the seed's stream and the ``W_neigh``
        from ``seed + 1``'s (:func:`hpcgnn.nn.init.init_weights`).
    mean
        The neighbour operator is the mean ``D_in^-1 A^T`` (not symmetric, even on an
        undirected graph) instead of GCN's ``D^-1/2 (A + I) D^-1/2``.
    summed
        The operator is the unnormalised sum ``A^T + (1 + eps) I`` (GIN) instead of
        GCN's normalised ``A + I``.
    self_loops
        The operator has ``A + I``'s pattern (every diagonal entry), else ``A``'s.
    modes
        The run labels (``--algo`` of full-batch, or the mode) that train this kind.
    mlp
        The layer is a two-layer MLP on the aggregate (GIN):
        ``act(ReLU(Â^T H W_1) W_2)`` with ``W_1`` of shape ``(f_in, f_out)`` and ``W_2`` of
        ``(f_out, f_out)`` (PyG's ``GIN``: ``MLP([f_in, f_out, f_out])``), ``W_2`` from the
        stream of ``seed + 1``.
    eps
        GIN's ``eps`` (``--gin-eps``): the self term's weight is ``1 + eps``.
    attention
        The layer weighs each in-edge by a learned attention coefficient (GAT): per layer
        ``W`` (``f_in x heads * f'``) and the score vectors ``a_src, a_dst`` (``heads x
        f'``), the operator only the pattern of ``A^T + I`` (:mod:`hpcgnn.nn.gat`).
    heads
        Attention heads of the hidden layers (``--heads``), concatenated: each has
        ``f_out / heads`` units.
    output_heads
        Attention heads of the last layer (``--output-heads``), averaged: each has
        ``f_out`` units.

    """

    name: str
    title: str
    self_weight: bool
    mean: bool
    self_loops: bool
    modes: frozenset[str]
    summed: bool = False
    mlp: bool = False
    eps: float = 0.0
    attention: bool = False
    heads: int = 1
    output_heads: int = 1

    @property
    def weights_per_layer(self) -> int:
        """Weights per layer: ``W``; ``W_self, W_neigh``; ``W_1, W_2``; ``W, a_src, a_dst``."""
        if self.attention:
            return 3
        return 2 if self.self_weight or self.mlp else 1

    def layer_heads(self, last: bool) -> int:
        """Attention heads of a layer (1 for a kind without attention)."""
        if not self.attention:
            return 1
        return self.output_heads if last else self.heads

    @property
    def operands(self) -> int:
        """Row blocks a layer's update reads: the aggregate, and a self term's own rows.

        Also the weights that multiply the layer input itself (the first ``operands`` of a
        layer's weights): ``W``; GraphSAGE's ``W_self, W_neigh``; GIN's ``W_1``.
        """
        return 2 if self.self_weight else 1

    def layer_shapes(self, f_in: int, f_out: int, last: bool = False) -> list[tuple[int, int]]:
        """Shapes of one layer's weights, in the model's order (``last``: the output layer)."""
        if self.attention:
            heads = self.layer_heads(last)
            per_head = f_out if last else f_out // heads
            return [(f_in, heads * per_head), (heads, per_head), (heads, per_head)]
        if self.mlp:
            return [(f_in, f_out), (f_out, f_out)]
        return [(f_in, f_out)] * self.weights_per_layer

    def __str__(self) -> str:
        return self.name
