"""Atomic, pickle-free checkpoints of replicated training state, and resuming from them.

A checkpoint directory holds two files, written by rank 0:

- ``checkpoint-e<E>.npz`` (``checkpoint.npz`` before per-epoch names): plain numeric
  arrays only (``w<i>`` the weights, ``exp_avg<i>``,
  ``exp_avg_sq<i>`` and ``step<i>`` the Adam state of weight ``i``, ``torch_rng`` the torch
  RNG state), read back with ``numpy.load(allow_pickle=False)``: nothing in it can run
  code. With ``--select-model best``, once an epoch was evaluated, ``w<i>`` are the kept
  weights of the best-validation epoch so far (the model: what ``hpcgnn predict`` and
  ``--finetune`` load) and ``train_w<i>`` the weights training continues from
  (``--resume``);
- ``checkpoint.json``: the format version, the epochs done (``epoch``: the number of the
  last, counted from 1 as everywhere the user sees one; the ``E`` of the file names), the
  history so far (records numbered from 1; version 1 numbered them from 0 and is still
  read, its numbers shifted), the fingerprint of everything that must not change across a
  restart (graph size and content, algorithm, grid, model and optimiser settings; the
  number of epochs may grow)
  and the SHA-256 of the ``.npz`` it belongs to. It is written last, so it commits the
  pair. The graph's content is its :func:`~hpcgnn.graph.check.check_graph` fingerprint
  (edges, features, labels, masks, node ids, partition), so a checkpoint of another graph
  of the same size is refused. It names its ``.npz`` (``arrays_file``); the arrays of an
  older epoch are removed only once the new manifest is in place, so a failure while
  writing (a full disk) leaves the previous pair as it was.

GIST's global model is row-sharded over the ranks (:mod:`hpcgnn.exchange.subnets`) and is
never gathered: its checkpoint (:func:`save_sharded_checkpoint`, manifest ``layout``
``"row-sharded"``) has one ``gist-e<E>-rank<r>-of<P>.npz`` per rank, written by that rank
and holding its rows of every weight and both Adam moments (``w<i>``, ``exp_avg<i>``,
``exp_avg_sq<i>``) and its ``torch_rng``; the manifest, written last by rank 0, adds the
Adam step count and each file's SHA-256 (no ``.npz`` of its own). On resume every rank
reads and validates the files that hold its rows (:func:`restore_sharded`: its own on as
many ranks; at another rank count, those of the old ranks whose rows overlap its own), so
the directory must be one that every rank sees, or node-local with the ranks placed on the
same nodes again. The
files of an older epoch are removed only once the new manifest is in place.

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
import re
import zipfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import torch

from hpcgnn.comm.collective import collective
from hpcgnn.comm.communicator import Comm
from hpcgnn.config import TrainConfig
from hpcgnn.errors import ConfigError, InputError
from hpcgnn.layout.order import layer_sizes, weight_shapes
from hpcgnn.utils.files import atomic_path, atomic_write, output_directory
from hpcgnn.utils.json_text import read_json
from hpcgnn.utils.text import printable

ARRAYS = "checkpoint.npz"
#: The arrays file of the checkpoint after epoch ``E`` (named by its manifest).
EPOCH_ARRAYS = "checkpoint-e{epoch}.npz"
_ARRAYS_NAME = re.compile(r"checkpoint(-e[0-9]+)?\.npz")
MANIFEST = "checkpoint.json"
LEGACY = "checkpoint.pt"
VERSION = 2
#: The format version whose history numbered the epochs from 0 (read, and shifted by one).
ZERO_BASED_VERSION = 1
HISTORY_KEYS = {"epoch", "loss", "train_acc", "val_acc", "time_s", "comm_s"}
#: Keys a history record may have besides (checkpoints written before them lack them).
OPTIONAL_HISTORY_KEYS = {"new_pages", "val_loss", "test_acc"}
#: The fingerprint's key of the graph's content fingerprint.
GRAPH_CONTENT = "graph_content"
#: The manifest's ``layout`` of a row-sharded (GIST) checkpoint; absent: replicated.
SHARDED = "row-sharded"
#: One rank's file of a row-sharded checkpoint.
SHARD_FILE = "gist-e{epoch}-rank{rank}-of{ranks}.npz"
#: The prefix of the weights training continues from, when ``w<i>`` are the kept ones.
TRAINING_WEIGHTS = "train_w"
#: Fingerprint keys added after checkpoints were first written, with the value a run that
#: predates them had (a checkpoint without the key was written with it).
ADDED_SETTINGS: dict[str, Any] = {"select_model": "last", "bias": False,
                                  "product_order": "auto", "loss": "ce"}
#: Array name prefixes of the three kinds a shard file holds, in GIST's order.
SHARD_KINDS = ("w", "exp_avg", "exp_avg_sq")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def save_checkpoint(
    directory: str | os.PathLike, *, epoch: int, weights: list[torch.Tensor],
    optimizer: torch.optim.Optimizer, history: list[dict], fingerprint: dict[str, Any],
    kept: list[torch.Tensor] | None = None,
) -> Path:
    """Write the state after ``epoch`` epochs (call on one rank only); returns the manifest.

    ``kept`` (``--select-model best``): the weights of the best-validation epoch so far,
    written as the model (``w<i>``), ``weights`` then as ``train_w<i>``.
    """
    with output_directory(directory) as d:
        arrays: dict[str, np.ndarray] = {"torch_rng": torch.get_rng_state().numpy()}
        state = optimizer.state_dict()["state"]
        for i, w in enumerate(weights):
            arrays[f"w{i}"] = w.detach().cpu().numpy()
            if kept is not None:
                arrays[f"{TRAINING_WEIGHTS}{i}"] = arrays[f"w{i}"]
                arrays[f"w{i}"] = kept[i].detach().cpu().numpy()
            s = state.get(i, {})
            if s:
                arrays[f"exp_avg{i}"] = s["exp_avg"].detach().cpu().numpy()
                arrays[f"exp_avg_sq{i}"] = s["exp_avg_sq"].detach().cpu().numpy()
                arrays[f"step{i}"] = np.asarray(float(s["step"]), dtype=np.float64)
        buf = io.BytesIO()
        # numpy's stubs: a ``**`` of arrays might name ``allow_pickle``
        np.savez(buf, **arrays)  # type: ignore[arg-type]
        blob = buf.getvalue()
        name = EPOCH_ARRAYS.format(epoch=int(epoch))
        atomic_write(d / name, blob, "--checkpoint-dir")
        manifest = {
            "format": "hpcgnn-checkpoint", "version": VERSION, "epoch": int(epoch),
            "num_weights": len(weights), "history": history, "fingerprint": fingerprint,
            "arrays_file": name, "arrays_sha256": hashlib.sha256(blob).hexdigest(),
        }
        try:
            atomic_write(d / MANIFEST, json.dumps(manifest, indent=1) + "\n", "--checkpoint-dir")
        except BaseException:
            with suppress(OSError):
                (d / name).unlink()  # the previous manifest still names its own arrays
            raise
    # the new manifest is in place: arrays of other epochs are garbage now
    for old in [*d.glob(EPOCH_ARRAYS.format(epoch="*")), d / ARRAYS]:
        if old.name != name:
            with suppress(OSError):
                old.unlink()
    return d / MANIFEST


def _read(directory: Path, max_bytes: int | None = None) -> dict[str, Any]:
    """Read and check the pair of files (rank 0); raise ``ValueError`` with the reason.

    ``max_bytes``: what the arrays may inflate to (this run's model and optimiser state).
    """
    manifest_path = directory / MANIFEST
    if not manifest_path.exists():
        if (directory / LEGACY).exists():
            raise ValueError(
                f"{directory / LEGACY} is a pickle checkpoint of an older version; it is not"
                " loaded (pickles can run code): restart the run to write a safe checkpoint"
            )
        raise FileNotFoundError(f"no checkpoint at {manifest_path}")
    manifest = read_json(manifest_path)
    if not isinstance(manifest, dict) or manifest.get("format") != "hpcgnn-checkpoint":
        raise ValueError(f"{manifest_path} is not an hpcgnn checkpoint manifest")
    if manifest.get("version") not in (ZERO_BASED_VERSION, VERSION):
        raise ValueError(f"{manifest_path} has format version {manifest.get('version')!r}")
    for key, kind in (("epoch", int), ("num_weights", int), ("history", list),
                      ("fingerprint", dict)):
        if not isinstance(manifest.get(key), kind) or isinstance(manifest.get(key), bool):
            raise ValueError(f"{manifest_path}: field {key!r} is missing or not a {kind.__name__}")
    if manifest["epoch"] < 1:
        raise ValueError(f"{manifest_path}: field 'epoch' is {manifest['epoch']}, expected >= 1")
    layout = manifest.get("layout")
    arrays: dict[str, np.ndarray] | None = None
    if layout == SHARDED:
        _check_sharded(manifest, manifest_path)
    elif layout is not None:
        raise ValueError(f"{manifest_path}: unknown layout {layout!r}")
    else:
        arrays_name = manifest.get("arrays_file", ARRAYS)
        if not isinstance(arrays_name, str) or not _ARRAYS_NAME.fullmatch(arrays_name):
            raise ValueError(f"{manifest_path}: field 'arrays_file' is not a checkpoint-e<E>.npz")
        arrays_path = directory / arrays_name
        _check_regular(arrays_path)
        blob = arrays_path.read_bytes()
        if hashlib.sha256(blob).hexdigest() != manifest.get("arrays_sha256"):
            raise ValueError(f"{arrays_path} does not belong to {manifest_path} (checksum differs)")
        arrays = _load_arrays(arrays_path, blob, max_bytes)
    return {**manifest, "history": _history(manifest, manifest_path), "arrays": arrays}


def _history(manifest: dict[str, Any], where: Path) -> list[dict[str, Any]]:
    """The manifest's history, checked, with its epochs numbered from 1."""
    history = manifest["history"]
    first = 0 if manifest["version"] == ZERO_BASED_VERSION else 1
    if len(history) != manifest["epoch"] or not all(
        isinstance(rec, dict) and HISTORY_KEYS <= set(rec) <= HISTORY_KEYS | OPTIONAL_HISTORY_KEYS
        and rec["epoch"] == first + k and all(_is_number(v) or v is None for v in rec.values())
        for k, rec in enumerate(history)
    ):
        raise ValueError(f"{where}: the history does not hold one record per epoch, of numbers")
    return [{**rec, "epoch": rec["epoch"] + 1 - first} for rec in history]


def _check_regular(path: Path) -> None:
    """Refuse a path that exists and is no regular file (a pipe would block the read)."""
    if path.exists() and not path.is_file():
        raise ValueError(f"{path} is not a regular file (a directory, pipe or device)")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _load_arrays(path: Path, blob: bytes, max_bytes: int | None) -> dict[str, np.ndarray]:
    """The ``.npy`` members of the archive ``blob``.

    Other members are refused, and so, before anything is inflated, members that inflate
    beyond ``max_bytes`` in all.
    """
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        infos = z.infolist()
        bad = [i.filename for i in infos if not i.filename.endswith(".npy")]
        if bad:
            raise ValueError(f"{path}: member {bad[0]!r} is not a .npy array")
        inflated = sum(i.file_size for i in infos)
        if max_bytes is not None and inflated > max_bytes:
            raise ValueError(f"{path}: its arrays inflate to {inflated} bytes, more than this"
                             f" run's model and optimiser state ({max_bytes} bytes at most)")
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    for name, value in arrays.items():
        if not isinstance(value, np.ndarray):  # NumPy hands a member without the magic as bytes
            raise ValueError(f"{path}: member {name!r} is not a .npy array")
    return arrays


def state_bytes_bound(num_features: int, num_classes: int, cfg: TrainConfig) -> int:
    """At most what a replicated checkpoint of this model holds.

    Every weight and bias twice (``--select-model best`` keeps a copy) with Adam's two
    moments in float64, plus 1 MiB (the random state, step counts, headers).
    """
    widths = layer_sizes(num_features, cfg.hidden, num_classes, cfg.layers)
    params = sum(fin * fout for fin, fout in weight_shapes(widths, cfg.kind)) + sum(widths[1:])
    return 4 * 8 * params + (1 << 20)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_sharded(manifest: dict[str, Any], where: Path) -> None:
    """The fields of a row-sharded manifest (``ValueError`` with the reason)."""
    ranks, step = manifest.get("ranks"), manifest.get("adam_step")
    if not (_is_int(ranks) and ranks >= 1):
        raise ValueError(f"{where}: field 'ranks' is missing or not a positive int")
    if not (_is_int(step) and step >= 0):
        raise ValueError(f"{where}: field 'adam_step' is missing or not an int >= 0")
    shards = manifest.get("shards")
    if not isinstance(shards, list) or len(shards) != ranks:
        raise ValueError(f"{where}: field 'shards' does not list one file per rank ({ranks})")
    for r, entry in enumerate(shards):
        name = SHARD_FILE.format(epoch=manifest["epoch"], rank=r, ranks=ranks)
        if (
            not isinstance(entry, dict) or set(entry) != {"file", "sha256"}
            or entry["file"] != name or not isinstance(entry["sha256"], str)
            or not _SHA256.fullmatch(entry["sha256"])
        ):
            raise ValueError(f"{where}: the entry of rank {r} in 'shards' is not {{file: {name!r},"
                             " sha256: 64 hex digits}")


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def save_sharded_checkpoint(
    directory: str | os.PathLike, comm: Comm, *, epoch: int, shards: list[list[np.ndarray]],
    adam_step: int, history: list[dict], fingerprint: dict[str, Any],
) -> Path:
    """Write a row-sharded model after ``epoch`` epochs (collective); returns the manifest.

    Parameters
    ----------
    directory
        The ``--checkpoint-dir`` (every rank writes its own file there).
    comm
        The shards' owners.
    epoch
        Epochs (GIST rounds) done.
    shards
        ``shards[k][l]``: this rank's rows of kind ``SHARD_KINDS[k]`` of ``W^{l+1}``.
    adam_step
        Adam's step count after ``epoch`` epochs.
    history, fingerprint
        As for :func:`save_checkpoint`.
    """
    d = Path(directory)
    name = SHARD_FILE.format(epoch=epoch, rank=comm.rank, ranks=comm.size)
    digest = ""
    with collective(comm):
        arrays = {"torch_rng": torch.get_rng_state().numpy()}
        for prefix, kind in zip(SHARD_KINDS, shards, strict=True):
            for i, a in enumerate(kind):
                arrays[f"{prefix}{i}"] = a
        with atomic_path(d / name, "--checkpoint-dir") as tmp:
            with open(tmp, "wb") as fh:  # streamed: no copy of the rows in memory
                # numpy's stubs: a ``**`` of arrays might name ``allow_pickle``
                np.savez(fh, **arrays)  # type: ignore[arg-type]
            digest = _file_sha256(tmp)
    digests = comm.gather_obj(digest, 0, "checkpoint")
    with collective(comm):
        if comm.rank == 0:
            assert digests is not None
            manifest = {
                "format": "hpcgnn-checkpoint", "version": VERSION, "epoch": int(epoch),
                "num_weights": len(shards[0]), "history": history, "fingerprint": fingerprint,
                "layout": SHARDED, "ranks": comm.size, "adam_step": int(adam_step),
                "shards": [
                    {"file": SHARD_FILE.format(epoch=epoch, rank=r, ranks=comm.size),
                     "sha256": h}
                    for r, h in enumerate(digests)
                ],
            }
            atomic_write(d / MANIFEST, json.dumps(manifest, indent=1) + "\n", "--checkpoint-dir")
    # the new manifest is in place: this rank's files of earlier epochs are garbage now
    for old in d.glob(SHARD_FILE.format(epoch="*", rank=comm.rank, ranks=comm.size)):
        if old.name != name:
            with suppress(OSError):
                old.unlink()
    return d / MANIFEST


#: ``offsets_of(shapes, ranks)``: each row-sharded weight's row offsets over ``ranks`` ranks.
RowOffsets = Callable[[Sequence[tuple[int, ...]], int], list[np.ndarray]]


def restore_sharded(
    state: dict, directory: str | os.PathLike, comm: Comm, shapes: Sequence[tuple[int, ...]],
    vectors: Sequence[tuple[int, ...]], dtype: np.dtype, offsets_of: RowOffsets,
) -> list[list[np.ndarray]]:
    """This rank's rows of a row-sharded checkpoint, from the files that hold them (collective).

    ``state`` comes from :func:`load_checkpoint`; ``shapes[l]`` is the global shape of
    ``W^{l+1}``, whose rows ``offsets_of(shapes, P)`` splits over ``P`` ranks, and
    ``vectors`` the shapes of the replicated arrays saved after them (e.g. biases; every
    file holds them whole). The checkpoint may come from any number of ranks: this rank
    reads the files of the old ranks whose rows overlap its own (on as many ranks, its own
    file alone), validated one at a time, and takes the replicated arrays and the torch
    RNG state from the first (its own rank's where it reads that). Returns ``out[k][l]``
    (kind ``SHARD_KINDS[k]``: its rows of each weight, then the vectors). Any problem on
    any rank is one :class:`InputError` on every rank (the lowest failing rank's line).
    """
    where = f"checkpoint in {directory}"
    if state.get("layout") != SHARDED:
        raise InputError(
            f"{where} holds a replicated model, not a row-sharded (GIST) one", collective=True
        )
    count = len(shapes) + len(vectors)
    if state["num_weights"] != count:
        raise InputError(
            f"{where} holds {state['num_weights']} arrays of each kind; this run has {count}",
            collective=True,
        )
    old, me = int(state["ranks"]), comm.rank
    mine = [(int(o[me]), int(o[me + 1])) for o in offsets_of(shapes, comm.size)]
    theirs = offsets_of(shapes, old)
    sources = [r for r in range(old) if any(
        int(o[r]) < hi and int(o[r + 1]) > lo for o, (lo, hi) in zip(theirs, mine, strict=True)
    )] or [min(me, old - 1)]
    if me in sources:  # its own file first: its RNG state, as a run on as many ranks
        sources.remove(me)
        sources.insert(0, me)
    itemsize = np.dtype(dtype).itemsize
    out = [[np.empty((hi - lo, int(s[1])), dtype=dtype) for s, (lo, hi) in
            zip(shapes, mine, strict=True)] for _ in SHARD_KINDS]
    with collective(comm):
        for n, r in enumerate(sources):
            rows = [(int(o[r]), int(o[r + 1])) for o in theirs]
            saved = [(b - a, int(s[1])) for s, (a, b) in zip(shapes, rows, strict=True)]
            path, arrays = _shard_file(directory, state, r, [*saved, *vectors], itemsize)
            for k, prefix in enumerate(SHARD_KINDS):
                for i, shape in enumerate([*saved, *vectors]):
                    key = f"{prefix}{i}"
                    a = arrays.get(key)
                    if a is None:
                        raise InputError(f"{path}: array {key!r} is missing")
                    if a.shape != tuple(shape) or a.dtype != dtype:
                        raise InputError(
                            f"{path}: array {key!r} is {a.dtype}{list(a.shape)}, this run needs"
                            f" {np.dtype(dtype)}{list(shape)}"
                        )
                    if not np.isfinite(a).all() or (prefix == "exp_avg_sq" and (a < 0).any()):
                        raise InputError(f"{path}: array {key!r} has values Adam cannot hold")
                    if i >= len(shapes):  # a replicated array: the first file's
                        if n == 0:
                            out[k].append(a)
                        continue
                    (lo, hi), (a_lo, a_hi) = mine[i], rows[i]
                    top, bottom = max(lo, a_lo), min(hi, a_hi)
                    if top < bottom:
                        out[k][i][top - lo : bottom - lo] = a[top - a_lo : bottom - a_lo]
            if n == 0:
                rng = arrays.get("torch_rng")
                if rng is None or rng.dtype != np.uint8 or rng.ndim != 1:
                    raise InputError(f"{path}: array 'torch_rng' is missing or not uint8[n]")
                try:
                    torch.set_rng_state(torch.from_numpy(rng.copy()))
                except RuntimeError as err:
                    raise InputError(f"{path}: array 'torch_rng' is not a torch RNG state") from err
            del arrays
    return out


def _shard_file(
    directory: str | os.PathLike, state: dict, rank: int, shapes: Sequence[tuple[int, ...]],
    itemsize: int,
) -> tuple[Path, dict[str, np.ndarray]]:
    """The arrays of old rank ``rank``'s file, its checksum checked (``InputError``).

    ``shapes``: the arrays of each kind the file should hold (a bound on what it may
    inflate to).
    """
    entry = state["shards"][rank]
    path = Path(directory) / entry["file"]
    if not path.is_file():
        raise InputError(f"checkpoint in {directory}: the file of rank {rank}, {path.name},"
                         " is missing")
    if _file_sha256(path) != entry["sha256"]:
        raise InputError(f"{path} does not belong to {Path(directory) / MANIFEST}"
                         " (checksum differs)")
    bound = len(SHARD_KINDS) * itemsize * sum(int(np.prod(s)) for s in shapes) + (1 << 20)
    try:
        return path, _load_arrays(path, path.read_bytes(), bound)
    except Exception as err:  # a corrupt or hostile file
        raise InputError(f"cannot read checkpoint file {path}: {err}") from err


#: What a checkpoint records of the layout it was trained on (see ``elastic`` of
#: :func:`load_checkpoint`); the product order, like the layout, changes only the order of
#: the sums.
LAYOUT = ("algo", "grid", "product_order")
#: What a GIST checkpoint records of its groups' layout: it binds unless both runs' groups
#: run elastic layouts (full-batch groups; a sampled group's steps depend on its ranks).
GROUP_LAYOUT = ("group_algo", "group_grid")


def load_checkpoint(
    directory: str | os.PathLike, comm: Comm, fingerprint: dict[str, Any] | None,
    epochs: int | None,
    ignore: tuple[str, ...] = (), max_bytes: int | None = None,
    elastic: frozenset[str] = frozenset(),
) -> dict:
    """Read a checkpoint on rank 0, broadcast it, and check it fits this run (collective).

    Parameters
    ----------
    directory
        The ``--resume`` directory.
    comm
        All ranks.
    fingerprint
        This run's settings; they must equal the checkpoint's. ``None``: any settings
        (``--finetune`` takes the weights alone; their shapes are checked as they are
        copied).
    epochs
        This run's ``--epochs``; the checkpoint's epoch must leave something to train.
        ``None``: the model is not trained further (``hpcgnn predict``).
    ignore
        Settings that need not match (``hpcgnn predict``: the optimiser's).
    max_bytes
        What a replicated checkpoint's arrays may inflate to (a bound of this run's model
        and Adam state): a crafted archive is refused before it is inflated.
    elastic
        The ``algo`` labels whose checkpoints resume on one another's layouts at any rank
        count: between two of them, :data:`LAYOUT` need not match; between two GIST runs
        whose groups run one of them, the grid and :data:`GROUP_LAYOUT` need not (its
        rows are re-split as they are read, :func:`restore_sharded`).

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
            state = _read(Path(directory), max_bytes)
        except FileNotFoundError as err:
            state = str(err) if str(err).startswith("no checkpoint") else f"no checkpoint: {err}"
        except Exception as err:  # a corrupt or hostile file, reported on every rank
            state = f"cannot read checkpoint in {directory}: {err}"
    state = comm.bcast_obj(state, root=0, category="checkpoint")
    if isinstance(state, str):
        raise InputError(state, collective=True)
    assert isinstance(state, dict)
    if fingerprint is None:
        return state
    saved = {**ADDED_SETTINGS, **state["fingerprint"]}
    theirs, ours = saved.get(GRAPH_CONTENT), fingerprint.get(GRAPH_CONTENT)
    if theirs != ours:
        raise ConfigError(
            f"checkpoint in {directory} was written for a graph with other content"
            f" (graph content {theirs}; this graph's is {ours})"
        )
    if saved.get("algo") in elastic and fingerprint.get("algo") in elastic:
        ignore = (*ignore, *LAYOUT)
    if saved.get("group_algo") in elastic and fingerprint.get("group_algo") in elastic:
        ignore = (*ignore, "grid", *GROUP_LAYOUT)  # GIST: rows re-split as they are read
    diff = sorted(
        k for k in set(saved) | set(fingerprint)
        if saved.get(k) != fingerprint.get(k) and k not in ignore
    )
    if diff:
        details = printable(  # the keys are the file's: data, never printed raw
            ", ".join(f"{k}: {saved.get(k)!r} -> {fingerprint.get(k)!r}" for k in diff))
        raise ConfigError(f"checkpoint in {directory} was written with other settings ({details})")
    if epochs is not None and not 1 <= state["epoch"] < epochs:
        raise ConfigError(
            f"checkpoint in {directory} is after epoch {state['epoch']}: with --epochs {epochs}"
            " nothing is left to train"
        )
    return state


def _array(arrays: dict[str, np.ndarray], name: str, like: torch.Tensor | None,
           dtype: Any = None) -> np.ndarray:
    """The checkpoint's array ``name``, of ``like``'s shape and dtype (or ``dtype``)."""
    where = "checkpoint"
    a = arrays.get(name)
    if a is None:
        raise InputError(f"{where}: array {name!r} is missing", collective=True)
    want_shape = tuple(like.shape) if like is not None else a.shape
    if dtype is None:  # the weight's (which may live on a GPU)
        assert like is not None, "an array without a weight to match names its dtype"
        dtype = torch.empty(0, dtype=like.dtype).numpy().dtype
    want_dtype = np.dtype(dtype)
    if a.shape != want_shape or a.dtype != want_dtype:
        raise InputError(
            f"{where}: array {name!r} is {a.dtype}{list(a.shape)}, this run needs"
            f" {want_dtype}{list(want_shape)}", collective=True,
        )
    return a


def _replicated_arrays(state: dict, weights: list[torch.Tensor]) -> dict[str, np.ndarray]:
    arrays = state["arrays"]
    if arrays is None:
        raise InputError(
            "checkpoint holds a row-sharded (GIST) model, not a replicated one", collective=True
        )
    if state["num_weights"] != len(weights):
        raise InputError(
            f"checkpoint holds {state['num_weights']} weights, this run has {len(weights)}",
            collective=True,
        )
    return arrays


def restore_weights(state: dict, weights: list[torch.Tensor]) -> None:
    """Copy the checkpoint's weights into ``weights`` (``--finetune``: nothing else).

    Raises
    ------
    InputError
        If a weight is missing or has another shape or dtype (every rank).
    """
    copy_weights(weights, _checked_weights(_replicated_arrays(state, weights), weights))


def _checked_weights(arrays: dict[str, np.ndarray], weights: list[torch.Tensor],
                     prefix: str = "w") -> list[np.ndarray]:
    """The arrays ``w<i>`` (``<prefix><i>``), each of its weight's shape and dtype."""
    return [_array(arrays, f"{prefix}{i}", w.detach()) for i, w in enumerate(weights)]


def copy_weights(weights: list[torch.Tensor], saved: list[np.ndarray]) -> None:
    """Copy the arrays ``saved`` (already checked) into ``weights``, in place."""
    with torch.no_grad():
        for w, a in zip(weights, saved, strict=True):
            w.copy_(torch.from_numpy(a))


def restore(
    state: dict, weights: list[torch.Tensor], optimizer: torch.optim.Optimizer,
    resume: bool = False,
) -> list[np.ndarray] | None:
    """Validate the checkpointed arrays against this run, then copy them in (every rank).

    ``resume`` (``--select-model best`` resumed): training continues from ``train_w<i>``
    where the checkpoint holds them; the kept weights ``w<i>`` are returned (``None``: it
    kept none, the weights are ``w<i>``). Otherwise ``weights`` become the model's, ``w<i>``.

    Raises
    ------
    InputError
        If an array is missing or has another shape or dtype than this run's (every rank
        holds the same broadcast state, so every rank raises the same error).
    """
    arrays, where = _replicated_arrays(state, weights), "checkpoint"
    saved = _checked_weights(arrays, weights)  # every array checked before anything is copied
    kept = None
    if resume and f"{TRAINING_WEIGHTS}0" in arrays:
        kept = saved
        saved = _checked_weights(arrays, weights, TRAINING_WEIGHTS)
    opt_state = {}
    for i, w in enumerate(weights):
        if f"step{i}" in arrays:
            like = w.detach()
            step_array = _array(arrays, f"step{i}", None, np.float64)
            if step_array.shape != ():
                raise InputError(f"{where}: Adam step of weight {i} has shape"
                                 f" {list(step_array.shape)}, not a number", collective=True)
            step = float(step_array)
            if not (np.isfinite(step) and step >= 1):
                raise InputError(f"{where}: Adam step of weight {i} is {step}", collective=True)
            opt_state[i] = {
                "step": torch.tensor(step, dtype=torch.float32),
                "exp_avg": torch.from_numpy(_array(arrays, f"exp_avg{i}", like).copy()),
                "exp_avg_sq": torch.from_numpy(_array(arrays, f"exp_avg_sq{i}", like).copy()),
            }
    rng = _array(arrays, "torch_rng", None, np.uint8)
    want_rng = torch.get_rng_state().numel()
    if rng.shape != (want_rng,):
        raise InputError(f"{where}: the random state holds {rng.size} bytes, this torch's"
                         f" {want_rng}", collective=True)
    copy_weights(weights, saved)
    groups = optimizer.state_dict()["param_groups"]
    optimizer.load_state_dict({"state": opt_state, "param_groups": groups})
    torch.set_rng_state(torch.from_numpy(rng.copy()))
    return kept
