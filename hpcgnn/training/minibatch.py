"""Minibatch training with bulk sampling: ``hpcgnn train --mode minibatch``.

Pipeline per epoch (bulk synchronous, every rank in step):

1. **sample** ``K`` batches at once (:class:`~hpcgnn.sampling.bulk.BulkSampler`), each
   rank its contiguous share of the bulk;
2. per training step, **fetch** the input vertices' features (and labels) of the rank's
   next batch by all-to-all(v) in its process column (:mod:`hpcgnn.sampling.fetch`);
3. **propagate**: forward and backward of the model (:mod:`hpcgnn.models.minibatch`) on
   the sampled hops; the weight gradients are summed over all ranks, so the Adam update
   is data-parallel SGD on the union of the step's batches with the loss normalised
   globally: the mean cross-entropy over every seed of the step, whichever rank holds
   it (a short last batch weighs its seeds like the others, not like a whole batch);
   multi-label targets (``--loss bce``): the mean binary cross-entropy with logits over
   every (seed, class) entry of the step, the seeds' ``(B, C)`` 0/1 label rows fetched
   with their features;
4. when the bulk's batches are used up, sample the next bulk.

Evaluation is full-graph with accuracy counts summed over the process column (multi-label:
the per-class counts of :mod:`hpcgnn.training.scores`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from mpi4py import MPI

from hpcgnn.comm.collective import collective
from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.stats import CommStats
from hpcgnn.config import TrainConfig
from hpcgnn.cost.machine import load_machine
from hpcgnn.cost.minibatch import (
    CATEGORIES,
    Members,
    Traffic,
    charge_fetch,
    charge_gradients,
    seconds,
)
from hpcgnn.errors import ConfigError
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.memory import MemoryGraph
from hpcgnn.io.reader import GraphFile
from hpcgnn.kernels.sparse_input import SparseFeatures, dense
from hpcgnn.layout.blocks import owner_of
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.subnets import Subnet, subnet_heads
from hpcgnn.layout.trace import AGGREGATE, ATTENTION, uses
from hpcgnn.models.base import allreduce_gradients
from hpcgnn.models.minibatch import (
    BatchMasks,
    MinibatchModel,
    full_block,
    sampled_shapes,
    sampled_weights,
)
from hpcgnn.models.share import input_features, read_vertex_arrays
from hpcgnn.nn.gcn import cross_entropy_sum, loss_terms, mean_loss
from hpcgnn.nn.optim import make_optimizer
from hpcgnn.nn.sampled import Block
from hpcgnn.sampling.arrays import HOST
from hpcgnn.sampling.bulk import BulkSampler, my_share, read_train_ids
from hpcgnn.sampling.fetch import FeatureFetcher
from hpcgnn.sampling.rows import EdgeWeights, eval_block
from hpcgnn.sampling.sampled import SampledBatch
from hpcgnn.sampling.spec import (
    LADIES_REDUCTIONS,
    SamplerSpec,
    fit_training_set,
    optimizer_steps,
)
from hpcgnn.sampling.spgemm_1p5d import byte_summary, members
from hpcgnn.spmm.block_row import BlockRowAggregation, block_row_neighbourhood
from hpcgnn.training.fullbatch import global_counts
from hpcgnn.training.loop import TrainResult, WholeModel
from hpcgnn.training.predict import writer_rows
from hpcgnn.training.report import max_over_ranks, summed_over_ranks
from hpcgnn.training.submodel import SubModelHost

PHASES = ("sample", "fetch", "propagate")


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    order = np.argsort(ids, kind="stable")
    return order[np.searchsorted(ids, wanted, sorter=order)]


class MinibatchTrainer(WholeModel, SubModelHost):
    """The :class:`~hpcgnn.training.loop.Trainer` of minibatch mode on a ``(P/c) x c`` grid.

    Parameters
    ----------
    graph
        Graph file.
    spec
        Sampler, fan-outs / layer sizes, batch size, bulk.
    layout
        ``"replicated"`` or ``"partitioned"`` graph.
    cfg
        Hyper-parameters.
    grid
        A ``1.5d`` process grid.
    weights
        Parameters to train (default: :func:`~hpcgnn.models.minibatch.sampled_weights`);
        GIST injects a sub-model's.
    sample_memory
        ``--sample-memory``: bytes a hop's local SpGEMM may take (``None``: the default).
    ladies_reduction
        ``--ladies-reduction``: LADIES' last step in the partitioned layout
        (:class:`~hpcgnn.sampling.bulk.BulkSampler`).
    """

    def __init__(
        self, graph: str | MemoryGraph, spec: SamplerSpec, layout: str, cfg: TrainConfig,
        grid: ProcessGrid, weights: list[torch.Tensor] | None = None,
        sample_memory: float | None = None, ladies_reduction: str = LADIES_REDUCTIONS[0],
    ) -> None:
        if isinstance(graph, MemoryGraph):  # RunOptions refuses it first, on every rank
            raise ConfigError("minibatch training samples a graph file, not a graph in memory")
        self.cfg, self.grid, self.layout = cfg, grid, layout
        self.world = grid.world
        self.np_dtype = cfg.numpy_dtype
        kind = cfg.kind
        with collective(grid.world):
            self.train_ids = read_train_ids(graph)
            self.spec = spec = fit_training_set(spec, len(self.train_ids))
            with GraphFile(graph) as gf:
                self.meta = meta = gf.meta
            widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, spec.layers)
            spec.method.check(kind, widths)  # an operator or a forward its blocks lack
            if kind.operator.weighted and layout != "replicated":
                raise ConfigError(
                    f"--model {kind} does not exist with --graph-layout {layout}: the"
                    " weighted operator reads the file's edge weights whole on every rank"
                    " (--graph-layout replicated)"
                )
        if spec.method.self_rows(kind, widths):
            spec = replace(spec, self_rows=True)  # a row's own vertex: the layer reads it
        self.traffic = Traffic(grid.size)
        self.sampler = BulkSampler(spec, grid, graph, layout, self.traffic, sample_memory,
                                   self.train_ids, ladies_reduction)
        self.spec = spec = self.sampler.spec  # Cluster-GCN: the clusters METIS filled
        self.col_members = members(grid.col, grid.rank)
        self.world_members = Members(np.arange(grid.size, dtype=np.int64), grid.rank)
        lo, hi = self.sampler.rows_range
        dev = grid.device
        with collective(grid.world), GraphFile(graph) as gf:
            raw, self.y, self.masks = read_vertex_arrays(
                gf, (lo, hi), self.np_dtype, None, None, dev
            )
        # on the device for the full-graph evaluation (dense or CSR, decided over all
        # ranks); the fetcher serves the batches' dense rows from it on a GPU, else (and
        # sparse rows) from the host arrays read
        self.x = input_features(raw, cfg, grid.world, dev)
        host = sp.csr_matrix(raw) if isinstance(self.x, SparseFeatures) else dense(raw)
        on_gpu = self.x if dev.is_cuda and isinstance(self.x, torch.Tensor) else None
        #: The file's edge weights (the weighted operator's), where sampling runs.
        self.edge_weights: EdgeWeights | None = None
        if kind.operator.weighted:
            with collective(grid.world), GraphFile(graph) as gf:
                self.edge_weights = EdgeWeights.read(gf).on(
                    dev.torch_device if dev.is_cuda else None
                )
        self.fetcher = FeatureFetcher(grid.col, self.sampler.offsets, host, dev.to_host(self.y),
                                      on_gpu)
        self._eval_block: Block | None = None  # built by the first evaluation
        self.widths = widths
        injected = weights
        if weights is None:
            weights = sampled_weights(kind, widths, cfg.seed, self.np_dtype, grid.device)
        self.model = MinibatchModel(kind, widths, weights, spec.method, cfg.attention_p,
                                    self.edge_weights)
        self.weights = weights
        value_bytes = np.dtype(self.np_dtype).itemsize
        #: Bytes of a fetched feature row (dense), or of one value (sparse: the row's
        #: nonzeros are :attr:`FeatureFetcher.lengths`).
        self.feature_row_bytes = value_bytes if self.fetcher.sparse else (
            meta.num_features * value_bytes
        )
        #: The gradients all-reduced per step: the layer's declared weights and the
        #: biases (a GIST group's injected sub-model: its own).
        self.gradient_bytes = value_bytes * (
            sum(int(np.prod(s)) for s in sampled_shapes(kind, widths)) if injected is None
            else sum(w.numel() for w in weights)
        )
        self.first_layer = kind.weight_slices(spec.layers, bias=True)[0].stop  # and its bias
        self.optimizer = make_optimizer(weights, cfg, self.first_layer)
        self.num_train = len(self.train_ids)
        self._num_batches = 1
        #: The GIST sub-network these weights are (its dropout masks are the global
        #: model's at its column ids); ``None``: the weights are the whole model.
        self.subnet: Subnet | None = None
        #: GIST: the stream of steps over epochs (:meth:`train`), at step ``_position``.
        self._stream: Iterator[tuple[torch.Tensor, int]] | None = None
        self._position = 0
        #: GIST: the epoch of the training set the stream is in.
        self.batch_epoch = 0

    @property
    def stats(self) -> CommStats:
        """Counters shared by the grid's communicators and phases."""
        return self.grid.stats

    def batching(self) -> dict[str, int]:
        """Seeds per minibatch (per rank) and per full optimizer step, bulk, epoch's steps.

        Cluster-GCN's batches are clusters: the clusters per minibatch and per full step.
        """
        spec, size = self.spec, self.grid.size
        batches = spec.num_batches(self.num_train)
        per_step = min(size, spec.bulk)
        if spec.method.induced:
            assert spec.clusters is not None and spec.clusters_per_batch is not None
            sizes = {"clusters": spec.clusters, "clusters_per_batch": spec.clusters_per_batch,
                     "clusters_per_step": spec.clusters_per_batch * per_step}
        else:
            sizes = {"batch_size": spec.batch_size, "global_batch": spec.batch_size * per_step}
        return {
            **sizes, "bulk": spec.bulk, "batches_per_epoch": batches,
            "optimizer_steps_per_epoch": optimizer_steps(batches, spec.bulk, size),
        }

    def _step(
        self, epoch: int, batch: SampledBatch | None, in_step: int, step_seeds: int
    ) -> torch.Tensor:
        """Fetch, forward, backward, gradient all-reduce and update; returns the batch loss.

        The loss stays a 0-d tensor on the device (0 without a batch): the epoch reads the
        sum of its steps' once, so the host never waits for a step's loss.

        ``in_step`` batches of ``step_seeds`` seeds in all are trained over the ranks; the
        gradient is that of the mean loss over those seeds (see the module docstring).
        """
        with self.stats.phase("fetch"):
            ids = HOST.to_host(batch.input_ids) if batch is not None else np.zeros(0, np.int64)
            lengths = self.fetcher.lengths
            charge_fetch(self.traffic, self.col_members, owner_of(ids, self.fetcher.offsets),
                         self.feature_row_bytes, None if lengths is None else lengths[ids],
                         label_bytes=self.fetcher.label_bytes)
            x, y = self.fetcher.fetch(ids)
        loss_value = torch.zeros((), dtype=self.cfg.torch_dtype,
                                 device=self.grid.device.torch_device)
        with self.stats.phase("propagate"):
            self.optimizer.zero_grad(set_to_none=False)
            if batch is not None:
                dev, p, net = self.grid.device, self.cfg.dropout, self.subnet
                xt = (
                    x if isinstance(x, torch.Tensor)  # gathered on the GPU
                    else SparseFeatures.from_matrix(x, dev) if sp.issparse(x)
                    else dev.from_numpy(x.astype(self.np_dtype, copy=False))
                )
                keep = BatchMasks(self.cfg.seed, epoch, batch.batch, p, dev,
                                  None if net is None else net.ids,
                                  subnet_heads(net, self.cfg.kind, self.cfg.hidden,
                                               self.cfg.heads))
                logits = self.model.forward_batch(batch, xt, p, keep)
                labels = self.grid.device.from_numpy(y[_positions(ids, batch.seeds)])
                loss = mean_loss(logits, labels)  # multi-label: over (seed, class) entries
                # sum_r share_r * in_step * mean_r / in_step = the mean over the step's
                # seeds (multi-label: entries, C per seed on every rank); the share is
                # exactly 1.0 when the step's batches are equal
                share = len(batch.seeds) * in_step / step_seeds
                (loss * share).backward()
                loss_value = loss.detach()
            charge_gradients(self.traffic, self.world_members, self.gradient_bytes)
            allreduce_gradients(self.world, self.weights, fused=True, divide_by=in_step)
            self.optimizer.step()
        return loss_value

    def steps(self, epoch: int, start: int = 0) -> Iterator[tuple[torch.Tensor, int]]:
        """The optimizer steps of one pass over the training set, run one per ``next``.

        Yields this rank's batch loss (0 without a batch) and the number of batches the
        step trained over all ranks. A bulk is sampled when its first step is asked for.
        ``start``: skip the epoch's first steps (a resumed stream); bulks wholly before it
        are not sampled (samples depend on the batch, not on what was sampled before).
        """
        batches = self.sampler.batches(epoch)
        self._num_batches = len(batches)
        size, done = self.grid.size, 0
        for first in range(0, len(batches), self.spec.bulk):
            bulk = batches[first : first + self.spec.bulk]
            ranges = [my_share(len(bulk), size, r) for r in range(size)]
            shares = [len(r) for r in ranges]
            done, before = done + max(shares), done
            if done <= start:
                continue
            mine = self.sampler.sample(epoch, bulk, first)  # timed as "sample" in there
            for t in range(max(0, start - before), max(shares)):
                trained = [len(bulk[r[t]]) for r in ranges if len(r) > t]
                batch = mine[t] if t < len(mine) else None
                yield self._step(epoch, batch, len(trained), sum(trained)), len(trained)

    def stream(self, start: int = 0) -> Iterator[tuple[torch.Tensor, int]]:
        """The optimizer steps from step ``start`` of an endless stream of epochs.

        Epoch after epoch of the shuffled training set; every epoch has the same number of
        steps, so step ``start`` is step ``start % steps`` of epoch ``start // steps``.
        """
        first, skip = divmod(start, self.batching()["optimizer_steps_per_epoch"])
        for epoch in itertools.count(first):
            self.batch_epoch = epoch
            yield from self.steps(epoch, skip if epoch == first else 0)

    def train(self, k: int) -> float:
        """GIST's ``K`` local iterations: the next ``K`` steps of the stream from ``steps_done``.

        The stream goes on from round to round (and restarts where a resumed run left it);
        returns this rank's batch losses over the batches the steps trained in the group.
        """
        if self._stream is None or self._position != self.steps_done:
            self._stream = self.stream(self.steps_done)
        losses, batches = [], 0
        for _ in range(k):
            value, trained = next(self._stream)
            losses.append(value)
            batches += trained
        self._position = self.steps_done = self.steps_done + k
        return float(torch.stack(losses).double().sum()) / batches  # one read of the device

    def predicted_bytes(self, steps: int, rounds: int) -> dict[str, float]:
        """What the cost model was charged from the samples so far, per round (collective).

        Minibatch traffic depends on the samples, so it is known only as they are drawn:
        the charges of every step this trainer ran (:class:`~hpcgnn.cost.minibatch.Traffic`),
        summed over its ranks, divided by ``rounds``.
        """
        local = np.array([float(self.traffic.received[c].sum()) if c in self.traffic.received
                          else 0.0 for c in CATEGORIES])
        total = self.world.allreduce(local, "control")
        return {c: float(v) / max(1, rounds) for c, v in zip(CATEGORIES, total, strict=True) if v}

    def sampling_section(self) -> dict[str, Any]:
        """The sampler, the graph's layout, the batches and the epochs the stream began."""
        return {
            **self.spec.as_dict(), "graph_layout": self.layout, **self.batching(),
            "batch_epochs_started": self.batch_epoch + 1,
        }

    def step(self, epoch: int) -> float:
        """One pass over the training set; returns this rank's sum of batch losses."""
        losses = [loss for loss, _ in self.steps(epoch)]
        return float(torch.stack(losses).double().sum()) if losses else 0.0  # one device read

    def reduce_loss(self, local: float) -> float:
        """The mean batch loss of the epoch (global)."""
        return self.world.allreduce_scalar(local) / self._num_batches

    def eval_block(self) -> Block:
        """The full graph as the layers read it in evaluation, built on first use.

        The operator the sampled one estimates on this process row's rows
        (:func:`~hpcgnn.sampling.rows.eval_block`: the sampler's normalised ``S``, or the
        sum ``A^T + s I`` of its pattern) by a forward-only
        :class:`~hpcgnn.spmm.block_row.BlockRowAggregation`, and for a layer that attends
        (traced) the edges of that pattern (every block row all-gathered, or the stage
        chunks of a 1.5D grid). Collective over the grid, like the evaluation that asks for
        it; GIST's groups never evaluate their sub-models, so they never hold it.
        """
        if self._eval_block is None:
            lo, hi = self.sampler.rows_range
            kind, grid, dt = self.cfg.kind, self.grid, self.cfg.torch_dtype
            offsets = self.sampler.offsets
            block = eval_block(self.sampler.block, lo, hi, self.spec.method, kind,
                               self.np_dtype, self.edge_weights)
            agg = nbh = None
            if uses(self.widths, kind, AGGREGATE):
                agg = BlockRowAggregation(grid.col, grid.row, block, None, offsets, dt).forward
            if uses(self.widths, kind, ATTENTION):
                nbh = block_row_neighbourhood(grid.col, grid.row, block, offsets, dt)
            self._eval_block = full_block(agg, nbh, self.spec.method.transform_first)
        return self._eval_block

    def evaluate(self) -> dict[str, float]:
        """Full-graph loss and accuracies with counts summed over the process column."""
        logits = self.model.forward_full(self.x, self.eval_block())
        col = self.grid.col
        loss = float(cross_entropy_sum(logits, self.y, self.masks["train"]))
        return {
            "loss": col.allreduce_scalar(loss) / max(1, loss_terms(self.num_train, self.y)),
            **global_counts(col, logits, self.y, self.masks),
        }


    def predictions(self) -> tuple[np.ndarray, torch.Tensor]:
        """This process row's block of the full-graph logits, once over the replicas."""
        with torch.no_grad():
            logits = self.model.forward_full(self.x, self.eval_block())
        return writer_rows(self.grid.col, self.world, np.arange(*self.sampler.rows_range),
                           logits)

    def summary(
        self, result: TrainResult, measured: dict[str, float], phases: dict[str, float],
        tier_gbps: dict[str, float] | None,
    ) -> tuple[dict[str, float], dict[str, Any], list[str]]:
        """The cost model's prediction, the ``sampling`` section and the minibatch phases."""
        sampling = sampling_summary(self, result)
        predicted, comm = predicted_traffic(self.world, self.traffic, result.steps_run)
        sections = {
            "sampling": sampling, "comm": comm,
            "features": {"sparse": isinstance(self.x, SparseFeatures)},
            "time": {"minibatch_phases": {p: phases.get(p, 0.0) for p in PHASES}},
        }
        line = (
            f"sampling | {sampling['edges_sampled']} edges sampled in"
            f" {sampling['sample_time_s']:.2f} s"
        )
        return predicted, sections, [line]


