"""``--mode minibatch``: matrix-based bulk sampling and sampled training on a (P/c) x c grid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import torch

from hpcgnn.config import GRID_KIND, TrainConfig, check_types
from hpcgnn.errors import ConfigError, HpcgnnError
from hpcgnn.io.reader import GraphMeta
from hpcgnn.layout.shapes import GridShape, choose_shape
from hpcgnn.sampling.memory import minibatch_memory
from hpcgnn.sampling.samplers import NODE_WISE, resolve_model
from hpcgnn.sampling.spec import (
    LADIES_REDUCTIONS,
    LAYOUTS,
    SamplerSpec,
    capped_note,
    check_ladies_reduction,
    make_spec,
    parse_sizes,
)
from hpcgnn.training.minibatch import MinibatchTrainer
from hpcgnn.training.modes.base import Estimate, Mode, Setup
from hpcgnn.utils.memory import parse_bytes


@dataclass(frozen=True, kw_only=True)
class MinibatchMode(Mode[MinibatchTrainer]):
    """Bulk-sampled minibatches of ``sampler`` on a 1.5D grid of the graph's ``graph_layout``.

    ``MinibatchMode(sampler="sage", fanout=[10, 5], batch_size=512)``; the sampling options
    are checked when the mode is made (:func:`~hpcgnn.sampling.spec.make_spec`, as the
    command checks its flags) and sized for the run by :meth:`for_run` (the run's seed,
    layers and ranks: :attr:`spec`).

    Attributes
    ----------
    sampler
        ``sage`` (node-wise), ``ladies`` (layer-wise) or ``cluster`` (Cluster-GCN).
    fanout
        ``sage``: sampled in-neighbours per vertex, one per layer, the seeds' hop first
        (``[15, 10, 5]``, or the flag's text ``"15,10,5"``; default: 10 per layer).
    layer_size
        ``ladies``: vertices sampled per batch and layer, one value or one per layer
        (default: 512 for each of 2 layers).
    batch_size, global_batch
        Seeds per minibatch on each rank (default 1024), or instead seeds per optimizer
        step over all ranks.
    bulk
        Minibatches sampled at once (default: 16).
    clusters, clusters_per_batch
        ``cluster``: METIS clusters of the training graph and clusters per minibatch.
    graph_layout
        ``replicated`` or ``partitioned`` (sparsity-aware 1.5D SpGEMM).
    grid, replication
        ``--grid`` and ``--replication`` of the ``(P/c) x c`` grid.
    sample_memory
        Bytes a hop's local SpGEMM may take (a number, or text such as ``"2G"``; ``None``:
        the sampler's default budget); held in bytes.
    ladies_reduction
        LADIES' last step in the partitioned layout: ``rows`` (default: the fetched rows of
        ``S`` all-gathered over the process row, serving ``P`` and the extraction) or
        ``partial-products`` (the paper's: ``P``'s partial products reduced over the
        process row, then the row extraction as a second 1.5D SpGEMM); the same samples.
    """

    name: ClassVar[str] = "minibatch"
    #: Multi-label targets: the seeds' 0/1 label rows, fetched with their features.
    multi_label: ClassVar[bool] = True

    sampler: str = NODE_WISE.name
    fanout: Sequence[int] | str | None = None
    layer_size: Sequence[int] | str | None = None
    batch_size: int | None = None
    global_batch: int | None = None
    bulk: int | None = None
    clusters: int | None = None
    clusters_per_batch: int | None = None
    graph_layout: str = LAYOUTS[0]
    grid: str | tuple[int, ...] | None = None
    replication: int | None = None
    sample_memory: float | str | None = None
    ladies_reduction: str = LADIES_REDUCTIONS[0]
    #: The samples of the run (:meth:`for_run`, :attr:`spec`); ``None`` until then.
    _run_spec: SamplerSpec | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_types(self)
        for name, flag in (("fanout", "--fanout"), ("layer_size", "--layer-size")):
            value = getattr(self, name)
            if value is not None:  # held as a tuple of ints, checked
                object.__setattr__(self, name, parse_sizes(flag, value))
        if self.sample_memory is not None:
            object.__setattr__(self, "sample_memory",
                               parse_bytes(str(self.sample_memory), "--sample-memory"))
        if self.graph_layout not in LAYOUTS:
            raise ConfigError(f"--graph-layout must be one of {', '.join(LAYOUTS)},"
                              f" got {self.graph_layout}")
        check_ladies_reduction(self.ladies_reduction, self.sampler, self.graph_layout)
        self._spec(None, 0, 1)  # the checks that need no run (the sampler's own)

    def _spec(self, layers: int | None, seed: int, ranks: int) -> SamplerSpec:
        """The samples of a run of ``layers`` (``None``: the sizes'), ``seed``, ``ranks``."""
        return make_spec(
            self.sampler, fanout=self.fanout, layer_size=self.layer_size, layers=layers,
            batch_size=self.batch_size, bulk=self.bulk, seed=seed,
            global_batch=self.global_batch, ranks=ranks, clusters=self.clusters,
            clusters_per_batch=self.clusters_per_batch,
        )

    @property
    def sample_bytes(self) -> float | None:
        """``sample_memory`` in bytes (``None``: the sampler's default budget)."""
        return None if self.sample_memory is None else float(self.sample_memory)

    @property
    def spec(self) -> SamplerSpec:
        """The samples of the run: the sampler, its sizes, the batch and the bulk.

        Raises
        ------
        HpcgnnError
            Before :meth:`for_run` (a run's seed, layers and ranks size them).
        """
        if self._run_spec is None:
            raise HpcgnnError("MinibatchMode.spec: the samples are sized for a run (for_run)")
        return self._run_spec

    def depth(self, layers: int | None) -> int:
        """``layers``, else as many as the sampler's sizes (checked against them)."""
        return self._spec(layers, 0, 1).layers

    @property
    def default_model(self) -> str:
        """The sampler's own layer (``sage`` samples for sage, the others for gcn)."""
        return resolve_model(None, self.sampler)

    def for_run(self, cfg: TrainConfig, ranks: int) -> MinibatchMode:
        """The mode with its samples (:attr:`spec`) for ``cfg``'s layers and seed on ``ranks``.

        ``ranks``: the ranks that share a step (a GIST group's, with ``--global-batch``).
        """
        bound = replace(self)
        object.__setattr__(bound, "_run_spec", self._spec(cfg.layers, cfg.seed, ranks))
        return bound

    def resolve(self, cfg: TrainConfig, ranks: int) -> TrainConfig:
        """The layers: the sampler's number of hops, and its own layer if none is named.

        The layer is checked against the sampler's blocks once the widths are known (the
        trainer's :meth:`~hpcgnn.sampling.samplers.Sampler.check`).
        """
        model = resolve_model(cfg.model, self.spec.sampler)
        return super().resolve(replace(cfg, layers=self.spec.layers, model=model), ranks)

    @property
    def group_algo(self) -> str:
        """What a GIST group of this mode runs (``config.group_algo``)."""
        return self.name

    def grid_shape(self, ranks: int) -> GridShape:
        """A ``(P/c) x c`` grid: ``--grid`` / ``--replication``, else chosen."""
        return choose_shape(GRID_KIND[self.name], ranks, self.grid, self.replication)

    def memory(self, cfg: TrainConfig, meta: GraphMeta, shape: GridShape) -> Estimate:
        """A rank's graph share, samples, batch and evaluation by part (``hpcgnn model``'s).

        :func:`~hpcgnn.sampling.memory.minibatch_memory` of the run's samples (:attr:`spec`).
        """
        q, c = shape.dims
        parts = minibatch_memory(meta, cfg, self.spec, (q, c), self.graph_layout,
                                 self.sample_bytes)
        return Estimate(shape, str(cfg.hidden), float(sum(parts.values())), parts)

    def build(self, setup: Setup, weights: list[torch.Tensor] | None = None) -> MinibatchTrainer:
        """The minibatch trainer (``weights``: GIST's injected sub-model)."""
        return MinibatchTrainer(
            setup.graph, self.spec, self.graph_layout, setup.cfg, setup.grid, weights,
            sample_memory=self.sample_bytes, ladies_reduction=self.ladies_reduction,
        )

    def group_description(self, trainer: MinibatchTrainer) -> str:
        """The sampler, its sizes, the batches and the graph's layout."""
        spec, used, b = self.spec, trainer.spec, trainer.batching()
        if used.method.induced:
            empty = "" if spec.clusters in (None, used.clusters) else (
                f" ({spec.clusters} asked, the others left empty by METIS)"
            )
            what = (
                f"minibatch cluster {used.clusters} METIS clusters{empty} of the training graph,"
                f" {b['clusters_per_batch']}{capped_note(spec, used)} per batch on each rank,"
                f" {b['clusters_per_step']} per step, {used.layers} layers"
            )
        else:
            what = (
                f"minibatch {spec.sampler} {','.join(map(str, spec.sizes))} batch"
                f" {b['batch_size']}{capped_note(spec, used)} per rank, {b['global_batch']}"
                " per step"
            )
        return (
            f"{what}, bulk {b['bulk']}, {b['optimizer_steps_per_epoch']} steps/epoch"
            f" | {self.graph_layout} graph"
        )

    def describe(self, setup: Setup, trainer: MinibatchTrainer) -> str:
        """:meth:`group_description`."""
        return f"{self.group_description(trainer)},"

    def group_config(self) -> dict[str, Any]:
        """The sampling options in the metrics' ``config``."""
        return {**self.spec.as_dict(), "graph_layout": self.graph_layout}

    def config(self, setup: Setup) -> dict[str, Any]:
        """The sampling options and the grid's replication."""
        return {**self.group_config(), "replication": setup.grid.shape.replication}

    def fingerprint(self, setup: Setup) -> dict[str, Any]:
        """The samples, the batches and their optimizer steps."""
        return {"sampling": self.spec.as_dict(), "graph_layout": self.graph_layout}
