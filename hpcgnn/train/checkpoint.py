"""Atomic checkpoints of replicated training state, and resuming from them.

A checkpoint holds the weights, the Adam state, the next epoch, the history so far, the
torch RNG state and a fingerprint of everything that must not change across a restart
(graph size, algorithm, grid, model and optimiser settings; the number of epochs may
grow). Rank 0 writes ``checkpoint.pt`` through a temporary file and a rename, so a crash
while writing leaves the previous checkpoint intact. On resume rank 0 reads it and
broadcasts it, so the directory need only be visible to rank 0.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.errors import ConfigError, InputError

FILENAME = "checkpoint.pt"


def save_checkpoint(
    directory: str | os.PathLike, *, epoch: int, weights: list[torch.Tensor],
    optimizer: torch.optim.Optimizer, history: list[dict], fingerprint: dict[str, Any],
) -> Path:
    """Write the state after ``epoch`` epochs (call on one rank only)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    state = {
        "epoch": epoch,
        "weights": [w.detach().clone() for w in weights],
        "optimizer": optimizer.state_dict(),
        "history": history,
        "fingerprint": fingerprint,
        "torch_rng": torch.get_rng_state(),
    }
    tmp = d / (FILENAME + ".tmp")
    with open(tmp, "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    final = d / FILENAME
    os.replace(tmp, final)
    return final


def load_checkpoint(directory: str | os.PathLike, comm: Comm, fingerprint: dict[str, Any]) -> dict:
    """Read a checkpoint on rank 0, broadcast it, and check it fits this run.

    Raises
    ------
    InputError
        If there is no readable checkpoint in ``directory`` (on every rank).
    ConfigError
        If the checkpoint was written by a run with other settings (on every rank).
    """
    state: dict | str | None = None
    if comm.rank == 0:
        path = Path(directory) / FILENAME
        try:
            with open(path, "rb") as fh:
                state = torch.load(fh, weights_only=False)
        except FileNotFoundError:
            state = f"no checkpoint at {path}"
        except Exception as err:  # a corrupt file, reported on every rank
            state = f"cannot read checkpoint {path}: {err}"
    state = comm.bcast_obj(state, root=0, category="checkpoint")
    if isinstance(state, str):
        raise InputError(state, collective=True)
    assert isinstance(state, dict)
    saved = state["fingerprint"]
    diff = sorted(k for k in set(saved) | set(fingerprint) if saved.get(k) != fingerprint.get(k))
    if diff:
        details = ", ".join(f"{k}: {saved.get(k)!r} -> {fingerprint.get(k)!r}" for k in diff)
        raise ConfigError(f"checkpoint in {directory} was written with other settings ({details})")
    return state


def restore(state: dict, weights: list[torch.Tensor], optimizer: torch.optim.Optimizer) -> None:
    """Copy checkpointed weights and optimiser state into this run's objects."""
    with torch.no_grad():
        for w, saved in zip(weights, state["weights"], strict=True):
            w.copy_(saved)
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
