"""The one epoch loop of every mode; what a mode supplies is a :class:`Trainer`.

A trainer knows its model and batches: :meth:`Trainer.step` runs one epoch of training
steps (full-batch: one step; minibatch: one per batch of every bulk), :meth:`Trainer.evaluate`
the global loss and accuracies. The loop owns the barriers, the per-epoch accounting of
bytes and phase seconds (training steps only), periodic evaluation, the records and the
fingerprint of the trained parameters.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from hpcgnn.comm.collective import collective
from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.memory import MemoryPeaks
from hpcgnn.comm.stats import CommStats
from hpcgnn.config import TrainConfig
from hpcgnn.errors import HpcgnnError
from hpcgnn.training.checkpoint import copy_weights, restore, restore_weights, save_checkpoint
from hpcgnn.training.early_stopping import BestValidation
from hpcgnn.utils.memory import minor_faults
from hpcgnn.utils.progress import Step


class Trainer(Protocol):
    """What the loop needs from a mode."""

    world: Comm  # all ranks; its stats see every category and phase

    # (read-only members: a trainer may hold them as a subtype, e.g. ``Adam``, or a property)
    @property
    def weights(self) -> list[torch.Tensor]:
        """The parameters the optimizer updates."""

    def params_digest(self) -> str:
        """``params_sha256`` of the trained parameters (collective)."""

    def save_checkpoint(
        self, directory: str | os.PathLike, epoch: int, history: list[dict],
        fingerprint: dict[str, Any],
    ) -> None:
        """Write the state after ``epoch`` epochs (collective)."""

    def restore_checkpoint(self, state: dict, directory: str | os.PathLike) -> None:
        """Take the state a checkpoint holds (collective)."""

    def load_weights(self, state: dict, directory: str | os.PathLike) -> None:
        """Start from a checkpoint's weights alone (``--finetune``; collective)."""

    def free(self) -> None:
        """Free what the trainer built (communicators); the last call on it."""

    def step(self, epoch: int) -> float:
        """Train one epoch; return this rank's share of the epoch's loss.

        ``epoch`` is the 0-based step index that keys the random streams (dropout masks,
        shuffles, GIST's partitions); what is shown to the user counts from 1.
        """

    def reduce_loss(self, local: float) -> float:
        """The epoch's global loss from every rank's share (collective)."""

    def evaluate(self) -> dict[str, float]:
        """Global ``loss``, ``train_acc``, ``val_acc``, ``test_acc`` (collective)."""

    def predictions(self) -> tuple[np.ndarray, torch.Tensor]:
        """The global ids of the rows this rank writes and their logits (collective).

        Over all ranks every vertex once (:func:`hpcgnn.training.predict.writer_rows`).
        """

    def summary(
        self, result: TrainResult, measured: dict[str, float], phases: dict[str, float],
        tier_gbps: dict[str, float] | None,
    ) -> tuple[dict[str, float], dict[str, Any], list[str]]:
        """The mode's part of the report (collective): predicted bytes, sections, lines."""


@dataclass
class EpochRecord:
    """One line of the training history."""

    #: The epoch's number, counted from 1 as the console, the CSV log, the metrics and the
    #: checkpoints show it (the random streams are keyed by ``epoch - 1``).
    epoch: int
    loss: float
    train_acc: float | None
    val_acc: float | None
    time_s: float
    comm_s: float = 0.0
    #: Pages the training step touched for the first time on this rank (minor page
    #: faults, :func:`~hpcgnn.utils.memory.minor_faults`): after the first epoch about
    #: none when freed memory is reused (:func:`~hpcgnn.utils.memory.keep_freed_memory`).
    new_pages: int = 0
    #: Mean cross-entropy over the validation vertices (without dropout), when evaluated.
    val_loss: float | None = None
    #: Test accuracy, when evaluated (the best-validation epoch reports it).
    test_acc: float | None = None

    def as_dict(self) -> dict:
        """JSON form: the fields by name (``None`` where the epoch was not evaluated)."""
        return {
            "epoch": self.epoch, "loss": self.loss, "train_acc": self.train_acc,
            "val_acc": self.val_acc, "time_s": self.time_s, "comm_s": self.comm_s,
            "new_pages": self.new_pages, "val_loss": self.val_loss, "test_acc": self.test_acc,
        }


