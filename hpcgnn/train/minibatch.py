"""Minibatch training with bulk sampling: ``hpcgnn train --mode minibatch``.

Pipeline per epoch (bulk synchronous, every rank in step):

1. **sample** ``K`` batches at once (:class:`~hpcgnn.sampling.bulk.BulkSampler`), each
   rank its contiguous share of the bulk;
2. per training step, **fetch** the input vertices' features (and labels) of the rank's
   next batch by all-to-all(v) in its process column (:mod:`hpcgnn.sampling.fetch`);
3. **propagate**: forward and backward of the model on the sampled hops; the weight
   gradients are summed over all ranks and divided by the number of batches trained in
   the step, so the Adam update is data-parallel SGD on the union of the step's batches
   (the mean of the per-batch mean losses);
4. when the bulk's batches are used up, sample the next bulk.

Models (``L`` layers, hop ``L-1`` applied first):

- ``sage``: GraphSAGE with the mean aggregator,
  ``h_v' = ReLU(W_self^T h_v + W_neigh^T mean_{u in N_s(v)} h_u + b)`` (no ReLU on the
  last layer), ``N_s(v)`` the sampled in-neighbours;
- ``ladies``: LADIES' GCN layer ``H' = ReLU(Â_s H W + b)`` with ``Â_s`` the sampled
  block of ``D^{-1}(A^T + I)`` scaled by ``1/p`` and row-normalised.

Evaluation is full-graph, layer by layer, with the operator the sampled one estimates
(the full-neighbourhood mean ``D^{-1} A^T`` for sage, ``D^{-1}(A^T + I)`` for ladies)
distributed 1.5D by the staged broadcast SpMM of CAGNET; accuracy counts are global.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from mpi4py import MPI

from hpcgnn.comm.collective import collective
from hpcgnn.comm.stats import CommStats
from hpcgnn.config import TrainConfig
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.reader import GraphFile
from hpcgnn.layout.blocks import stage_chunks
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.shapes import choose_shape
from hpcgnn.nn.gcn import cross_entropy_sum
from hpcgnn.nn.init import glorot_weights
from hpcgnn.rng import stream_key
from hpcgnn.sampling.bulk import BulkSampler, my_share, read_train_ids
from hpcgnn.sampling.fetch import FeatureFetcher
from hpcgnn.sampling.rows import normalized_block
from hpcgnn.sampling.sampled import SampledBatch
from hpcgnn.sampling.shuffle import TAG_DROPOUT, minibatches, uniform_rows
from hpcgnn.sampling.spec import SamplerSpec, check_training_set
from hpcgnn.sampling.spgemm_1p5d import COMBINE, FETCH_CATEGORIES, FRONTIER
from hpcgnn.spmm.block_row import StagedBroadcastSpMM
from hpcgnn.train.loop import EpochRecord, TrainResult, global_counts
from hpcgnn.train.model_state import make_optimizer, params_sha256
from hpcgnn.train.report import build_metrics, summed_over_ranks, write_json
from hpcgnn.train.trace import gather_trace, write_trace

GRAD_ALLREDUCE = "allreduce"
PHASES = ("sample", "fetch", "propagate")


@dataclass
class MinibatchOptions:
    """Everything ``hpcgnn train --mode minibatch`` needs besides the hyper-parameters."""

    graph: str
    spec: SamplerSpec
    layout: str = "replicated"
    grid: str | None = None
    replication: int | None = None
    metrics: str | None = None
    trace: str | None = None
    quiet: bool = False


class _SparseMatmul(torch.autograd.Function):
    """``A H`` for a constant SciPy CSR ``A``; backward ``A^T G``."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, a: sp.csr_matrix) -> torch.Tensor:  # type: ignore[override]
        ctx.a = a
        return torch.from_numpy(np.ascontiguousarray(a @ h.detach().numpy()))

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return torch.from_numpy(np.ascontiguousarray(ctx.a.T @ g.contiguous().numpy())), None


