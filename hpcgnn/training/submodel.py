"""How GIST hands a sub-model to a group's trainer and takes it back.

A group trainer (full-batch or minibatch) is built once per run; every round GIST
:meth:`~SubModelHost.load` s the group's sub-model into it (weights, Adam's moments and
step count, the sub-network whose dropout masks it uses), lets it
:meth:`~SubModelHost.train` ``K`` local iterations and :meth:`~SubModelHost.unload` s the
trained tensors. Between rounds the model holds empty weights, so only the round's
sub-model occupies the device.
"""

from __future__ import annotations

from typing import Any

import torch

from hpcgnn.config import TrainConfig
from hpcgnn.layout.subnets import Subnet
from hpcgnn.nn.optim import make_optimizer

#: The tensors of a sub-model in the model's order: weights, Adam's ``exp_avg``, ``exp_avg_sq``.
SubModel = tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]


class SubModelHost:
    """``load``, ``train`` and ``unload`` of a trainer that trains injected sub-models.

    The trainer provides ``weights`` (the list its model computes with, filled in place),
    ``optimizer``, ``cfg``, ``subnet``, ``first_layer`` and :meth:`train`.
    """

    #: Parameters of the first layer, leading in ``weights`` (``--weight-decay-layers``).
    first_layer: int
    weights: list[torch.Tensor]
    optimizer: torch.optim.Optimizer
    cfg: TrainConfig
    subnet: Subnet | None
    #: Optimizer steps the loaded sub-model has had (the round's first local iteration).
    steps_done: int = 0

    def load(
        self, params: list[torch.Tensor], moments: tuple[list[torch.Tensor], list[torch.Tensor]],
        step: int, subnet: Subnet,
    ) -> None:
        """Train ``params`` next, with Adam's ``moments`` after ``step`` steps.

        ``params`` are leaves requiring gradients, in the model's order; they are trained
        in place (on the CPU they may share memory with the caller's buffers). ``subnet``:
        the dropout masks are the global model's at its column ids.
        """
        self.weights[:] = params
        opt = make_optimizer(self.weights, self.cfg, self.first_layer)
        opt.state.update({
            w: {
                "step": torch.tensor(float(step), dtype=torch.float32),
                "exp_avg": m1, "exp_avg_sq": m2,
            }
            for w, m1, m2 in zip(self.weights, *moments, strict=True)
        })
        self.optimizer, self.subnet, self.steps_done = opt, subnet, step

    def train(self, k: int) -> float:
        """``K`` optimizer steps; this rank's share of the group's mean loss over them.

        The shares sum over the group's ranks to the group's loss.
        """
        raise NotImplementedError

    def predicted_bytes(self, steps: int, rounds: int) -> dict[str, float]:
        """The model's predicted bytes per round, summed over its ranks (collective).

        ``steps``: the local iterations of a round; ``rounds``: the rounds this process ran.
        """
        raise NotImplementedError

    def sampling_section(self) -> dict[str, Any] | None:
        """A sampled group's sampler, batches and epochs in GIST's section, else ``None``."""
        return None

    def unload(self) -> SubModel:
        """The trained weights and moments; the model keeps empty weights until the next load."""
        states = [self.optimizer.state[w] for w in self.weights]
        out = (
            list(self.weights), [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states]
        )
        self.release()
        return out

    def release(self) -> None:
        """Empty weights in the model (and an optimizer of them) instead of a sub-model."""
        idle = [
            torch.empty(0, dtype=w.dtype, device=w.device).requires_grad_(True)
            for w in self.weights
        ]
        self.weights[:] = idle
        self.optimizer = make_optimizer(idle, self.cfg, self.first_layer)
