"""``--mode minibatch``: matrix-based bulk sampling and sampled training on a (P/c) x c grid."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from hpcgnn.config import GRID_KIND, TrainConfig
from hpcgnn.cost.ranking import minibatch_memory_estimate
from hpcgnn.errors import ConfigError
from hpcgnn.io.reader import GraphMeta
from hpcgnn.layout.shapes import GridShape, choose_shape
from hpcgnn.sampling.samplers import resolve_model
from hpcgnn.sampling.spec import (
    LAYOUTS,
    SamplerSpec,
    capped_note,
    sample_memory,
    spec_from_args,
)
from hpcgnn.training.minibatch import MinibatchTrainer
from hpcgnn.training.modes.base import Estimate, Mode, Setup, refuse_others

#: The flags of the minibatch mode: the sampler's.
FLAGS = (
    "sampler", "fanout", "layer_size", "batch_size", "global_batch", "bulk", "graph_layout",
    "sample_memory", "clusters", "clusters_per_batch",
)


@dataclass(frozen=True)
class MinibatchMode(Mode[MinibatchTrainer]):
    """Bulk-sampled minibatches of ``spec`` on a 1.5D grid of the graph's ``graph_layout``.

    Attributes
    ----------
    spec
        The sampler, its sizes, the batch and the bulk.
    graph_layout
        ``replicated`` or ``partitioned`` (sparsity-aware 1.5D SpGEMM).
    grid, replication
        ``--grid`` and ``--replication`` of the ``(P/c) x c`` grid.
    sample_memory
        ``--sample-memory`` in bytes (``None``: the sampler's default budget).
    """

    name: ClassVar[str] = "minibatch"

    spec: SamplerSpec
    graph_layout: str = LAYOUTS[0]
    #: The layer kind (``--model``, or the sampler's own: :func:`resolve_model`).
    model: str | None = None
    grid: str | None = None
    replication: int | None = None
    sample_memory: float | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, ranks: int) -> MinibatchMode:
        """The sampling flags; a full-batch ``--algo`` is refused."""
        if args.algo is not None:
            raise ConfigError(
                f"--algo {args.algo} names a full-batch algorithm: --mode minibatch samples on a"
                " (P/c) x c grid (--replication, --grid; drop --algo)"
            )
        refuse_others(args, FLAGS)
        return cls.of(args, ranks)

    @classmethod
    def of(cls, args: argparse.Namespace, ranks: int) -> MinibatchMode:
        """The mode of the sampling flags, ``--global-batch`` a step over ``ranks``."""
        spec = spec_from_args(args, ranks)
        return cls(
            spec=spec, graph_layout=args.graph_layout or LAYOUTS[0], grid=args.grid,
            replication=args.replication, model=resolve_model(args.model, spec.sampler),
            sample_memory=sample_memory(args),
        )

    def resolve(self, cfg: TrainConfig, ranks: int) -> TrainConfig:
        """The layers: the sampler's number of hops, and ``--model`` or the sampler's kind."""
        model = resolve_model(self.model, self.spec.sampler)
        cfg = replace(cfg, layers=self.spec.layers, model=model)
        return super().resolve(cfg, ranks)

    @property
    def group_algo(self) -> str:
        """What a GIST group of this mode runs (``config.group_algo``)."""
        return self.name

    @property
    def sampler(self) -> str | None:
        """``--sampler``."""
        return self.spec.sampler

    def grid_shape(self, ranks: int) -> GridShape:
        """A ``(P/c) x c`` grid: ``--grid`` / ``--replication``, else chosen."""
        return choose_shape(GRID_KIND[self.name], ranks, self.grid, self.replication)

    def memory(self, cfg: TrainConfig, meta: GraphMeta, shape: GridShape) -> Estimate:
        """The sampled model's weights, features and batches (not the graph's structure)."""
        est = minibatch_memory_estimate(meta, cfg, shape, cfg.kind.weights_per_layer)
        return Estimate(shape, str(cfg.hidden), est)

    def build(self, setup: Setup, weights: list[torch.Tensor] | None = None) -> MinibatchTrainer:
        """The minibatch trainer (``weights``: GIST's injected sub-model)."""
        return MinibatchTrainer(
            setup.graph, self.spec, self.graph_layout, setup.cfg, setup.grid, weights,
            sample_memory=self.sample_memory,
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