def sparse_matmul(a: sp.csr_matrix, h: torch.Tensor) -> torch.Tensor:
    """Differentiable (in ``h``) product of a sampled hop matrix with dense rows."""
    return _SparseMatmul.apply(h, a)


class FullGraphOperator:
    """``E H`` for this process row's block of a row-normalised ``E``, forward only (1.5D)."""

    def __init__(
        self, grid: ProcessGrid, block: sp.csr_matrix, offsets: np.ndarray, dtype: torch.dtype
    ) -> None:
        chunks = stage_chunks(grid.col.size, grid.row.size)
        stages = range(int(chunks[grid.row.rank]), int(chunks[grid.row.rank + 1]))
        self.row = grid.row
        self.spmm = StagedBroadcastSpMM(grid.col, block, offsets, dtype, stages)

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """This process row's block of ``E H`` given its block of ``H``."""
        out = self.spmm(h.contiguous())
        if self.row.size > 1:
            self.row.allreduce(out, GRAD_ALLREDUCE)
        return out


class MinibatchModel:
    """GraphSAGE (mean) or LADIES GCN; parameters replicated, identical on every rank.

    ``weights`` lists, per layer, ``W_self, W_neigh, b`` (sage) or ``W, b`` (ladies).
    """

    def __init__(self, sampler: str, widths: list[int], seed: int, dtype: np.dtype | type) -> None:
        self.sampler = sampler
        self.layers = len(widths) - 1
        mats = [glorot_weights(widths, seed, dtype)]
        if sampler == "sage":
            mats.append(glorot_weights(widths, seed + 1, dtype))
        self.weights: list[torch.Tensor] = []
        for layer in range(self.layers):
            for m in mats:
                self.weights.append(torch.from_numpy(m[layer]).requires_grad_(True))
            bias = np.zeros(widths[layer + 1], dtype=dtype)
            self.weights.append(torch.from_numpy(bias).requires_grad_(True))

    def _layer(self, layer: int) -> list[torch.Tensor]:
        per = 3 if self.sampler == "sage" else 2
        return self.weights[per * layer : per * (layer + 1)]

    def _combine(
        self, layer: int, h_self: torch.Tensor, agg: Any, h: torch.Tensor
    ) -> torch.Tensor:
        w = self._layer(layer)
        if self.sampler == "sage":
            z = h_self @ w[0] + agg(h) @ w[1] + w[2]
        else:
            z = agg(h @ w[0]) + w[1]
        return z if layer == self.layers - 1 else torch.relu(z)

    def forward_batch(
        self, batch: SampledBatch, x: torch.Tensor, dropout: float, keep: Any | None,
    ) -> torch.Tensor:
        """Logits of the batch's seeds from the features ``x`` of its input vertices.

        ``keep(layer, vertex_ids, width)`` gives the dropout keep-mask of a layer's input
        rows (``None``: no dropout).
        """
        h = x
        for layer in range(self.layers):
            hop = batch.hops[self.layers - 1 - layer]
            if keep is not None and dropout > 0.0:
                mask = torch.from_numpy(keep(layer, hop.cols, h.shape[1]))
                h = h * mask.to(h.dtype) * (1.0 / (1.0 - dropout))
            a = hop.matrix(np.float32 if h.dtype == torch.float32 else np.float64)
            h = self._combine(layer, h[: len(hop.rows)], lambda t, a=a: sparse_matmul(a, t), h)
        return h

    def forward_full(self, x: torch.Tensor, op: FullGraphOperator) -> torch.Tensor:
        """This process row's block of the full-graph logits (evaluation, no dropout)."""
        h = x
        for layer in range(self.layers):
            h = self._combine(layer, h, op, h)
        return h


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    order = np.argsort(ids, kind="stable")
    return order[np.searchsorted(ids, wanted, sorter=order)]


