"""Splits: drawn per class (Planetoid's), random, or the user's file of masks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.prepare.splits import SplitSpec, per_class_split, read_split_file


def test_per_class_takes_k_of_each_class_then_val_and_test() -> None:
    labels = np.repeat([0, 1, 2], [50, 50, 3])
    labels[1:100:17] = -1
    train, val, test = per_class_split(labels, np.random.default_rng(0), 20, 20, 30)
    assert np.bincount(labels[train]).tolist() == [20, 20, 3]  # all of a smaller class
    assert val.sum() == 20 and test.sum() == 30
    assert not (train & val).any() and not (val & test).any() and not (train & test).any()
    assert (labels[train | val | test] >= 0).all()
    small = per_class_split(labels, np.random.default_rng(0), 20, 500, 1000)
    assert small[1].sum() == labels[labels >= 0].size - 43 and small[2].sum() == 0
    again = per_class_split(labels, np.random.default_rng(0), 20, 20, 30)
    assert all((a == b).all() for a, b in zip(again, (train, val, test), strict=True))
    with pytest.raises(ConfigError, match="--val-size must be non-negative"):
        per_class_split(labels, np.random.default_rng(0), 20, -1, 40)


def test_a_text_file_names_each_vertex_set(tmp_path: Path) -> None:
    labels = np.array([0, 1, -1, 1, 0])
    (tmp_path / "s.txt").write_text("# vertex sets\ntrain\nval\n-\n\ntest\ntrain  # last\n")
    train, val, test = read_split_file(tmp_path / "s.txt", labels)
    assert train.tolist() == [True, False, False, False, True]
    assert val.tolist() == [False, True, False, False, False] and test[3] and test.sum() == 1
    (tmp_path / "s.txt").write_text("train\nval\n-\ntest\n")
    with pytest.raises(InputError, match=r"4 lines, expected one per vertex \(5\)"):
        read_split_file(tmp_path / "s.txt", labels)
    (tmp_path / "s.txt").write_text("train\nvalid\n-\ntest\n-\n")
    with pytest.raises(InputError, match="vertex 1: 'valid' is not one of train, val, test, -"):
        read_split_file(tmp_path / "s.txt", labels)
    (tmp_path / "s.txt").write_text("train\nval\ntest\n-\n-\n")
    with pytest.raises(InputError, match="vertex 2 is in the test mask but unlabelled"):
        read_split_file(tmp_path / "s.txt", labels)


def test_an_npz_of_masks(tmp_path: Path) -> None:
    labels = np.array([0, 1, 1])
    np.savez(tmp_path / "s.npz", train=[True, False, False], val=[False, True, False],
             test=[False, False, True])
    masks = SplitSpec(tmp_path / "s.npz").masks(labels, None, "g")
    assert [m.tolist() for m in masks] == [[True, False, False], [False, True, False],
                                           [False, False, True]]
    np.savez(tmp_path / "s.npz", train=[True, False, False], val=[False, True, False])
    with pytest.raises(InputError, match="no test mask"):
        read_split_file(tmp_path / "s.npz", labels)
    with pytest.raises(InputError, match="no such file"):
        read_split_file(tmp_path / "none.txt", labels)
