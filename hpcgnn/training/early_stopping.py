"""Early stopping on the validation loss and the best-validation epoch (``--early-stopping``).

Kipf & Welling stop training when the validation loss stops falling; the papers report
the test accuracy of the model selected on the validation set. :class:`BestValidation`
follows the evaluations of a run: the epoch of the lowest validation loss so far (its
validation and test accuracy are the run's ``best`` in the metrics), and with a patience
``P`` the run stops after ``P`` evaluations without a lower one. It is rebuilt from a
resumed run's history, so a resumed run stops where the whole run would have.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol


class Evaluated(Protocol):
    """An epoch's record as the tracker reads it."""

    epoch: int  # 1-based
    val_loss: float | None
    val_acc: float | None
    test_acc: float | None
    train_acc: float | None


@dataclass
class BestValidation:
    """The evaluation of lowest validation loss so far, and the evaluations since.

    Attributes
    ----------
    patience
        Evaluations without a lower validation loss after which to stop (0: never).
    best
        The record of the best evaluation, ``None`` before any (or while the validation
        loss is NaN: a graph without validation vertices).
    waited
        Evaluations since the best.
    """

    patience: int = 0
    best: Evaluated | None = None
    waited: int = 0

    @classmethod
    def replay(cls, patience: int, history: Iterable[Evaluated]) -> BestValidation:
        """The tracker after the evaluated epochs of ``history`` (a resumed run's)."""
        tracker = cls(patience)
        for rec in history:
            tracker.update(rec)
        return tracker

    def update(self, rec: Evaluated) -> None:
        """Take an epoch's record; one without a validation loss was not evaluated."""
        loss = rec.val_loss
        if loss is None:
            return
        if math.isfinite(loss) and (self.best is None or loss < _loss(self.best)):
            self.best, self.waited = rec, 0
        else:
            self.waited += 1

    @property
    def stop(self) -> bool:
        """Whether ``patience`` evaluations have passed without a lower validation loss."""
        return self.patience > 0 and self.waited >= self.patience

    def as_dict(self) -> dict[str, Any] | None:
        """The metrics' ``best`` section: the epoch (1-based) and its validation scores."""
        b = self.best
        if b is None:
            return None
        return {"epoch": b.epoch, "val_loss": b.val_loss, "val_acc": b.val_acc,
                "test_acc": b.test_acc, "train_acc": b.train_acc}


def _loss(rec: Evaluated) -> float:
    assert rec.val_loss is not None
    return rec.val_loss