class MinibatchTrainer:
    """One rank's part of minibatch training: data, sampler, fetcher, model, optimiser."""

    def __init__(self, opts: MinibatchOptions, cfg: TrainConfig, grid: ProcessGrid) -> None:
        self.opts, self.cfg, self.grid, self.spec = opts, cfg, grid, opts.spec
        self.np_dtype = np.float64 if cfg.dtype == "float64" else np.float32
        with collective(grid.world):
            self.train_ids = read_train_ids(opts.graph)
            check_training_set(self.spec, len(self.train_ids))
        self.sampler = BulkSampler(self.spec, grid, opts.graph, opts.layout)
        lo, hi = self.sampler.rows_range
        with collective(grid.world), GraphFile(opts.graph) as gf:
            meta = gf.meta
            x = gf.read_features(lo, hi).astype(self.np_dtype)
            self.y = torch.from_numpy(gf.read_labels(lo, hi))
            self.masks = {
                m: torch.from_numpy(gf.read_mask(m, lo, hi)) for m in ("train", "val", "test")
            }
        self.meta = meta
        self.x = torch.from_numpy(x)
        self.fetcher = FeatureFetcher(grid.col, self.sampler.offsets, x, self.y.numpy())
        block = normalized_block(self.sampler.block, lo, hi, self.np_dtype)
        self.eval_op = FullGraphOperator(grid, block, self.sampler.offsets, cfg.torch_dtype)
        widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, self.spec.layers)
        self.model = MinibatchModel(self.spec.sampler, widths, cfg.seed, self.np_dtype)
        self.optimizer = make_optimizer(self.model.weights, cfg)
        self.num_train = len(self.train_ids)

    @property
    def stats(self) -> CommStats:
        """Counters shared by the grid's communicators and phases."""
        return self.grid.stats

    def _keep(self, epoch: int, batch: int) -> Any:
        def keep(layer: int, ids: np.ndarray, width: int) -> np.ndarray:
            key = stream_key(self.cfg.seed, TAG_DROPOUT, epoch, batch, layer)
            return uniform_rows(key, ids, width) >= self.cfg.dropout

        return keep

    def _step(self, epoch: int, batch: SampledBatch | None, in_step: int) -> float:
        """Fetch, forward, backward, gradient all-reduce and update; returns the batch loss."""
        with self.stats.phase("fetch"):
            ids = batch.input_ids if batch is not None else np.zeros(0, np.int64)
            x, y = self.fetcher.fetch(ids)
        loss_value = 0.0
        with self.stats.phase("propagate"):
            self.optimizer.zero_grad(set_to_none=False)
            if batch is not None:
                xt = torch.from_numpy(x.astype(self.np_dtype, copy=False))
                keep = self._keep(epoch, batch.batch)
                logits = self.model.forward_batch(batch, xt, self.cfg.dropout, keep)
                labels = torch.from_numpy(y[_positions(ids, batch.seeds)])
                loss = torch.nn.functional.cross_entropy(logits, labels)
                loss.backward()
                loss_value = float(loss.detach())
            grads = [
                torch.zeros_like(w) if w.grad is None else w.grad for w in self.model.weights
            ]
            flat = torch.cat([g.reshape(-1) for g in grads]).contiguous()
            self.grid.world.allreduce(flat, GRAD_ALLREDUCE)
            flat /= in_step
            start = 0
            for w in self.model.weights:
                w.grad = flat[start : start + w.numel()].view_as(w).clone()
                start += w.numel()
            self.optimizer.step()
        return loss_value

    def train_epoch(self, epoch: int) -> float:
        """One pass over the training set; returns the mean batch loss (global)."""
        batches = minibatches(self.train_ids, self.spec.batch_size, self.spec.seed, epoch)
        size, loss_sum = self.grid.size, 0.0
        for first in range(0, len(batches), self.spec.bulk):
            bulk = batches[first : first + self.spec.bulk]
            with self.stats.phase("sample"):
                mine = self.sampler.sample(epoch, bulk, first)
            shares = [len(my_share(len(bulk), size, r)) for r in range(size)]
            for t in range(max(shares)):
                in_step = sum(1 for s in shares if s > t)
                loss_sum += self._step(epoch, mine[t] if t < len(mine) else None, in_step)
        return self.grid.world.allreduce_scalar(loss_sum) / len(batches)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Full-graph loss and accuracies with counts summed over the process column."""
        logits = self.model.forward_full(self.x, self.eval_op)
        col = self.grid.col
        loss = float(cross_entropy_sum(logits, self.y, self.masks["train"]))
        return {
            "loss": col.allreduce_scalar(loss) / max(1, self.num_train),
            **global_counts(col, logits, self.y, self.masks),
        }


def _delta(into: dict[str, float], before: dict[str, float], after: dict[str, float]) -> None:
    for k, v in after.items():
        d = v - before.get(k, 0.0)
        if d:
            into[k] = into.get(k, 0.0) + d


def _bytes(stats: CommStats) -> dict[str, float]:
    return {k: float(v["bytes"]) for k, v in stats.snapshot().items()}


def run_training(trainer: MinibatchTrainer, say: Any) -> TrainResult:
    """The epoch loop; every rank returns the same :class:`TrainResult`."""
    cfg, stats, world = trainer.cfg, trainer.stats, trainer.grid.world
    result = TrainResult()
    for epoch in range(cfg.epochs):
        world.barrier()
        bytes0, secs0, comm0 = _bytes(stats), stats.seconds_by_phase(), stats.total_seconds()
        t0 = time.perf_counter()
        with stats.phase(f"epoch {epoch + 1}", kind="epoch"):
            loss = trainer.train_epoch(epoch)
        step_s = time.perf_counter() - t0
        _delta(result.step_bytes, bytes0, _bytes(stats))
        _delta(result.step_seconds, secs0, stats.seconds_by_phase())
        comm_s = stats.total_seconds() - comm0
        result.steps_run += 1
        accs: dict[str, float] = {}
        if cfg.eval_every and ((epoch + 1) % cfg.eval_every == 0 or epoch + 1 == cfg.epochs):
            with stats.phase("evaluate", kind="epoch"):
                accs = trainer.evaluate()
        rec = EpochRecord(epoch, loss, accs.get("train_acc"), accs.get("val_acc"), step_s, comm_s)
        result.epochs.append(rec)
        acc = ""
        if rec.train_acc is not None:
            acc = f" | train {rec.train_acc:.4f} val {rec.val_acc:.4f}"
        say(f"epoch {epoch + 1:5d} | loss {loss:.4f}{acc} | {step_s * 1e3:9.1f} ms")
    result.final = trainer.evaluate()
    result.params_sha256 = params_sha256(trainer.model.weights)
    return result


def sampling_summary(trainer: MinibatchTrainer, result: TrainResult) -> dict[str, Any]:
    """The ``sampling`` section of the metrics (volumes summed over ranks, run totals)."""
    world = trainer.grid.world
    cats = trainer.stats.snapshot()
    aware = sum(cats.get(c, {}).get("bytes", 0) for c in FETCH_CATEGORIES)
    combine = sum(cats.get(c, {}).get("bytes", 0) for c in (COMBINE, FRONTIER))
    totals = summed_over_ranks(world, {
        "edges": float(trainer.sampler.edges_sampled), "aware": float(aware),
        "oblivious": float(trainer.sampler.bytes_oblivious), "combine": float(combine),
    })
    sample_s = world.allreduce_scalar(float(result.step_seconds.get("sample", 0.0)), MPI.MAX)
    ratio = totals.get("oblivious", 0.0) / totals["aware"] if totals.get("aware") else None
    return {
        "sampler": trainer.spec.sampler, "sizes": list(trainer.spec.sizes),
        "graph_layout": trainer.opts.layout, "batch_size": trainer.spec.batch_size,
        "bulk": trainer.spec.bulk,
        "edges_sampled": int(totals.get("edges", 0)), "sample_time_s": sample_s,
        "bytes_sparsity_aware": int(totals.get("aware", 0)),
        "bytes_oblivious": int(totals.get("oblivious", 0)),
        "oblivious_over_aware": ratio, "bytes_row_combine": int(totals.get("combine", 0)),
    }


def train_minibatch(
    opts: MinibatchOptions, cfg: TrainConfig, comm: MPI.Comm = MPI.COMM_WORLD
) -> TrainResult:
    """Run one minibatch training job on a ``(P/c) x c`` grid; the same result on every rank."""
    shape = choose_shape("1.5d", comm.Get_size(), opts.grid, opts.replication)
    grid = ProcessGrid(comm, shape)
    try:
        root = grid.rank == 0
        say = (lambda *a: print(*a, flush=True)) if root and not opts.quiet else (lambda *a: None)
        t0 = time.perf_counter()
        trainer = MinibatchTrainer(opts, cfg, grid)
        m, spec = trainer.meta, opts.spec
        say(f"hpcgnn train: {m.name or opts.graph}: {m.num_nodes} vertices, {m.num_edges} edges | "
            f"minibatch {spec.sampler} {','.join(map(str, spec.sizes))} batch {spec.batch_size} "
            f"bulk {spec.bulk} | {opts.layout} graph, grid {grid.shape} on {grid.size} ranks | "
            f"setup {time.perf_counter() - t0:.2f} s")
        grid.world.barrier()
        grid.stats.reset()
        grid.stats.tracing = bool(opts.trace)
        result = run_training(trainer, say)
        _report(opts, cfg, trainer, result)
        return result
    finally:
        grid.free()


def _report(
    opts: MinibatchOptions, cfg: TrainConfig, trainer: MinibatchTrainer, result: TrainResult
) -> None:
    grid = trainer.grid
    measured = summed_over_ranks(grid.world, result.per_epoch(result.step_bytes))
    phases = summed_over_ranks(grid.world, result.per_epoch(result.step_seconds))
    phases = {k: v / grid.size for k, v in phases.items()}
    sampling = sampling_summary(trainer, result)
    events = gather_trace(grid.world, grid.stats) if opts.trace else None
    f = result.final
    if grid.rank == 0 and not opts.quiet:
        print(f"final | loss {f['loss']:.4f} | train {f['train_acc']:.4f} val {f['val_acc']:.4f}"
              f" test {f['test_acc']:.4f} | {sampling['edges_sampled']} edges sampled in"
              f" {sampling['sample_time_s']:.2f} s", flush=True)
    if grid.rank != 0:
        return
    if opts.metrics:
        m = trainer.meta
        doc = build_metrics(
            result, world_size=grid.size,
            config={**cfg.as_dict(), "mode": "minibatch", "grid": str(grid.shape),
                    "graph": opts.graph, **opts.spec.as_dict(), "graph_layout": opts.layout,
                    "replication": grid.shape.replication},
            measured_bytes=measured, phases=phases,
            extra={"sampling": sampling,
                   "graph": {"num_nodes": m.num_nodes, "num_edges": m.num_edges,
                             "num_features": m.num_features, "num_classes": m.num_classes,
                             "directed": m.directed}},
        )
        doc["time"]["minibatch_phases"] = {p: phases.get(p, 0.0) for p in PHASES}
        write_json(opts.metrics, doc)
        print(f"metrics written to {opts.metrics}", file=sys.stderr)
    if opts.trace and events is not None:
        write_trace(opts.trace, events)
        print(f"trace written to {opts.trace}", file=sys.stderr)


__all__ = ["MinibatchModel", "MinibatchOptions", "MinibatchTrainer", "train_minibatch"]
