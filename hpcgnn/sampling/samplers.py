"""The samplers of ``--sampler``, as objects, and their registry (no torch).

A sampler says how a hop is drawn (node-wise fan-outs or layer-wise sizes), which matrix
``S`` it draws from (:mod:`hpcgnn.sampling.rows`), which operators its blocks provide to a
layer's ``g.aggregate`` and which layer it trains by default. Nothing else compares a
sampler's name: the code asks these attributes; nothing here names a layer but the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hpcgnn.errors import ConfigError
from hpcgnn.kinds import GCN, SAGE, Layer
from hpcgnn.layout.trace import Shape, Tracer, WeightShape, one_hop
from hpcgnn.rng import TAG_CLUSTER, TAG_LADIES, TAG_SAGE


@dataclass(frozen=True)
class Sampler:
    """One ``--sampler``.

    Attributes
    ----------
    name
        The ``--sampler`` choice (the metrics' ``sampling.sampler``).
    kind
        The layer it trains by default (and whose operator ``S`` is drawn for).
    operators
        The operators (:class:`~hpcgnn.kinds.Operator` names) its blocks provide: its own
        (node-wise: ``"mean"``, a sampled row's mean; LADIES: ``"normalized"``, its
        rescaled estimate of ``D^-1 (A^T + I)``; Cluster-GCN: ``"normalized"``, ``D^-1
        (A^T + I)`` renormalised on the batch's subgraph), and ``"sum"`` (every sampled
        edge 1, a row's own vertex ``s``) and ``"pattern"`` (their ones: the attention's
        edges) over a row's sampled in-neighbours and itself. Node-wise and Cluster-GCN
        also ``"weighted"``, the graph file's weights of a row's sampled in-edges
        (:class:`~hpcgnn.sampling.rows.EdgeWeights`, in the replicated graph layout), and
        Cluster-GCN ``"mean"``, ``D_b^-1 A_b^T``: the mean over a row's in-neighbours
        inside the batch (its rows without ``S``'s ``+ I``; an empty mean is 0).
    transform_first
        A dense layer input is multiplied as ``S (H W)`` (LADIES, Cluster-GCN: a row of
        ``S`` may hold as many entries as the block has columns, so the narrower SpMM
        pays) rather than ``(S H) W`` (node-wise: a row holds its fan-out's entries, the
        product runs on the fewer output rows). Sparse input features: ``S (X W)``.
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
    operators: tuple[str, ...]
    transform_first: bool
    induced: bool = False

    def check(self, kind: Layer, widths: Sequence[int]) -> None:
        """Refuse, in one line, a layer of ``widths`` the sampler's blocks cannot run.

        Its forward (traced, :func:`~hpcgnn.layout.trace.one_hop`) must read one hop per
        layer: a block's output rows are some of its input rows, so a second aggregation
        in a layer (APPNP's steps) or a value kept from an earlier layer (GCNII's ``H_0``)
        has rows the block does not give. Its operator must be one of :attr:`operators`.
        """
        head = f"--model {kind} does not exist with --sampler {self.name}"
        why_not = one_hop(widths, kind)
        if why_not is not None:
            raise ConfigError(f"{head}: a sampled block's output rows are some of its input"
                              f" rows, and {why_not}")
        op = kind.operator.name
        if op not in self.operators:
            others = [s.name for s in SAMPLERS.values() if op in s.operators]
            hint = f"; use --sampler {others[0]} for {kind}" if others else ""
            provided = ", ".join(self.operators)
            raise ConfigError(f"{head}: it aggregates over the {op} operator and the"
                              f" blocks of --sampler {self.name} provide {provided}{hint}")

    def self_rows(self, kind: Layer, widths: Sequence[int]) -> bool:
        """Whether a layer-wise hop must keep each row's own vertex among its columns.

        A layer reads it through its operator's diagonal (``"sum"``, ``"pattern"``) or
        through ``g.own`` (a self term), found by tracing its forward.
        """
        if not self.layer_wise:
            return False  # the rows lead the columns
        if kind.operator.name in ("sum", "pattern"):
            return True
        last = len(widths) - 2
        state: dict[str, Any] = {}
        for layer, (f_in, f_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
            probe = _OwnProbe(kind, layer, layer == last, state)
            kind.forward(probe, Shape(f_in, layer > 0),
                         [WeightShape(w.shape) for w in kind.weights(f_in, f_out, layer,
                                                                     layer == last)])
            if probe.owns:
                return True
        return False

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


#: The operators every sampler's blocks provide besides its own: GIN's sum and GAT's pattern.
SUMMED = ("sum", "pattern")

#: GraphSAGE's node-wise sampler, named after the layers it trains: ``S = A^T``.
NODE_WISE = Sampler(
    name=SAGE.name, kind=SAGE, node_wise=True, row_normalised=False, tag=TAG_SAGE,
    operators=("mean", *SUMMED, "weighted"), transform_first=False,
)
#: LADIES' layer-wise importance sampler of GCN layers: ``S = D^-1 (A^T + I)``.
LAYER_WISE = Sampler(
    name="ladies", kind=GCN, node_wise=False, row_normalised=True, tag=TAG_LADIES,
    operators=("normalized", *SUMMED), transform_first=True,
)

#: Cluster-GCN's batches: METIS clusters of the training graph, each batch the subgraph
#: ``q`` of them induce, read through ``D^-1 (A^T + I)`` renormalised on it (GCN layers),
#: or through its mean ``D_b^-1 A_b^T`` (GraphSAGE: GIST's Reddit and Amazon2M runs) or
#: its weights ``A_{w,b}^T``: the induced rows without their ``+ I``.
CLUSTER = Sampler(
    name="cluster", kind=GCN, node_wise=False, row_normalised=True, tag=TAG_CLUSTER,
    operators=("normalized", "mean", *SUMMED, "weighted"), transform_first=True,
    induced=True,
)

#: Every sampler by name (the ``--sampler`` choices; the first is the default).
SAMPLERS: dict[str, Sampler] = {s.name: s for s in (NODE_WISE, LAYER_WISE, CLUSTER)}


class _OwnProbe(Tracer):
    """A trace that notes whether a layer's forward reads its output rows' own rows."""

    owns = False

    def own(self, h: Shape) -> Shape:
        """As the trace's, noted."""
        self.owns = True
        return super().own(h)


def sampler_named(name: str) -> Sampler:
    """The sampler called ``name`` (one line for an unknown one)."""
    sampler = SAMPLERS.get(name)
    if sampler is None:
        raise ConfigError(f"unknown sampler '{name}' (choose from {', '.join(SAMPLERS)})")
    return sampler


def resolve_model(model: str | None, sampler: str) -> str:
    """The layer a minibatch run trains: ``model``, else the sampler's own (:attr:`Sampler.kind`).

    Whether the sampler's blocks run it is :meth:`Sampler.check`'s question.
    """
    return sampler_named(sampler).kind.name if model is None else model
