"""Convert a SNAP-style edge list (text, optionally gzip-compressed) with optional arrays.

Input format: one edge ``u v`` per line, separated by whitespace or a comma; lines
starting with ``#`` or ``%`` are comments. Vertex ids are non-negative integers, not
necessarily contiguous. A third column ``u v w`` is the edge's weight (a finite float,
stored as float32): the graph is then weighted. The first edge line decides, and every
line must then have a weight (or, for an unweighted list, none); columns after the weight
are ignored (timestamps). A repeated edge is stored once, with the sum of its weights; a
self loop is dropped with its weight.

Vertices:

- by default the vertices are the distinct ids that occur in the file, relabelled
  ``0 .. n-1`` in increasing order of the original id (kept in the file's ``node_ids``);
- with ``num_nodes`` the ids are used as they are: every id must be below ``num_nodes``,
  and ids that occur in no edge become isolated vertices.

Features are a dense ``.npy`` array, or a SciPy sparse matrix saved with
``scipy.sparse.save_npz`` (``.npz``, e.g. bag-of-words rows): those are stored as CSR
(``features_csr``), never made dense.

Row ``k`` of ``features`` / entry ``k`` of ``labels`` belongs to vertex ``k``: the
``k``-th smallest original id, or id ``k`` itself with ``num_nodes`` (the two agree when
the ids are ``0 .. n-1``).

Without a label array every vertex gets a seeded random label (balanced over
``classes``), and without a feature array the features are seeded standard normal noise
of width ``feature_dim``: such files exercise the full training pipeline at the graph's
real size, for timing, but the accuracy is that of chance. Labels below zero (or NaN in a
float array) mean unlabelled. The train/val/test masks are a seeded random split of the
labelled vertices (``split="random"``, the default), Planetoid's per-class split
(``"per-class"``), or the user's own: a file of one ``train``/``val``/``test``/``-`` per
vertex line, or an ``.npz`` of three boolean masks
(:func:`~hpcgnn.prepare.splits.read_split_file`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import cast

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.io.arrays import class_ids
from hpcgnn.io.edges import EdgeSorter, sorted_unique
from hpcgnn.prepare.features import (
    array_feature_blocks,
    random_feature_blocks,
    row_normalized_blocks,
    sparse_feature_blocks,
)
from hpcgnn.prepare.output import GraphParts, check_memory, write_graph
from hpcgnn.prepare.splits import SplitSpec, check_fractions
from hpcgnn.prepare.summary import PrepareSummary
from hpcgnn.prepare.synthetic import EDGE_CHUNK, balanced_labels
from hpcgnn.prepare.textfile import NumericTable, OptionalColumn, require_file
from hpcgnn.utils.files import output_errors, temporary_directory, write_array

#: Number of random classes when no labels are given and no class count is asked for.
DEFAULT_RANDOM_CLASSES = 8
#: The third column of a weighted edge list, and the dtype its weights are stored in.
WEIGHT = OptionalColumn("weight", np.dtype(np.float32))


class DistinctIds:
    """Sorted set of the integers seen so far, merged lazily in amortised O(k log k)."""

    def __init__(self) -> None:
        self._merged = np.empty(0, dtype=np.int64)
        self._pending: list[np.ndarray] = []
        self._pending_size = 0

    def add(self, ids: np.ndarray) -> None:
        """Add the values of ``ids``."""
        unique = sorted_unique(ids.flatten())
        self._pending.append(unique)
        self._pending_size += unique.size
        if self._pending_size > max(self._merged.size, 1 << 22):
            self._merge()

    def _merge(self) -> None:
        if self._pending:
            self._merged = sorted_unique(np.concatenate([self._merged, *self._pending]))
            self._pending, self._pending_size = [], 0

    def sorted(self) -> np.ndarray:
        """Return all distinct values seen, in increasing order."""
        self._merge()
        return self._merged


def load_label_array(path: str | os.PathLike, num_nodes: int) -> np.ndarray:
    """Load ``Y.npy``: one integer class per vertex; negative or NaN means unlabelled."""
    path = require_file(path, "label array")
    labels = _load_npy(path)  # memory-mapped: the shape is checked before anything is read
    if labels.ndim != 1 or labels.shape[0] != num_nodes:
        raise InputError(f"{path}: labels have shape {labels.shape}, expected ({num_nodes},)")
    if labels.dtype.kind not in "iuf":
        raise InputError(f"{path}: labels have dtype {labels.dtype}, expected integers")
    return class_ids(labels, path)


def load_feature_array(path: str | os.PathLike, num_nodes: int) -> np.ndarray | sp.csr_matrix:
    """Open ``X.npy`` memory-mapped, or load the sparse ``X.npz``; one numeric row per vertex."""
    path = require_file(path, "feature array")
    features = _load_sparse(path) if path.suffix == ".npz" else _load_npy(path)
    if features.ndim != 2 or features.shape[0] != num_nodes or features.shape[1] == 0:
        raise InputError(
            f"{path}: features have shape {features.shape}, expected ({num_nodes}, F) with F > 0"
        )
    if features.dtype.kind not in "biuf":
        raise InputError(f"{path}: features have dtype {features.dtype}, expected numbers")
    return features


def _load_sparse(path: Path) -> sp.csr_matrix:
    """Load a SciPy sparse matrix saved with ``scipy.sparse.save_npz``, as CSR."""
    try:
        matrix = sp.load_npz(path)
    except (OSError, ValueError, KeyError) as err:
        raise InputError(
            f"{path}: not a SciPy sparse matrix (scipy.sparse.save_npz): {err}"
        ) from err
    return sp.csr_matrix(matrix)


def _load_npy(path: Path) -> np.ndarray:
    """Open a ``.npy`` file memory-mapped, so its header is checked before any data is read."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: not a readable .npy array: {err}") from err
    if not isinstance(array, np.ndarray):
        raise InputError(f"{path}: expected a single .npy array, not an .npz archive")
    return array