def predicted_traffic(
    world: Comm, traffic: Traffic, epochs: int, machine: str = "laptop"
) -> tuple[dict[str, float], dict[str, Any]]:
    """Per-epoch predicted bytes per category summed over ranks, and the busiest rank's.

    ``traffic`` holds what this rank's calls made every rank receive over ``epochs``
    epochs; summed over ranks (collective) it is what each rank records, divided by the
    epochs and summed in the order of :func:`~hpcgnn.training.report.summed_over_ranks`
    (so it compares bit for bit with the measured bytes). The alpha-beta seconds use
    ``machine``'s link for ``P`` ranks (:mod:`hpcgnn.cost.machine`).
    """
    k = max(1, epochs)
    zero = np.zeros(traffic.size, dtype=np.int64)
    stacked = np.stack([traffic.received.get(c, zero) for c in CATEGORIES])
    received = world.allreduce(stacked, "control")[:, world.rank]
    mine = {c: float(v) / k for c, v in zip(CATEGORIES, received, strict=True) if v}
    busiest = max_over_ranks(world, mine)
    messages = max_over_ranks(world, {c: m / k for c, m in traffic.messages.items()})
    link = load_machine(machine).link(world.size)
    extra = {
        "predicted_busiest_rank_bytes": busiest,
        "predicted_seconds": seconds(busiest, messages, link), "cost_machine": machine,
    }
    return summed_over_ranks(world, mine), extra


