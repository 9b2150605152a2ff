"""What a layer kind is: the facts about a GNN layer that every mode and model reads.

A kind is data, not code: the layer computation itself is :func:`hpcgnn.nn.gcn.propagate`
(``Â^T H W`` plus an optional self term ``H W_self``) on the operator the kind names. The
kinds are defined one per module beside this one and registered in
:mod:`hpcgnn.kinds`; nothing else compares a layer's name.
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
    self_loops
        The operator has ``A + I``'s pattern (every diagonal entry), else ``A``'s.
    modes
        The run labels (``--algo`` of full-batch, or the mode) that train this kind.

    """

    name: str
    title: str
    self_weight: bool
    mean: bool
    self_loops: bool
    modes: frozenset[str]

    @property
    def weights_per_layer(self) -> int:
        """Weight matrices per layer: ``W`` alone, or ``W_self, W_neigh``."""
        return 2 if self.self_weight else 1

    def __str__(self) -> str:
        return self.name
