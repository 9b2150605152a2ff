"""The full-batch training loop, the same for the serial reference and every algorithm.

A *model* here is anything with the :class:`FullBatchModel` interface: it knows its
layout, runs the forward pass on this rank's block, and all-reduces weight gradients.
The loop owns the optimiser, the global loss normalisation and the metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.config import TrainConfig
from hpcgnn.nn.gcn import correct_count, cross_entropy_sum
from hpcgnn.train.model_state import make_optimizer, params_sha256


class FullBatchModel(Protocol):
    """What the loop needs from a (distributed) model."""

    comm: Comm  # all ranks of the model; loss and accuracy counts are summed over it
    weights: list[torch.Tensor]
    y: torch.Tensor  # labels of the rows this rank scores
    masks: dict[str, torch.Tensor]  # train/val/test masks of the same rows

    def logits(self, epoch: int | None) -> torch.Tensor:
        """Logits of the rows this rank scores; ``epoch=None`` evaluates without dropout."""

    def reduce_gradients(self) -> None:
        """Sum the weight gradients over the ranks that hold partial gradients."""


@dataclass
class EpochRecord:
    """One line of the training history."""

    epoch: int
    loss: float
    train_acc: float | None
    val_acc: float | None
    time_s: float
    comm_s: float = 0.0

    def as_dict(self) -> dict:
        """JSON form (``{epoch, loss, train_acc, val_acc, time_s}`` plus communication time)."""
        return {
            "epoch": self.epoch, "loss": self.loss, "train_acc": self.train_acc,
            "val_acc": self.val_acc, "time_s": self.time_s, "comm_s": self.comm_s,
        }


@dataclass
class TrainResult:
    """History, final metrics and the fingerprint of the trained parameters."""

    epochs: list[EpochRecord] = field(default_factory=list)
    final: dict[str, float] = field(default_factory=dict)
    params_sha256: str = ""
    #: Bytes received by this rank per category during training steps (forward with
    #: dropout, backward, gradient reduction), summed over epochs; evaluation and the
    #: control messages of the loop are not included.
    step_bytes: dict[str, float] = field(default_factory=dict)
    #: Seconds per communication category and compute phase in training steps.
    step_seconds: dict[str, float] = field(default_factory=dict)

    #: Training steps run by this process (fewer than ``len(epochs)`` after a resume).
    steps_run: int = 0

    def per_epoch(self, counters: dict[str, float]) -> dict[str, float]:
        """Divide counters accumulated over this process's steps by their number."""
        k = max(1, self.steps_run)
        return {c: v / k for c, v in counters.items()}


def _accumulate(into: dict[str, float], before: dict, after: dict, key: str) -> None:
    for cat, now in after.items():
        delta = now[key] - before.get(cat, {}).get(key, 0)
        if delta:
            into[cat] = into.get(cat, 0) + delta


def global_counts(
    comm: Comm, logits: torch.Tensor, y: torch.Tensor, masks: dict[str, torch.Tensor]
) -> dict[str, float]:
    """Accuracy on train/val/test of this rank's rows, with counts summed over ``comm``."""
    out = {}
    for name in ("train", "val", "test"):
        mask = masks[name]
        correct = comm.allreduce_scalar(correct_count(logits, y, mask))
        total = comm.allreduce_scalar(int(mask.sum()))
        out[f"{name}_acc"] = correct / total if total else float("nan")
    return out


def train_fullbatch(
    model: FullBatchModel,
    cfg: TrainConfig,
    on_epoch: Callable[[EpochRecord], None] | None = None,
    *,
    start_epoch: int = 0,
    optimizer: torch.optim.Optimizer | None = None,
    history: list[EpochRecord] | None = None,
    after_epoch: Callable[[int, torch.optim.Optimizer, TrainResult], None] | None = None,
) -> TrainResult:
    """Train ``model`` for ``cfg.epochs`` epochs and evaluate.

    Parameters
    ----------
    model
        The (distributed) model.
    cfg
        Hyper-parameters.
    on_epoch
        Called with each epoch's record (e.g. to print progress on rank 0).
    start_epoch, optimizer, history
        Resume point, restored optimiser and the records of the epochs already run.
    after_epoch
        Called on every rank as ``after_epoch(epochs_done, optimizer, result)`` after each
        epoch (checkpointing).

    Notes
    -----
    ``EpochRecord.time_s`` is the training step (forward, backward, gradient reduction,
    optimiser), started after a barrier; evaluation is timed separately.
    """
    comm = model.comm
    opt = optimizer if optimizer is not None else make_optimizer(model.weights, cfg)
    num_train = comm.allreduce_scalar(int(model.masks["train"].sum()))
    result = TrainResult(epochs=list(history or []))
    for epoch in range(start_epoch, cfg.epochs):
        comm.barrier()
        comm_before = comm.stats.total_seconds()
        before = comm.stats.snapshot()
        before_t = comm.stats.seconds_by_phase()
        t0 = time.perf_counter()
        with comm.stats.phase(f"epoch {epoch + 1}", kind="epoch"):
            opt.zero_grad(set_to_none=False)
            logits = model.logits(epoch)
            loss = cross_entropy_sum(logits, model.y, model.masks["train"]) / max(1, num_train)
            loss.backward()
            model.reduce_gradients()
            with comm.stats.phase("optimizer"):
                opt.step()
        step_s = time.perf_counter() - t0
        _accumulate(result.step_bytes, before, comm.stats.snapshot(), "bytes")
        for name, sec in comm.stats.seconds_by_phase().items():
            delta = sec - before_t.get(name, 0.0)
            if delta:
                result.step_seconds[name] = result.step_seconds.get(name, 0.0) + delta
        comm_s = comm.stats.total_seconds() - comm_before
        result.steps_run += 1
        loss_value = comm.allreduce_scalar(float(loss.detach()))
        accs: dict[str, float] = {}
        if cfg.eval_every and ((epoch + 1) % cfg.eval_every == 0 or epoch + 1 == cfg.epochs):
            with torch.no_grad(), comm.stats.phase("evaluate", kind="epoch"):
                accs = global_counts(comm, model.logits(None), model.y, model.masks)
        record = EpochRecord(
            epoch=epoch, loss=loss_value, train_acc=accs.get("train_acc"),
            val_acc=accs.get("val_acc"), time_s=step_s, comm_s=comm_s,
        )
        result.epochs.append(record)
        if on_epoch is not None:
            on_epoch(record)
        if after_epoch is not None:
            after_epoch(epoch + 1, opt, result)
    with torch.no_grad():
        logits = model.logits(None)
        final_loss = cross_entropy_sum(logits, model.y, model.masks["train"]) / max(1, num_train)
        result.final = {
            "loss": comm.allreduce_scalar(float(final_loss)),
            **global_counts(comm, logits, model.y, model.masks),
        }
    result.params_sha256 = params_sha256(model.weights)
    return result
