"""Full-batch training of a :class:`~hpcgnn.models.base.GCNModel`: one step per epoch."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.config import TrainConfig, check_training_vertices
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.layout.subnets import Subnet
from hpcgnn.models.base import GCNModel
from hpcgnn.models.exchange_report import exchange_line
from hpcgnn.nn.gcn import cross_entropy_sum, loss_terms
from hpcgnn.nn.optim import make_optimizer
from hpcgnn.training.loop import TrainResult, WholeModel, run_epochs
from hpcgnn.training.predict import writer_rows
from hpcgnn.training.scores import accuracy_terms, class_counts, f1_scores
from hpcgnn.training.submodel import SubModelHost


def global_counts(
    comm: Comm, logits: torch.Tensor, y: torch.Tensor, masks: dict[str, torch.Tensor]
) -> dict[str, float]:
    """Accuracy and F1 on train/val/test and the validation loss, over ``comm``'s rows.

    ``val_loss`` is the mean cross-entropy over every validation vertex (NaN without any;
    multi-label: over every (vertex, class) entry); ``<split>_f1_macro`` and
    ``<split>_f1_micro`` (:mod:`hpcgnn.training.scores`). One all-reduce carries every
    split's per-class counts, whose sums give the correct predictions and the split's size
    (every vertex of a mask is labelled; multi-label: its entries), and one the validation
    loss.
    """
    names = ("train", "val", "test")
    counts = np.stack([class_counts(logits, y, masks[name]) for name in names])
    comm.allreduce(counts, "control")
    loss = comm.allreduce_scalar(float(cross_entropy_sum(logits, y, masks["val"])))
    out = {}
    for name, split in zip(names, counts, strict=True):
        correct, total = accuracy_terms(split)
        out[f"{name}_acc"] = correct / total if total else float("nan")
        out[f"{name}_f1_macro"], out[f"{name}_f1_micro"] = f1_scores(split)
        if name == "val":
            out["val_loss"] = loss / total if total else float("nan")
    return out


class FullBatchTrainer(WholeModel, SubModelHost):
    """The :class:`~hpcgnn.training.loop.Trainer` of full-batch models.

    The loss is the sum of the cross-entropy over this rank's training rows divided by
    the *global* number of training vertices (multi-label, ``--loss bce``: of their
    (vertex, class) entries, :func:`~hpcgnn.nn.gcn.loss_terms`), so the all-reduced loss
    and gradients equal the serial mean exactly.

    Parameters
    ----------
    model
        The (distributed) model.
    cfg
        Hyper-parameters.
    world
        All ranks (for barriers and the loop's accounting).
    optimizer
        A restored optimiser (resume), else a new Adam over ``model.weights``.
    """

    def __init__(
        self, model: GCNModel, cfg: TrainConfig, world: Comm,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        self.model, self.cfg = model, cfg
        self.world = world
        self.weights = model.weights
        self.first_layer = cfg.kind.weight_slices(cfg.layers, cfg.bias)[0].stop  # bias too
        self.optimizer = optimizer if optimizer is not None else make_optimizer(
            self.weights, cfg, self.first_layer
        )
        self.num_train = model.comm.allreduce_scalar(int(model.masks["train"].sum()))
        check_training_vertices(self.num_train)  # the same global count on every rank
        #: The loss's global number of terms: vertices, or (vertex, class) entries.
        self.num_terms = loss_terms(self.num_train, model.y)

    @property
    def subnet(self) -> Subnet | None:
        """The GIST sub-network the weights are (its dropout masks), else ``None``."""
        return self.model.subnet

    @subnet.setter
    def subnet(self, net: Subnet | None) -> None:
        self.model.subnet = net

    def _loss(self, logits: torch.Tensor) -> torch.Tensor:
        m = self.model
        return cross_entropy_sum(logits, m.y, m.masks["train"]) / max(1, self.num_terms)

    def step(self, epoch: int) -> float:
        """Forward with dropout, backward, gradient reduction, optimiser step."""
        self.optimizer.zero_grad(set_to_none=False)
        loss = self._loss(self.model.logits(epoch))
        loss.backward()
        self.model.reduce_gradients()
        with self.world.stats.phase("optimizer"):
            self.optimizer.step()
        return float(loss.detach())

    def train(self, k: int) -> float:
        """GIST's ``K`` local iterations: steps ``steps_done ..`` (their dropout masks).

        The mean of the steps' shares, scaled so that the shares sum over the group's ranks
        (not only the model's row owners) to the group's loss.
        """
        shares = [self.step(self.steps_done + it) for it in range(k)]
        self.steps_done += k
        return float(np.mean(shares)) * self.model.comm.size / self.world.size

    def predicted_bytes(self, steps: int, rounds: int) -> dict[str, float]:
        """The cost model's bytes of ``steps`` steps per round, summed over ranks (collective).

        Every step of a full batch moves the same bytes.
        """
        estimate = self.model.predict_cost()
        return {} if estimate is None else {c: steps * v for c, v in estimate.bytes_total.items()}

    def reduce_loss(self, local: float) -> float:
        """Sum the per-rank shares over the model's ranks (each row counted once)."""
        return self.model.comm.allreduce_scalar(local)

    def evaluate(self) -> dict[str, float]:
        """Loss and accuracies without dropout (call under ``torch.no_grad``)."""
        m = self.model
        logits = m.logits(None)
        return {
            "loss": m.comm.allreduce_scalar(float(self._loss(logits))),
            **global_counts(m.comm, logits, m.y, m.masks),
        }


    def predictions(self) -> tuple[np.ndarray, torch.Tensor]:
        """This rank's scored rows of the logits (no dropout), once over all ranks."""
        m = self.model
        with torch.no_grad():
            logits = m.logits(None)
        return writer_rows(m.comm, self.world, m.row_ids, logits)

    def summary(
        self, result: TrainResult, measured: dict[str, float], phases: dict[str, float],
        tier_gbps: dict[str, float] | None,
    ) -> tuple[dict[str, float], dict[str, Any], list[str]]:
        """The model's cost prediction, input features and ``exchange`` section (partitioned)."""
        estimate = self.model.predict_cost()  # collective where the model needs global counts
        sections: dict[str, Any] = {
            "features": {"sparse": isinstance(self.model.x, SparseFeatures)}
        }
        if estimate is None:
            predicted = {}
        else:
            predicted = dict(estimate.bytes_total)
            sections["comm"] = {"predicted_busiest_rank_bytes": dict(estimate.bytes_max_rank)}
        exchange = self.model.exchange_report(measured, predicted, tier_gbps)
        if exchange is None:
            return predicted, sections, []
        return predicted, {**sections, "exchange": exchange}, [exchange_line(exchange)]

def train_fullbatch(model: GCNModel, cfg: TrainConfig) -> TrainResult:
    """Train ``model`` for ``cfg.epochs`` epochs with the one loop (no report, no files)."""
    world = model.grid.world if model.grid is not None else model.comm
    return run_epochs(FullBatchTrainer(model, cfg, world), cfg)
