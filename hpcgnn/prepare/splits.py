"""Train/validation/test masks: given, seeded random or per-class splits, a file of masks.

``--split`` of ``prepare pyg``, ``npz`` and ``edgelist`` (:class:`SplitSpec`):

- ``given``: the masks the input holds (``train_mask``, ``val_mask``, ``test_mask``);
- ``per-class``: Planetoid's way (Yang et al. 2016; PyG's ``RandomNodeSplit``): per class
  ``train_per_class`` random labelled vertices (all of a smaller class) for training, then
  ``val_size`` and ``test_size`` random ones of the other labelled vertices;
- ``random``: ``train_frac`` and ``val_frac`` of the labelled vertices, the rest test;
- a file (``edgelist``): the user's masks, :func:`read_split_file`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.io import format as fmt
from hpcgnn.io.arrays import masks_of

Masks = tuple[np.ndarray, np.ndarray, np.ndarray]
#: The named ways of ``--split``.
SPLITS = ("given", "per-class", "random")
#: The words of a text split file, and the mask each names (``-``: none).
SPLIT_WORDS = {"train": 0, "val": 1, "test": 2, "-": -1}


@dataclass(frozen=True)
class SplitSpec:
    """How a converter chooses the masks (``--split`` and its sizes; see the module notes).

    ``kind``: ``given``, ``per-class``, ``random``, or the path of a split file.
    """

    kind: str | os.PathLike = "given"
    seed: int = 0
    train_frac: float = 0.6
    val_frac: float = 0.2
    train_per_class: int = 20
    val_size: int = 500
    test_size: int = 1000

    def masks(
        self, labels: np.ndarray, given: Masks | None, source: str,
        rng: np.random.Generator | None = None,
    ) -> Masks:
        """The masks of ``labels``' vertices; ``given``: the input's own (or ``None``).

        ``rng``: the draws' source (default: seeded with ``seed``).
        """
        if self.seed < 0:
            raise ConfigError(f"--seed must be non-negative, got {self.seed}")
        rng = np.random.default_rng(self.seed) if rng is None else rng
        if self.kind == "given":
            if given is None:
                raise InputError(f"{source}: no train/val/test masks; draw them with --split"
                                 " per-class (20 per class / 500 / 1000) or --split random")
            return given
        if self.kind == "per-class":
            if labels.ndim == 2:
                raise ConfigError("--split per-class draws per class id; multi-label targets"
                                  " (a 0/1 label matrix) take --split random, given or a file")
            return per_class_split(labels, rng, self.train_per_class, self.val_size,
                                   self.test_size)
        if self.kind == "random":
            return random_split(labels, self.train_frac, self.val_frac, rng)
        return read_split_file(self.kind, labels)


def check_fractions(train_frac: float, val_frac: float) -> None:
    """Raise :class:`ConfigError` unless ``0 <= train, val`` and ``train + val <= 1``."""
    if not (0.0 <= train_frac <= 1.0 and 0.0 <= val_frac <= 1.0):
        raise ConfigError(
            f"--train-frac {train_frac} and --val-frac {val_frac} must lie in [0, 1]"
        )
    if train_frac + val_frac > 1.0 + 1e-12:
        raise ConfigError(
            f"--train-frac {train_frac} + --val-frac {val_frac} exceeds 1 (nothing left to test)"
        )


def random_split(
    labels: np.ndarray, train_frac: float, val_frac: float, rng: np.random.Generator
) -> Masks:
    """Split the labelled vertices at random into train, validation and test.

    Parameters
    ----------
    labels
        Class id per vertex; vertices labelled ``-1`` are left out of every mask.
    train_frac, val_frac
        Fractions of the labelled vertices in the train and validation sets (rounded
        down); the rest is the test set.
    rng
        Source of the random permutation.

    Returns
    -------
    tuple of numpy.ndarray
        Boolean ``train``, ``val`` and ``test`` masks over all vertices.

    """
    check_fractions(train_frac, val_frac)
    labelled = np.flatnonzero(fmt.labelled(labels))
    order = labelled[rng.permutation(labelled.size)]
    n_train = int(train_frac * labelled.size)
    n_val = min(int(val_frac * labelled.size), labelled.size - n_train)
    return masks_from_ids(
        len(labels), order[:n_train], order[n_train : n_train + n_val], order[n_train + n_val :]
    )


def masks_from_ids(
    num_nodes: int, train: np.ndarray, val: np.ndarray, test: np.ndarray, source: str = ""
) -> Masks:
    """Turn three id lists into boolean masks, checking range and disjointness.

    Parameters
    ----------
    num_nodes
        Length of the masks.
    train, val, test
        Vertex ids of each set.
    source
        Where the ids came from, for error messages.

    """
    where = f"{source}: " if source else ""
    masks = []
    for name, ids in zip(fmt.MASK_NAMES, (train, val, test), strict=True):
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
            bad = ids.min() if ids.min() < 0 else ids.max()
            raise InputError(f"{where}{name} id {bad} is out of range [0, {num_nodes})")
        mask = np.zeros(num_nodes, dtype=bool)
        mask[ids] = True
        masks.append(mask)
    train_m, val_m, test_m = masks
    overlap = (train_m & val_m) | (train_m & test_m) | (val_m & test_m)
    if overlap.any():
        raise InputError(
            f"{where}vertex {int(np.argmax(overlap))} is in more than one of train/val/test"
        )
    return train_m, val_m, test_m


def drop_unlabelled(labels: np.ndarray, masks: Masks) -> Masks:
    """Remove vertices labelled ``-1`` from every mask."""
    labelled = fmt.labelled(labels)
    return tuple(m & labelled for m in masks)


def per_class_split(
    labels: np.ndarray, rng: np.random.Generator, train_per_class: int = 20,
    val_size: int = 500, test_size: int = 1000,
) -> Masks:
    """Planetoid's split: ``train_per_class`` per class, then ``val_size`` and ``test_size``.

    Every draw is among the labelled vertices, seeded by ``rng``: per class (in order of
    the class id) a random ``train_per_class`` of its vertices (all of a smaller class),
    then a random order of the other labelled vertices gives the first ``val_size`` to
    validation and the next ``test_size`` to test (fewer when they run out).
    """
    for flag, value in (("--train-per-class", train_per_class), ("--val-size", val_size),
                        ("--test-size", test_size)):
        if value < 0:
            raise ConfigError(f"{flag} must be non-negative, got {value}")
    labelled = np.flatnonzero(labels != fmt.UNLABELLED)
    train = []
    for c in np.unique(labels[labelled]):
        ids = labelled[labels[labelled] == c]
        train.append(ids[rng.permutation(ids.size)[:train_per_class]])
    chosen = np.concatenate(train) if train else np.empty(0, np.int64)
    rest = np.setdiff1d(labelled, chosen)
    rest = rest[rng.permutation(rest.size)]
    return masks_from_ids(labels.size, chosen, rest[:val_size],
                          rest[val_size : val_size + test_size])


def read_split_file(path: str | os.PathLike, labels: np.ndarray) -> Masks:
    """The user's masks: a text file of one word per vertex, or an ``.npz`` of three masks.

    Text: line ``k`` names the set of vertex ``k`` (the vertex order of the graph file:
    the ``k``-th smallest id, or id ``k`` with ``--num-nodes``): ``train``, ``val``,
    ``test`` or ``-`` (none); blank lines and ``#`` comments are skipped. ``.npz``: boolean
    arrays ``train``, ``val`` and ``test`` of one entry per vertex. Checked: one entry per
    vertex, disjoint, only labelled vertices.
    """
    p, n = Path(path), len(labels)
    if not p.is_file():
        raise InputError(f"{p}: no such file (--split: per-class, random, or a file of masks)")
    source = f"{p} (--split)"
    if p.suffix == ".npz":
        try:
            with np.load(p, allow_pickle=False) as z:
                masks = {m: z[m] for m in fmt.MASK_NAMES if m in z.files}
        except (OSError, ValueError) as err:
            raise InputError(f"{source}: not a readable .npz of masks: {err}") from err
        found = masks_of(masks, labels, source)
        return found["train"], found["val"], found["test"]
    try:
        words = [w for line in p.read_text(encoding="utf-8").splitlines()
                 if (w := line.split("#", 1)[0].strip())]
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{source}: not a readable text file: {err}") from err
    if len(words) != n:
        raise InputError(f"{source}: {len(words)} lines, expected one per vertex ({n})")
    unknown = next((k for k, w in enumerate(words) if w not in SPLIT_WORDS), None)
    if unknown is not None:
        raise InputError(f"{source}: vertex {unknown}: {words[unknown][:20]!r} is not one of"
                         f" {', '.join(SPLIT_WORDS)}")
    sets = np.array([SPLIT_WORDS[w] for w in words], dtype=np.int8)
    found = masks_of({m: sets == k for m, k in zip(fmt.MASK_NAMES, range(3), strict=True)},
                     labels, source)
    return found["train"], found["val"], found["test"]