def _default_name(path: Path) -> str:
    base = path.name[:-3] if path.name.endswith(".gz") else path.name
    return Path(base).stem or base


def convert_edgelist(
    edges: str | os.PathLike,
    out: str | os.PathLike,
    *,
    features: str | os.PathLike | None = None,
    labels: str | os.PathLike | None = None,
    directed: bool = False,
    num_nodes: int | None = None,
    feature_dim: int = 64,
    classes: int | None = None,
    seed: int = 0,
    train_frac: float = 0.6,
    val_frac: float = 0.2,
    name: str | None = None,
    tmpdir: str | os.PathLike | None = None,
    show_progress: bool = True,
    split: str | os.PathLike = "random",
    train_per_class: int = 20,
    val_size: int = 500,
    test_size: int = 1000,
    row_normalize: bool = False,
) -> PrepareSummary:
    """Convert the edge list ``edges`` (and optional arrays) to ``out``.

    Parameters
    ----------
    edges
        Text edge list, plain or ``.gz``; with a third column, weighted (see the module
        notes).
    out
        Output ``.h5`` path.
    features, labels
        Optional ``.npy`` arrays of shape ``(n, F)`` and ``(n,)``; the features may be a
        sparse ``.npz`` matrix (stored as CSR); see the module notes.
    directed
        Keep edge directions (``u -> v``) instead of symmetrising.
    num_nodes
        Use the ids as they are, all below ``num_nodes``, instead of relabelling.
    feature_dim
        Width of the random features written when ``features`` is not given.
    classes
        Number of classes: of the random labels without ``labels`` (default 8), or at
        least one more than the largest label with ``labels`` (default: exactly that).
    seed
        Seed of the random labels, features and split.
    train_frac, val_frac
        Fractions of the labelled vertices in the train and validation masks of the
        ``random`` split.
    name
        Dataset name stored in the file (default: the file name without extensions).
    tmpdir
        Directory for the spill files.
    show_progress
        Show progress bars.
    split
        ``"random"`` (default), ``"per-class"`` (``train_per_class`` per class, then
        ``val_size`` and ``test_size``), or the path of a split file (module notes).
    train_per_class, val_size, test_size
        The sizes of the ``per-class`` split.
    row_normalize
        Divide every feature row by the sum of its absolute values.

    """
    started = time.perf_counter()
    check_fractions(train_frac, val_frac)
    if split == "given":
        raise ConfigError("prepare edgelist: --split given has no masks to take: give a file"
                          " of masks (--split FILE), per-class or random")
    splits = SplitSpec(split, seed, train_frac, val_frac, train_per_class, val_size, test_size)
    if seed < 0:
        raise ConfigError(f"--seed must be non-negative, got {seed}")
    if num_nodes is not None and num_nodes < 1:
        raise ConfigError(f"--num-nodes must be positive, got {num_nodes}")
    if features is None and feature_dim < 1:
        raise ConfigError(f"--feature-dim must be positive, got {feature_dim}")
    if classes is not None and classes < 1:
        raise ConfigError(f"--classes must be positive, got {classes}")
    sized_by = [f"--num-nodes {num_nodes}"] if num_nodes is not None else []
    if features is None:
        sized_by.append(f"--feature-dim {feature_dim}")
    if sized_by:
        check_memory(", ".join(sized_by), num_nodes or 0, feature_dim if features is None else 0)
    table = NumericTable(edges, dtype=np.int64, first_columns=2, what="edge list",
                         optional=WEIGHT)
    label_rng, feature_rng, split_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    with temporary_directory(tmpdir, "hpcgnn-edgelist-") as spill_dir:
        spill = _Spill(spill_dir)
        count, node_ids = _spill_edges(table, spill, num_nodes, show_progress)
        weights = WEIGHT.dtype if table.has_optional else None
        # no distinct ids only with --num-nodes
        n = cast(int, num_nodes) if node_ids is None else node_ids.size
        if n == 0:
            raise InputError(f"{table.path}: no edges (and no --num-nodes), so no vertices")
        y = _labels(labels, n, classes, label_rng)
        num_classes = classes or (int(y.max()) + 1 if (y >= 0).any() else 1)
        x = load_feature_array(features, n) if features is not None else None
        masks = splits.masks(y, None, str(table.path), split_rng)
        with EdgeSorter(n, directed, count, tmpdir, weights=weights) as sorter:
            for pairs, w in spill.read(weights):
                if node_ids is not None:
                    pairs = np.searchsorted(node_ids, pairs)
                sorter.add(pairs[:, 0], pairs[:, 1], table.path, weights=w)
            blocks = (
                random_feature_blocks(n, feature_dim, feature_rng) if x is None
                else sparse_feature_blocks(x) if sp.issparse(x)
                else array_feature_blocks(x)
            )
            parts = GraphParts(
                num_nodes=n,
                num_features=x.shape[1] if x is not None else feature_dim,
                num_classes=num_classes,
                feature_blocks=row_normalized_blocks(blocks) if row_normalize else blocks,
                labels=y,
                masks=masks,
                name=name or _default_name(table.path),
                source=f"edgelist:{table.path}",
                node_ids=node_ids,
                sparse_features=x is not None and sp.issparse(x),
                feature_normalization="row" if row_normalize else "",
            )
            return write_graph(out, sorter, parts, started=started, show_progress=show_progress)