@dataclass
class TrainResult:
    """History, final metrics and the fingerprint of the trained parameters."""

    epochs: list[EpochRecord] = field(default_factory=list)
    final: dict[str, float] = field(default_factory=dict)
    params_sha256: str = ""
    #: Bytes received by this rank per category during training steps, summed over
    #: epochs; evaluation and the loop's control messages are not included.
    step_bytes: dict[str, float] = field(default_factory=dict)
    #: Seconds per communication category and compute phase in training steps.
    step_seconds: dict[str, float] = field(default_factory=dict)
    #: Training epochs run by this process (fewer than ``len(epochs)`` after a resume).
    steps_run: int = 0
    #: ``step_seconds`` of this process's first step alone: its one-time costs (first
    #: touches of new buffers, the MPI library's first use of each communicator) are kept
    #: apart by :meth:`seconds_after_first`.
    first_step_seconds: dict[str, float] = field(default_factory=dict)
    #: The best-validation epoch and the early-stopping state (``--early-stopping``).
    validation: BestValidation = field(default_factory=BestValidation)
    #: Epochs trained when early stopping ended the run (``None``: it ran them all).
    stopped_after: int | None = None
    #: ``--select-model best``: the epoch whose kept weights the run ended with (restored
    #: before the final evaluation), ``None`` when it ends with the last epoch's.
    selected_epoch: int | None = None
    #: The metrics document (rank 0's, on every rank), when the run was asked to keep it
    #: (``hpcgnn.train``).
    metrics: dict[str, Any] | None = None
    #: The trained weights, whole, copied to the host on every rank, when the run was asked
    #: to keep them (``hpcgnn.train``).
    weights: list[torch.Tensor] | None = None
    #: This rank's peak memory by the end of each phase: the run's own (``start``,
    #: ``setup``), then the loop's ``training`` (the epochs, their evaluations included)
    #: and ``evaluation`` (the trained model's).
    memory: MemoryPeaks = field(default_factory=MemoryPeaks)

    def per_epoch(self, counters: dict[str, float]) -> dict[str, float]:
        """Divide counters accumulated over this process's epochs by their number."""
        k = max(1, self.steps_run)
        return {c: v / k for c, v in counters.items()}

    def seconds_after_first(self) -> dict[str, float] | None:
        """``step_seconds`` per epoch over this process's steps after its first.

        The steady state a cost model predicts; ``None`` with fewer than two steps.
        """
        k = self.steps_run - 1
        if k < 1:
            return None
        first = self.first_step_seconds
        return {c: (v - first.get(c, 0.0)) / k for c, v in self.step_seconds.items()}


def params_sha256(weights: Sequence[torch.Tensor]) -> str:
    """SHA-256 of the parameters as float32 bytes, each in row-major (C) order, in order."""
    h = hashlib.sha256()
    for w in weights:
        h.update(np.ascontiguousarray(w.detach().cpu().numpy(), dtype=np.float32).tobytes())
    return h.hexdigest()


class KeptWeights:
    """``--select-model best``: a copy of the weights of the best-validation epoch so far.

    :func:`run_epochs` calls :meth:`keep` at each evaluation of a new lowest validation
    loss (a copy on the weights' device) and :meth:`restore` when training ends, so the
    final evaluation, ``params_sha256`` and what the run returns are that epoch's model.
    Checkpoints carry the copy (:meth:`WholeModel.save_checkpoint`).
    """

    def __init__(self, weights: list[torch.Tensor]) -> None:
        self._weights = weights
        #: The kept copy, ``None`` before the first evaluation.
        self.copy: list[torch.Tensor] | None = None

    def keep(self) -> None:
        """Copy the weights as they are now."""
        with torch.no_grad():
            if self.copy is None:
                self.copy = [w.detach().clone() for w in self._weights]
            else:
                for c, w in zip(self.copy, self._weights, strict=True):
                    c.copy_(w)

    def load(self, saved: list[np.ndarray]) -> None:
        """Take a checkpoint's kept weights (``--resume``), already checked."""
        self.copy = [w.detach().clone() for w in self._weights]
        copy_weights(self.copy, saved)

    def restore(self) -> bool:
        """Copy the kept weights back into the trainer's; whether there were any."""
        if self.copy is None:
            return False
        with torch.no_grad():
            for w, c in zip(self._weights, self.copy, strict=True):
                w.copy_(c)
        return True


