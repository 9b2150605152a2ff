"""Atomic, pickle-free checkpoints of replicated training state, and resuming from them.

A checkpoint directory holds two files, written by rank 0:

- ``checkpoint.npz``: plain numeric arrays only (``w<i>`` the weights, ``exp_avg<i>``,
  ``exp_avg_sq<i>`` and ``step<i>`` the Adam state of weight ``i``, ``torch_rng`` the torch
  RNG state), read back with ``numpy.load(allow_pickle=False)``: nothing in it can run
  code;
- ``checkpoint.json``: the format version, the next epoch, the history so far, the
  fingerprint of everything that must not change across a restart (graph size and
  content, algorithm, grid, model and optimiser settings; the number of epochs may grow)
  and the SHA-256 of the ``.npz`` it belongs to. It is written last, so it commits the
  pair. The graph's content is its :func:`~hpcgnn.graph.check.check_graph` fingerprint
  (edges, features, labels, masks, node ids, partition), so a checkpoint of another graph
  of the same size is refused.

Both go through :func:`hpcgnn.utils.files.atomic_write` (a fresh temporary file,
``fsync``, a rename), so a crash while writing leaves
the previous checkpoint intact. On resume rank 0 reads and validates every field (names,
shapes, dtypes, ranges) before anything is used, and broadcasts the state or the one-line
reason it is refused, so the directory need only be visible to rank 0. Checkpoints of the
former pickle format (``checkpoint.pt``) are refused, never loaded.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.errors import ConfigError, InputError
from hpcgnn.utils.files import atomic_write

ARRAYS = "checkpoint.npz"
MANIFEST = "checkpoint.json"
LEGACY = "checkpoint.pt"
VERSION = 1
HISTORY_KEYS = {"epoch", "loss", "train_acc", "val_acc", "time_s", "comm_s"}
#: The fingerprint's key of the graph's content fingerprint.
GRAPH_CONTENT = "graph_content"


def save_checkpoint(
    directory: str | os.PathLike, *, epoch: int, weights: list[torch.Tensor],
    optimizer: torch.optim.Optimizer, history: list[dict], fingerprint: dict[str, Any],
) -> Path:
    """Write the state after ``epoch`` epochs (call on one rank only); returns the manifest."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {"torch_rng": torch.get_rng_state().numpy()}
    state = optimizer.state_dict()["state"]
    for i, w in enumerate(weights):
        arrays[f"w{i}"] = w.detach().cpu().numpy()
        s = state.get(i, {})
        if s:
            arrays[f"exp_avg{i}"] = s["exp_avg"].detach().cpu().numpy()
            arrays[f"exp_avg_sq{i}"] = s["exp_avg_sq"].detach().cpu().numpy()
            arrays[f"step{i}"] = np.asarray(float(s["step"]), dtype=np.float64)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    blob = buf.getvalue()
    atomic_write(d / ARRAYS, blob, "--checkpoint-dir")
    manifest = {
        "format": "hpcgnn-checkpoint", "version": VERSION, "epoch": int(epoch),
        "num_weights": len(weights), "history": history, "fingerprint": fingerprint,
        "arrays_sha256": hashlib.sha256(blob).hexdigest(),
    }
    atomic_write(d / MANIFEST, json.dumps(manifest, indent=1) + "\n", "--checkpoint-dir")
    return d / MANIFEST


def _read(directory: Path) -> dict[str, Any]:
    """Read and check the pair of files (rank 0); raise ``ValueError`` with the reason."""
    manifest_path, arrays_path = directory / MANIFEST, directory / ARRAYS
    if not manifest_path.exists():
        if (directory / LEGACY).exists():
            raise ValueError(
                f"{directory / LEGACY} is a pickle checkpoint of an older version; it is not"
                " loaded (pickles can run code): restart the run to write a safe checkpoint"
            )
        raise FileNotFoundError(f"no checkpoint at {manifest_path}")
    manifest = json.loads(manifest_path.read_text())
    if not isinstance(manifest, dict) or manifest.get("format") != "hpcgnn-checkpoint":
        raise ValueError(f"{manifest_path} is not an hpcgnn checkpoint manifest")
    if manifest.get("version") != VERSION:
        raise ValueError(f"{manifest_path} has format version {manifest.get('version')!r}")
    blob = arrays_path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != manifest.get("arrays_sha256"):
        raise ValueError(f"{arrays_path} does not belong to {manifest_path} (checksum differs)")
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    for key, kind in (("epoch", int), ("num_weights", int), ("history", list),
                      ("fingerprint", dict)):
        if not isinstance(manifest.get(key), kind) or isinstance(manifest.get(key), bool):
            raise ValueError(f"{manifest_path}: field {key!r} is missing or not a {kind.__name__}")
    if manifest["epoch"] < 1:
        raise ValueError(f"{manifest_path}: field 'epoch' is {manifest['epoch']}, expected >= 1")
    history = manifest["history"]
    if len(history) != manifest["epoch"] or not all(
        isinstance(rec, dict) and set(rec) == HISTORY_KEYS for rec in history
    ):
        raise ValueError(f"{manifest_path}: the history does not hold one record per epoch")
    return {**manifest, "arrays": arrays}