class _Spill:
    """The parsed edge list in binary spill files: the id pairs, and the weights if any."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.pairs = directory / "edges.int64"
        self.weights = directory / "weights.bin"

    def errors(self) -> AbstractContextManager[None]:
        """Report a failed write or read of a spill file as an ``OutputError``."""
        return output_errors(self.directory, "temporary edge files in")

    def read(self, weights: np.dtype | None) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """Yield ``(pairs, weights)`` in chunks of :data:`EDGE_CHUNK` edges; delete the files."""
        with self.errors(), ExitStack() as files:
            f = files.enter_context(open(self.pairs, "rb"))
            fw = files.enter_context(open(self.weights, "rb")) if weights is not None else None
            while (pairs := np.fromfile(f, dtype=np.int64, count=2 * EDGE_CHUNK)).size:
                w = None if fw is None else np.fromfile(fw, dtype=weights, count=pairs.size // 2)
                yield pairs.reshape(-1, 2), w
        for path in (self.pairs, self.weights):
            path.unlink(missing_ok=True)


def _spill_edges(
    table: NumericTable, spill: _Spill, num_nodes: int | None, show_progress: bool
) -> tuple[int, np.ndarray | None]:
    """Parse the edge list once into binary spill files (weights too, for a weighted list).

    Returns the number of edges and, unless ``num_nodes`` is given, the sorted distinct ids.
    """
    distinct = DistinctIds() if num_nodes is None else None
    count = 0
    with spill.errors(), open(spill.pairs, "wb") as f, open(spill.weights, "wb") as fw:
        for block, weights in table.blocks_with_optional("reading edges", show_progress):
            lo, hi = int(block.min()), int(block.max())
            if lo < 0:
                raise InputError(f"{table.path}: negative vertex id {lo}")
            if num_nodes is not None and hi >= num_nodes:
                raise InputError(
                    f"{table.path}: vertex id {hi} is not below --num-nodes {num_nodes}"
                )
            if distinct is not None:
                distinct.add(block)
            write_array(f, block.astype(np.int64, copy=False))
            if weights is not None:
                write_array(fw, weights)
            count += block.shape[0]
    return count, (distinct.sorted() if distinct is not None else None)


def _labels(
    path: str | os.PathLike | None, n: int, classes: int | None, rng: np.random.Generator
) -> np.ndarray:
    if path is None:
        return balanced_labels(n, classes or DEFAULT_RANDOM_CLASSES, rng)
    y = load_label_array(path, n)
    if classes is not None and y.size and y.max() >= classes:
        raise ConfigError(f"{path}: label {int(y.max())} does not fit --classes {classes}")
    return y