class WholeModel:
    """Checkpoints and the digest of a trainer whose ranks hold the whole model each.

    Rank 0 writes the checkpoint (every rank's copy is the same); every rank restores it.
    """

    world: Comm
    weights: list[torch.Tensor]
    optimizer: torch.optim.Optimizer
    #: ``--select-model best``: the best-validation weights (:meth:`keep_best`), else ``None``.
    kept: KeptWeights | None = None

    def keep_best(self) -> KeptWeights:
        """Keep the best-validation weights from now on, in checkpoints too (before a resume)."""
        self.kept = KeptWeights(self.weights)
        return self.kept

    def params_digest(self) -> str:
        """``params_sha256`` of ``weights``."""
        return params_sha256(self.weights)

    def save_checkpoint(
        self, directory: str | os.PathLike, epoch: int, history: list[dict],
        fingerprint: dict[str, Any],
    ) -> None:
        """Rank 0 writes the weights and Adam's state (collective: a failure is everyone's)."""
        with collective(self.world):
            if self.world.rank == 0:
                save_checkpoint(
                    directory, epoch=epoch, weights=self.weights, optimizer=self.optimizer,
                    history=history, fingerprint=fingerprint,
                    kept=None if self.kept is None else self.kept.copy,
                )

    def restore_checkpoint(self, state: dict, directory: str | os.PathLike) -> None:
        """The weights and Adam's state of ``state`` (and the kept weights, if keeping)."""
        saved = restore(state, self.weights, self.optimizer, resume=self.kept is not None)
        if self.kept is not None and saved is not None:
            self.kept.load(saved)

    def load_weights(self, state: dict, directory: str | os.PathLike) -> None:
        """The weights of ``state``; Adam starts afresh."""
        restore_weights(state, self.weights)

    def free(self) -> None:
        """Nothing to free: the grid's communicators are the run's."""


def _bytes(stats: CommStats) -> dict[str, float]:
    return {k: float(v["bytes"]) for k, v in stats.snapshot().items()}


def _add_delta(into: dict[str, float], before: dict[str, float], after: dict[str, float]) -> None:
    for key, now in after.items():
        delta = now - before.get(key, 0.0)
        if delta:
            into[key] = into.get(key, 0.0) + delta


def _train_epoch(trainer: Trainer, cfg: TrainConfig, epoch: int, result: TrainResult
                 ) -> EpochRecord:
    """Train epoch ``epoch`` (the 0-based step index), evaluate when due; return its record.

    Adds the step's bytes and seconds to ``result``. Every span recorded meanwhile carries
    the epoch's 1-based number (``epoch`` in its trace ``args``).
    """
    world, stats, number = trainer.world, trainer.world.stats, epoch + 1
    with stats.tagged(epoch=number):
        world.barrier()
        bytes0 = _bytes(stats)
        secs0 = stats.seconds_by_phase()
        comm0 = stats.total_seconds()
        t0, faults0 = stats.clock(), minor_faults()
        with stats.phase(f"epoch {number}", kind="epoch"):
            local_loss = trainer.step(epoch)
        step_s = stats.clock() - t0
        new_pages = minor_faults() - faults0
        _add_delta(result.step_bytes, bytes0, _bytes(stats))
        _add_delta(result.step_seconds, secs0, stats.seconds_by_phase())
        if result.steps_run == 0:
            result.first_step_seconds = dict(result.step_seconds)
        comm_s = stats.total_seconds() - comm0
        result.steps_run += 1
        loss = trainer.reduce_loss(local_loss)
        if not math.isfinite(loss):  # the same global value on every rank
            raise HpcgnnError(
                f"the training loss is {loss} in epoch {number}: training diverged"
                " (try a smaller --lr)", collective=True,
            )
        accs: dict[str, float] = {}
        if cfg.eval_every and (number % cfg.eval_every == 0 or number == cfg.epochs):
            with torch.no_grad(), stats.phase("evaluate", kind="epoch"):
                accs = trainer.evaluate()
    return EpochRecord(
        epoch=number, loss=loss, train_acc=accs.get("train_acc"),
        val_acc=accs.get("val_acc"), time_s=step_s, comm_s=comm_s, new_pages=new_pages,
        val_loss=accs.get("val_loss"), test_acc=accs.get("test_acc"),
    )


