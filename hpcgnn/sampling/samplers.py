"""The samplers of ``--sampler``, as objects, and their registry (no torch).

A sampler says how a hop is drawn (node-wise fan-outs or layer-wise sizes), which matrix
``S`` it draws from (:mod:`hpcgnn.sampling.rows`) and which layer kind its samples train.
Nothing else compares a sampler's name: the code asks these attributes.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcgnn.errors import ConfigError
from hpcgnn.kinds import GAT, GCN, GIN, KINDS, SAGE, Layer, layer_kind
from hpcgnn.rng import TAG_CLUSTER, TAG_LADIES, TAG_SAGE


@dataclass(frozen=True)
class Sampler:
    """One ``--sampler``.

    Attributes
    ----------
    name
        The ``--sampler`` choice (the metrics' ``sampling.sampler``).
    kind
        The layer kind its samples train by default (and what ``S`` is drawn for).
    others
        The other kinds its samples can train (``--model``): a node-wise or a LADIES block
        serves any layer that reads a vertex's sampled in-neighbours and itself (GIN's sum,
        GAT's attention over the block's pattern; LADIES keeps every row's own vertex among
        the next layer's, so its block holds the self loop), and so does Cluster-GCN's
        induced subgraph (its rows are its columns).
    node_wise
        Per-vertex fan-outs (``--fanout``, GraphSAGE) rather than per-layer vertex sets
        drawn by importance (``--layer-size``, LADIES).
    row_normalised
        ``S``'s values are ``1 / |row|`` (LADIES' probabilities), not ones.
    tag
        The random stream's purpose tag of its draws (:mod:`hpcgnn.rng`).
    induced
        A batch is a set of whole clusters and every layer reads the subgraph they induce
        (Cluster-GCN, :mod:`hpcgnn.sampling.clusters`): nothing is drawn per hop.
    """

    name: str
    kind: Layer
    node_wise: bool
    row_normalised: bool
    tag: int
    others: frozenset[str] = frozenset()
    induced: bool = False

    @property
    def layer_wise(self) -> bool:
        """Each hop draws from ``P = Q (S .* S)``, one row per batch (LADIES).

        Its 1.5D SpGEMM's partial products carry computed values, unlike node-wise
        sampling's (rows of ``S``) and the induced subgraphs' (no product).
        """
        return not self.node_wise and not self.induced

    @property
    def self_loops(self) -> bool:
        """``S`` has ``A^T + I``'s pattern: the sampled layers are the kind's operator's."""
        return self.kind.self_loops

    def __str__(self) -> str:
        return self.name


#: GraphSAGE's node-wise sampler, named after the layers it trains: ``S = A^T``.
NODE_WISE = Sampler(
    name=SAGE.name, kind=SAGE, node_wise=True, row_normalised=False, tag=TAG_SAGE,
    others=frozenset({GIN.name, GAT.name}),
)
#: LADIES' layer-wise importance sampler of GCN layers: ``S = D^-1 (A^T + I)``.
LAYER_WISE = Sampler(
    name="ladies", kind=GCN, node_wise=False, row_normalised=True, tag=TAG_LADIES,
    others=frozenset({GIN.name, GAT.name}),
)

#: Cluster-GCN's batches: METIS clusters of the training graph, each batch the subgraph
#: ``q`` of them induce, read through ``D^-1 (A^T + I)`` renormalised on it (GCN layers).
CLUSTER = Sampler(
    name="cluster", kind=GCN, node_wise=False, row_normalised=True, tag=TAG_CLUSTER,
    others=frozenset({GIN.name, GAT.name}), induced=True,
)

#: Every sampler by name (the ``--sampler`` choices; the first is the default).
SAMPLERS: dict[str, Sampler] = {s.name: s for s in (NODE_WISE, LAYER_WISE, CLUSTER)}


def sampler_named(name: str) -> Sampler:
    """The sampler called ``name`` (one line for an unknown one)."""
    sampler = SAMPLERS.get(name)
    if sampler is None:
        raise ConfigError(f"unknown sampler '{name}' (choose from {', '.join(SAMPLERS)})")
    return sampler


def resolve_model(model: str | None, sampler: str) -> str:
    """The layer kind a minibatch run trains: ``model``, else the sampler's own.

    ``model`` (``--model`` if given) must be a kind the sampler's samples train
    (:attr:`Sampler.kind` or :attr:`Sampler.others`); another is refused in one line.
    """
    method = sampler_named(sampler)
    implied = method.kind.name
    if model is not None and model not in KINDS:  # a layer of one's own (MODULE:CLASS)
        raise ConfigError(f"--model {model} is not available with --mode minibatch: sampled"
                          f" blocks train the built-in layers ({', '.join(KINDS)}) so far")
    if model is None or layer_kind(model).name == implied:
        return implied
    if model in method.others:
        return model
    others = [s.name for s in SAMPLERS.values() if model in (s.kind.name, *s.others)]
    hint = f"; use --sampler {others[0]} for {model}" if others else ""
    trains = ", ".join([implied, *sorted(method.others)])
    raise ConfigError(
        f"--model {model} does not exist with --sampler {sampler} (it trains {trains}"
        f" layers){hint}"
    )