def chunk_summary(world: Comm, sampler: BulkSampler) -> dict[str, Any]:
    """The hop budget and the local SpGEMMs per stacked hop, over all ranks (collective).

    ``sample_memory_bytes``: the budget (the smallest over ranks); ``spgemm_chunks_per_hop``:
    local SpGEMMs per stacked hop (1.0: every stack's hop was one SpGEMM), ``None``
    before any stack.
    """
    c = sampler.chunking
    hops = world.allreduce_scalar(int(c.hops))
    chunks = world.allreduce_scalar(int(c.chunks))
    budget = world.allreduce_scalar(float(c.budget or 0.0), MPI.MIN)
    return {"sample_memory_bytes": budget, "spgemm_chunks_per_hop": chunks / hops if hops else None}


def sampling_summary(trainer: MinibatchTrainer, result: TrainResult) -> dict[str, Any]:
    """The ``sampling`` section of the metrics: volumes summed over ranks (collective)."""
    world = trainer.grid.world
    edges = world.allreduce_scalar(int(trainer.sampler.edges_sampled))
    sample_s = world.allreduce_scalar(float(result.step_seconds.get("sample", 0.0)), MPI.MAX)
    return {
        "sampler": trainer.spec.sampler, "sizes": list(trainer.spec.sizes),
        "graph_layout": trainer.layout, "ladies_reduction": trainer.sampler.ladies_reduction,
        "device": trainer.sampler.device,
        "feature_device": trainer.fetcher.device, **chunk_summary(world, trainer.sampler),
        **trainer.batching(),
        "edges_sampled": int(edges), "sample_time_s": sample_s,
        **byte_summary(world, trainer.stats, trainer.sampler.bytes_oblivious,
                       trainer.sampler.bytes_control, trainer.sampler.bytes_partial_products,
                       trainer.sampler.spgemm_nnz, trainer.grid.row.size,
                       trainer.sampler.paper_reduction),
    }
