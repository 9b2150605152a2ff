"""Labels and train/validation/test masks: class ids, seeded random splits, masks from ids."""

from __future__ import annotations

import os

import numpy as np

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.io import format as fmt

Masks = tuple[np.ndarray, np.ndarray, np.ndarray]


def class_ids(values: np.ndarray, source: str | os.PathLike) -> np.ndarray:
    """Return numeric labels as int64 class ids, negative or NaN becoming ``-1`` (unlabelled).

    Raises :class:`InputError` naming ``source`` if a known label is not an integer, or
    beyond the largest class id a graph file holds (``MAX_CLASSES - 1``).
    """
    known = np.isfinite(values) & (values >= 0)
    fraction = values[known] != np.round(values[known])
    if np.any(fraction):
        raise InputError(f"{source}: label {values[known][fraction][0]} is not an integer class id")
    big = values[known] >= fmt.MAX_CLASSES
    if np.any(big):
        raise InputError(f"{source}: label {values[known][big][0]:.0f} is beyond the largest class"
                         f" id ({fmt.MAX_CLASSES - 1}) a graph file holds")
    return np.where(known, values, fmt.UNLABELLED).astype(np.int64)


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
    labelled = np.flatnonzero(labels != fmt.UNLABELLED)
    order = labelled[rng.permutation(labelled.size)]
    n_train = int(train_frac * labelled.size)
    n_val = min(int(val_frac * labelled.size), labelled.size - n_train)
    return masks_from_ids(
        labels.size, order[:n_train], order[n_train : n_train + n_val], order[n_train + n_val :]
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
    labelled = labels != fmt.UNLABELLED
    return tuple(m & labelled for m in masks)