def run_epochs(
    trainer: Trainer,
    cfg: TrainConfig,
    on_epoch: Callable[[EpochRecord], None] | None = None,
    *,
    start_epoch: int = 0,
    history: list[EpochRecord] | None = None,
    after_epoch: Callable[[int, TrainResult], None] | None = None,
    before_epoch: Callable[[int], None] | None = None,
    kept: KeptWeights | None = None,
    say_steps: bool = False,
    memory: MemoryPeaks | None = None,
) -> TrainResult:
    """Train for epochs ``start_epoch .. cfg.epochs - 1``, evaluating every ``cfg.eval_every``.

    Parameters
    ----------
    trainer
        The mode's model and batches.
    cfg
        Hyper-parameters.
    on_epoch
        Called with each epoch's record (e.g. to print progress on rank 0).
    start_epoch, history
        Resume point (the epochs done) and the records of the epochs already run.
    after_epoch
        Called on every rank as ``after_epoch(epochs_done, result)`` (checkpointing);
        ``result.stopped_after`` is set when early stopping ends the run there.
    before_epoch
        Called on every rank with the epoch's number (1-based) before it starts (which
        epochs the trace records).
    kept
        ``--select-model best``: keeps the weights of each new lowest validation loss
        (before ``after_epoch``, so checkpoints hold them) and restores them before the
        final evaluation (``result.selected_epoch``).
    say_steps
        Say on stderr when the final evaluation takes long (:class:`~hpcgnn.utils.progress.Step`;
        rank 0 of a run that prints).
    memory
        The peaks of the phases before the loop (``result.memory`` goes on from them);
        the loop marks ``training`` and ``evaluation``.

    Notes
    -----
    ``trainer.step`` takes the 0-based step index, which keys the random streams; records,
    callbacks, trace spans and messages take the epoch's 1-based number (the index + 1).
    ``EpochRecord.time_s`` is the training step (forward, backward, gradient reduction,
    optimiser), started after a barrier; evaluation is timed separately.
    """
    result = TrainResult(epochs=list(history or []), memory=memory or MemoryPeaks())
    result.validation = BestValidation.replay(cfg.early_stopping, result.epochs)
    for epoch in range(start_epoch, cfg.epochs):
        if result.validation.stop:  # a resumed run that had stopped
            result.stopped_after = epoch
            break
        if before_epoch is not None:
            before_epoch(epoch + 1)
        record = _train_epoch(trainer, cfg, epoch, result)
        result.epochs.append(record)
        result.validation.update(record)
        if kept is not None and result.validation.best is record:
            kept.keep()
        if result.validation.stop and record.epoch < cfg.epochs:
            result.stopped_after = record.epoch
        if on_epoch is not None:
            on_epoch(record)
        if after_epoch is not None:
            after_epoch(record.epoch, result)
        if result.stopped_after is not None:
            break
    if kept is not None and kept.restore():
        assert result.validation.best is not None  # kept at its evaluation or resumed with it
        result.selected_epoch = result.validation.best.epoch
    result.memory.mark("training", trainer.world.device)
    with torch.no_grad(), Step("evaluating the trained model", enabled=say_steps):
        result.final = trainer.evaluate()
    result.memory.mark("evaluation", trainer.world.device)
    loss = result.final.get("loss", 0.0)
    if not math.isfinite(loss):  # the last step's update: no epoch's loss saw it
        done = result.epochs[-1].epoch if result.epochs else 0
        raise HpcgnnError(
            f"the trained model's loss is {loss} after epoch {done}: training diverged in"
            " its last step (try a smaller --lr)", collective=True,
        )
    result.params_sha256 = trainer.params_digest()
    return result