def load_checkpoint(
    directory: str | os.PathLike, comm: Comm, fingerprint: dict[str, Any], epochs: int
) -> dict:
    """Read a checkpoint on rank 0, broadcast it, and check it fits this run (collective).

    Parameters
    ----------
    directory
        The ``--resume`` directory.
    comm
        All ranks.
    fingerprint
        This run's settings; they must equal the checkpoint's.
    epochs
        This run's ``--epochs``; the checkpoint's epoch must leave something to train.

    Raises
    ------
    InputError
        If there is no readable, well-formed checkpoint in ``directory`` (on every rank).
    ConfigError
        If it was written for a graph of other content or by a run with other settings, or
        nothing is left to train.
    """
    state: dict | str | None = None
    if comm.rank == 0:
        try:
            state = _read(Path(directory))
        except FileNotFoundError as err:
            state = str(err) if str(err).startswith("no checkpoint") else f"no checkpoint: {err}"
        except Exception as err:  # a corrupt or hostile file, reported on every rank
            state = f"cannot read checkpoint in {directory}: {err}"
    state = comm.bcast_obj(state, root=0, category="checkpoint")
    if isinstance(state, str):
        raise InputError(state, collective=True)
    assert isinstance(state, dict)
    saved = state["fingerprint"]
    theirs, ours = saved.get(GRAPH_CONTENT), fingerprint.get(GRAPH_CONTENT)
    if theirs != ours:
        raise ConfigError(
            f"checkpoint in {directory} was written for a graph with other content"
            f" (graph content {theirs}; this graph's is {ours})"
        )
    diff = sorted(k for k in set(saved) | set(fingerprint) if saved.get(k) != fingerprint.get(k))
    if diff:
        details = ", ".join(f"{k}: {saved.get(k)!r} -> {fingerprint.get(k)!r}" for k in diff)
        raise ConfigError(f"checkpoint in {directory} was written with other settings ({details})")
    if not 1 <= state["epoch"] < epochs:
        raise ConfigError(
            f"checkpoint in {directory} is after epoch {state['epoch']}: with --epochs {epochs}"
            " nothing is left to train"
        )
    return state


def restore(state: dict, weights: list[torch.Tensor], optimizer: torch.optim.Optimizer) -> None:
    """Validate the checkpointed arrays against this run, then copy them in (every rank).

    Raises
    ------
    InputError
        If an array is missing or has another shape or dtype than this run's (every rank
        holds the same broadcast state, so every rank raises the same error).
    """
    arrays, where = state["arrays"], "checkpoint"

    def array(name: str, like: torch.Tensor | None, dtype: Any = None) -> np.ndarray:
        a = arrays.get(name)
        if a is None:
            raise InputError(f"{where}: array {name!r} is missing", collective=True)
        want_shape = tuple(like.shape) if like is not None else a.shape
        want_dtype = np.dtype(dtype) if dtype is not None else like.numpy().dtype
        if a.shape != want_shape or a.dtype != want_dtype:
            raise InputError(
                f"{where}: array {name!r} is {a.dtype}{list(a.shape)}, this run needs"
                f" {want_dtype}{list(want_shape)}", collective=True,
            )
        return a

    if state["num_weights"] != len(weights):
        raise InputError(
            f"{where} holds {state['num_weights']} weights, this run has {len(weights)}",
            collective=True,
        )
    opt_state = {}
    new_weights = [array(f"w{i}", w.detach()) for i, w in enumerate(weights)]
    for i, w in enumerate(weights):
        if f"step{i}" in arrays:
            like = w.detach()
            step = float(array(f"step{i}", None, np.float64))
            if not (np.isfinite(step) and step >= 1):
                raise InputError(f"{where}: Adam step of weight {i} is {step}", collective=True)
            opt_state[i] = {
                "step": torch.tensor(step, dtype=torch.float32),
                "exp_avg": torch.from_numpy(array(f"exp_avg{i}", like).copy()),
                "exp_avg_sq": torch.from_numpy(array(f"exp_avg_sq{i}", like).copy()),
            }
    rng = array("torch_rng", None, np.uint8)
    with torch.no_grad():
        for w, saved in zip(weights, new_weights, strict=True):
            w.copy_(torch.from_numpy(saved))
    groups = optimizer.state_dict()["param_groups"]
    optimizer.load_state_dict({"state": opt_state, "param_groups": groups})
    torch.set_rng_state(torch.from_numpy(rng.copy()))
