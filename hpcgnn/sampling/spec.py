"""Sampling parameters and their validation (the flags shared by ``train`` and ``sample``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from hpcgnn.config import (
    DEFAULT_LAYERS,
    MAX_LAYERS,
    check_layers,
    check_random_key,
    check_training_vertices,
)
from hpcgnn.errors import ConfigError
from hpcgnn.sampling.samplers import CLUSTER, LAYER_WISE, NODE_WISE, Sampler, sampler_named

LAYOUTS = ("replicated", "partitioned")
#: ``--ladies-reduction``: LADIES' last step in the partitioned layout, ours (``rows``: the
#: fetched rows all-gathered over the process row) or the paper's (``partial-products``).
LADIES_REDUCTIONS = ("rows", "partial-products")


def check_ladies_reduction(reduction: str, sampler: str, layout: str) -> None:
    """Refuse an unknown ``--ladies-reduction``, or the paper's where nothing is reduced.

    Raises
    ------
    ConfigError
        ``reduction`` is not one of :data:`LADIES_REDUCTIONS`, or is ``partial-products``
        with another sampler than ``ladies`` or the replicated layout.
    """
    if reduction not in LADIES_REDUCTIONS:
        raise ConfigError(f"--ladies-reduction must be one of {', '.join(LADIES_REDUCTIONS)},"
                          f" got {reduction}")
    if reduction != LADIES_REDUCTIONS[0] and (sampler != LAYER_WISE.name
                                             or layout != "partitioned"):
        raise ConfigError(
            f"--ladies-reduction {reduction} applies to --sampler ladies --graph-layout"
            " partitioned only (the other samplers and layouts have no partial products to"
            " reduce)"
        )
DEFAULT_FANOUT = 10
DEFAULT_LAYER_SIZE = 512
DEFAULT_BATCH_SIZE = 1024
DEFAULT_BULK = 16
#: Cluster-GCN's defaults: clusters of about this many training vertices (Cluster-GCN's
#: Reddit runs: 1,500 clusters of its 153K training vertices), and clusters per batch (a
#: batch of about 1,000 training vertices, as the other samplers' default batch).
DEFAULT_CLUSTER_SIZE = 100
DEFAULT_CLUSTERS_PER_BATCH = 10
#: The largest ``--fanout``, ``--layer-size`` and ``--bulk`` entry (``2^31 - 1``). Larger
#: values could mean nothing more: a fanout above a vertex's in-degree samples all its
#: in-neighbours, a layer size above the candidates takes them all, and a bulk above the
#: epoch's minibatches samples them all at once.
MAX_SIZE = 2**31 - 1


@dataclass(frozen=True)
class SamplerSpec:
    """What to sample.

    Attributes
    ----------
    sampler
        The ``--sampler`` name (:data:`~hpcgnn.sampling.samplers.SAMPLERS`: node-wise
        ``sage``, layer-wise ``ladies`` or Cluster-GCN's ``cluster``); :attr:`method` is
        the sampler itself.
    sizes
        Per hop, hop 0 (the seeds' neighbours) first: the fanout (``sage``) or the number
        of vertices sampled per batch (``ladies``); ``0`` for ``cluster`` (every in-neighbour
        inside the batch). ``len(sizes)`` is the model depth.
    batch_size
        Seed (training) vertices per minibatch (``0`` for ``cluster``: its batches are
        whole clusters). One optimizer step trains one minibatch per rank that has one left
        in the bulk (see :func:`optimizer_steps`).
    bulk
        Minibatches sampled together (one stacked SpGEMM per hop); a bulk's batches are
        shared out over the ranks, so it also groups the batches into optimizer steps.
    seed
        Seed of every random number (shuffle, samples, dropout).
    clusters, clusters_per_batch
        ``cluster`` only: METIS clusters of the training graph (``None``: about
        :data:`DEFAULT_CLUSTER_SIZE` training vertices each, set by
        :func:`fit_training_set`) and clusters per minibatch.
    self_rows
        ``ladies`` only: each hop's next vertex set keeps the hop's own rows, not only the
        seeds (LADIES' rule), so every row's own vertex is an input row of its layer: the
        self term of GIN's sum and GAT's attention (set by the trainer for those kinds).

    """

    sampler: str
    sizes: tuple[int, ...]
    batch_size: int
    bulk: int
    seed: int = 0
    clusters: int | None = None
    clusters_per_batch: int | None = None
    self_rows: bool = False

    @property
    def layers(self) -> int:
        """Number of hops (= GNN layers)."""
        return len(self.sizes)

    @property
    def method(self) -> Sampler:
        """The sampler :attr:`sampler` names."""
        return sampler_named(self.sampler)

    def num_batches(self, num_train: int) -> int:
        """Minibatches of an epoch over ``num_train`` training vertices."""
        if self.method.induced:
            assert self.clusters is not None and self.clusters_per_batch is not None
            return -(-self.clusters // self.clusters_per_batch)
        return -(-num_train // self.batch_size)

    def as_dict(self) -> dict:
        """Plain-dict form for metrics and file attributes (a sampler's own fields)."""
        d = asdict(self)
        d["sizes"] = list(self.sizes)
        if not self.method.induced:
            del d["clusters"], d["clusters_per_batch"]
        return d


def parse_sizes(flag: str, text: str | Sequence[int]) -> tuple[int, ...]:
    """``--fanout`` or ``--layer-size``: ``"10,5"`` or ``[10, 5]`` -> ``(10, 5)``, checked.

    Each entry lies in ``[1, MAX_SIZE]``, at most :data:`~hpcgnn.config.MAX_LAYERS` of them;
    anything else is one :class:`ConfigError` naming ``flag``.
    """
    if isinstance(text, str):
        try:
            values = tuple(int(t) for t in text.split(","))
        except ValueError:
            raise ConfigError(
                f"{flag} must be a comma-separated list of integers, got '{text}'"
            ) from None
    else:
        values = tuple(text)
        if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
            raise ConfigError(f"{flag} must be a list of integers, got {list(values)}")
        text = ",".join(map(str, values))
    if not values or any(not 1 <= v <= MAX_SIZE for v in values):
        raise ConfigError(f"{flag} entries must be in [1, {MAX_SIZE}], got '{text}'")
    if len(values) > MAX_LAYERS:
        raise ConfigError(f"{flag} has {len(values)} entries, one per layer; at most {MAX_LAYERS}")
    return values


def batch_and_bulk(
    batch_size: int | None, global_batch: int | None, bulk: int | None, ranks: int
) -> tuple[int, int]:
    """The per-rank minibatch size and the bulk from ``--batch-size`` / ``--global-batch``.

    ``--batch-size B`` is per rank (default 1024): a step trains up to ``P`` minibatches of
    ``B``. ``--global-batch G`` is the seeds of one optimizer step over all ``ranks``: each
    rank trains minibatches of ``G / P`` seeds, and the bulk (default: the multiple of
    ``P`` from 16 up) must be a multiple of ``P`` so that every step takes one minibatch
    per rank (the epoch's last step may take fewer).
    """
    if bulk is not None and not 1 <= bulk <= MAX_SIZE:
        raise ConfigError(
            f"--bulk must be in [1, {MAX_SIZE}] (minibatches sampled at once), got {bulk}"
        )
    if global_batch is None:
        batch_size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
        if not 1 <= batch_size <= MAX_SIZE:
            raise ConfigError(f"--batch-size must be in [1, {MAX_SIZE}], got {batch_size}")
        return batch_size, DEFAULT_BULK if bulk is None else bulk
    if batch_size is not None:
        raise ConfigError(
            "give --batch-size (seeds per minibatch on each rank) or --global-batch (seeds per "
            "optimizer step over all ranks), not both"
        )
    if not ranks <= global_batch <= MAX_SIZE or global_batch % ranks:
        raise ConfigError(
            f"--global-batch must be a multiple of the {ranks} ranks in [{ranks}, {MAX_SIZE}]"
            f" (each rank trains G/{ranks} seeds per step), got {global_batch}"
        )
    if bulk is None:
        bulk = ranks * -(-DEFAULT_BULK // ranks)
    elif bulk % ranks:
        raise ConfigError(
            f"--bulk {bulk} is not a multiple of the {ranks} ranks: with --global-batch every "
            "optimizer step takes one minibatch per rank"
        )
    return global_batch // ranks, bulk


def optimizer_steps(num_batches: int, bulk: int, ranks: int) -> int:
    """Optimizer steps of an epoch of ``num_batches`` minibatches.

    Each bulk of ``k`` batches is shared out over the ``ranks`` in contiguous near-equal
    parts; step ``t`` of the bulk trains the ``t``-th batch of every rank that has one, so
    the bulk takes ``ceil(k / ranks)`` steps.
    """
    full, rest = divmod(num_batches, bulk)
    return full * -(-bulk // ranks) + -(-rest // ranks)


def make_spec(
    sampler: str, *, fanout: str | Sequence[int] | None, layer_size: str | Sequence[int] | None,
    layers: int | None, batch_size: int | None, bulk: int | None, seed: int,
    global_batch: int | None = None,
    ranks: int = 1, clusters: int | None = None, clusters_per_batch: int | None = None,
) -> SamplerSpec:
    """Validate the sampling flags; every rank raises the same :class:`ConfigError`.

    ``--fanout`` (sage) lists one fanout per layer (text ``"10,5"`` or integers,
    :func:`parse_sizes`) and must have exactly ``--layers``
    entries when ``--layers`` is given (default: ``10`` per layer, 2 layers).
    ``--layer-size`` (ladies) is one value for every layer or one per layer; without
    ``--layers`` the model has as many layers as values (neither given: 512 for each of 2
    layers, as sage's default). Sizes, batch sizes and ``--bulk``
    lie in ``[1, MAX_SIZE]``, ``--seed`` in ``[0, 2^63)``; ``--batch-size`` and
    ``--global-batch`` (over ``ranks``) are resolved by :func:`batch_and_bulk`.
    ``--clusters`` and ``--clusters-per-batch`` belong to ``cluster``
    (:func:`_cluster_spec`).
    """
    method = sampler_named(sampler)
    if layers is not None:
        check_layers(layers)
    if method.induced:
        return _cluster_spec(fanout, layer_size, layers, batch_size, global_batch, bulk, seed,
                             clusters, clusters_per_batch)
    for name, value in (("--clusters", clusters), ("--clusters-per-batch", clusters_per_batch)):
        if value is not None:
            raise ConfigError(f"{name} applies to --sampler {CLUSTER}")
    batch_size, bulk = batch_and_bulk(batch_size, global_batch, bulk, ranks)
    check_random_key(seed)
    if method.node_wise:
        if layer_size is not None:
            raise ConfigError(
                f"--layer-size applies to --sampler {LAYER_WISE}; use --fanout with {NODE_WISE}"
            )
        if fanout is None:
            sizes = (DEFAULT_FANOUT,) * (layers or DEFAULT_LAYERS)
        else:
            sizes = parse_sizes("--fanout", fanout)
            if layers is not None and len(sizes) != layers:
                raise ConfigError(
                    f"--fanout has {len(sizes)} entries but the model has {layers} layers "
                    f"(--layers {layers}); give one fanout per layer"
                )
    else:
        if fanout is not None:
            raise ConfigError(
                f"--fanout applies to --sampler {NODE_WISE}; use --layer-size with {LAYER_WISE}"
            )
        if layer_size is None:  # the default model has 2 layers, as sage's
            sizes = (DEFAULT_LAYER_SIZE,) * (layers or DEFAULT_LAYERS)
        else:
            sizes = parse_sizes("--layer-size", layer_size)
        if layers is not None:
            if len(sizes) == 1:
                sizes = sizes * layers
            elif len(sizes) != layers:
                raise ConfigError(
                    f"--layer-size has {len(sizes)} entries but the model has {layers} layers "
                    f"(--layers {layers}); give one value or one per layer"
                )
    return SamplerSpec(sampler, sizes, batch_size, bulk, seed)


def _cluster_spec(
    fanout: str | Sequence[int] | None, layer_size: str | Sequence[int] | None,
    layers: int | None, batch_size: int | None,
    global_batch: int | None, bulk: int | None, seed: int, clusters: int | None,
    clusters_per_batch: int | None,
) -> SamplerSpec:
    """``--sampler cluster``: ``--clusters``, ``--clusters-per-batch``, ``--layers``, ``--bulk``.

    Nothing is drawn per hop and a batch is whole clusters, so the size and batch flags of
    the other samplers are refused in one line.
    """
    for name, value in (("--fanout", fanout), ("--layer-size", layer_size),
                        ("--batch-size", batch_size), ("--global-batch", global_batch)):
        if value is not None:
            raise ConfigError(
                f"{name} does not apply to --sampler {CLUSTER}: a batch is whole clusters"
                " (--clusters N, --clusters-per-batch q)"
            )
    for name, value in (("--clusters", clusters), ("--clusters-per-batch", clusters_per_batch),
                        ("--bulk", bulk)):
        if value is not None and not 1 <= value <= MAX_SIZE:
            raise ConfigError(f"{name} must be in [1, {MAX_SIZE}], got {value}")
    check_random_key(seed)
    return SamplerSpec(
        CLUSTER.name, (0,) * (layers or DEFAULT_LAYERS), 0,
        DEFAULT_BULK if bulk is None else bulk, seed, clusters,
        DEFAULT_CLUSTERS_PER_BATCH if clusters_per_batch is None else clusters_per_batch,
    )


def fit_training_set(spec: SamplerSpec, num_train: int) -> SamplerSpec:
    """``spec`` for a training set of ``num_train`` vertices (refuses an empty one).

    A batch size larger than the training set is capped at it (one minibatch of every
    training vertex, what the larger size would give): the default 1024 on Cora's 140
    training vertices trains, with a note (:func:`capped_note`). ``cluster``: the default
    number of clusters is one per :data:`DEFAULT_CLUSTER_SIZE` training vertices; more
    clusters than training vertices are refused, and more clusters per batch than clusters
    capped (one batch of every cluster).
    """
    check_training_vertices(num_train)
    if spec.method.induced:
        clusters = spec.clusters
        if clusters is None:
            clusters = max(1, round(num_train / DEFAULT_CLUSTER_SIZE))
        elif clusters > num_train:
            raise ConfigError(
                f"--clusters {clusters} is more than the {num_train} training vertices"
            )
        return with_clusters(spec, clusters)
    return spec if spec.batch_size <= num_train else replace(spec, batch_size=num_train)


def with_clusters(spec: SamplerSpec, clusters: int) -> SamplerSpec:
    """``spec`` with ``clusters`` clusters, its clusters per batch capped at them."""
    return replace(spec, clusters=clusters,
                   clusters_per_batch=min(int(spec.clusters_per_batch or 1), clusters))


def capped_note(asked: SamplerSpec, used: SamplerSpec) -> str:
    """`` (--batch-size B capped at the N training vertices)`` when ``used`` capped ``asked``."""
    if asked.method.induced:
        if used.clusters_per_batch == asked.clusters_per_batch:
            return ""
        return (f" (--clusters-per-batch {asked.clusters_per_batch} capped at the"
                f" {used.clusters} clusters)")
    if used.batch_size >= asked.batch_size:
        return ""
    return (f" (--batch-size {asked.batch_size} capped at the {used.batch_size} training"
            " vertices)")
