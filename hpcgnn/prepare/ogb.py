"""Convert an OGB node-property dataset from its raw layout, CSV or binary (papers100M-bin).

CSV layout (ogbn-arxiv, ogbn-products) of a downloaded and unzipped dataset directory
(e.g. ``arxiv/`` or ``dataset/ogbn_arxiv/``)::

    raw/edge.csv.gz            one "src,dst" edge per line
    raw/node-feat.csv.gz       one comma-separated feature row per vertex
    raw/node-label.csv.gz      one class id per vertex ("nan" for unlabelled ones)
    raw/num-node-list.csv.gz   the vertex count (optional)
    raw/num-edge-list.csv.gz   the edge count (optional, sizes the edge sorter)
    split/<split>/{train,valid,test}.csv.gz   one vertex id per line

The binary layout (OGB's ``is_bin`` datasets, e.g. ogbn-papers100M's ``papers100M-bin``)
has instead ``raw/data.npz`` (arrays ``edge_index`` ``(2, E)``, ``node_feat`` ``(n, F)``,
``num_nodes_list``, ``num_edges_list``) and ``raw/node-label.npz`` (``node_label``, NaN
for unlabelled vertices); the splits are the same CSV files. Its edges and features are
streamed from the archive in blocks (:mod:`hpcgnn.prepare.npz`), never loaded whole.

The edges are made undirected by default (stored in both directions), as OGB's GCN
examples do for ogbn-arxiv (``to_undirected``); ``directed=True`` keeps the file's
direction, ``src -> dst``. Self loops and duplicate edges are dropped. Only homogeneous,
single-label datasets fit this layout (not ogbn-mag or ogbn-proteins).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

import numpy as np

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.io import EdgeSorter
from hpcgnn.io import format as fmt
from hpcgnn.io.arrays import class_ids
from hpcgnn.prepare.features import row_normalized_blocks
from hpcgnn.prepare.npz import NpzArray
from hpcgnn.prepare.output import GraphParts, write_graph
from hpcgnn.prepare.splits import masks_from_ids
from hpcgnn.prepare.summary import PrepareSummary
from hpcgnn.prepare.textfile import NumericTable, read_column, require_file
from hpcgnn.utils.progress import Progress

SPLIT_FILES = ("train", "valid", "test")

#: Compressed bytes per edge assumed when no edge count is given (errs towards more buckets).
_GZ_BYTES_PER_EDGE = 4


def find_split(root: Path, split: str | None) -> Path:
    """Return ``root/split/<split>``; with ``split=None`` the only split there is."""
    base = root / "split"
    if not base.is_dir():
        raise InputError(f"{base}: no such directory (OGB split)")
    names = sorted(d.name for d in base.iterdir() if d.is_dir())
    if split is None:
        if len(names) != 1:
            raise ConfigError(
                f"{base} holds {len(names)} splits ({', '.join(names) or 'none'}); choose one "
                f"with --split"
            )
        split = names[0]
    if split not in names:
        raise InputError(f"{base / split}: no such split (available: {', '.join(names)})")
    return base / split


def read_labels(path: Path) -> np.ndarray:
    """Read ``node-label.csv.gz``: one class per line, NaN or negative meaning unlabelled."""
    table = NumericTable(path, dtype=np.float64, what="OGB node labels").read()
    if table.shape[1] != 1:
        raise InputError(f"{path}: {table.shape[1]} label columns; only single-label datasets "
                         f"are supported")
    return class_ids(table[:, 0], path)


def _count(path: Path, what: str) -> int | None:
    """Read a one-number file such as ``num-node-list.csv.gz`` if it exists."""
    if not path.is_file():
        return None
    values = read_column(path, np.int64, what)
    if values.size != 1 or values[0] < 0:
        raise InputError(f"{path}: expected one non-negative count, got {values[:4].tolist()}")
    return int(values[0])


def convert_ogb(
    root: str | os.PathLike,
    out: str | os.PathLike,
    *,
    split: str | None = None,
    directed: bool = False,
    name: str | None = None,
    tmpdir: str | os.PathLike | None = None,
    show_progress: bool = True,
    row_normalize: bool = False,
) -> PrepareSummary:
    """Convert the OGB node-property dataset under ``root`` to ``out``.

    Parameters
    ----------
    root
        Dataset directory with ``raw/`` and ``split/``.
    out
        Output ``.h5`` path.
    split
        Name of the sub-directory of ``split/``; required only if there are several.
    directed
        Keep edge directions instead of symmetrising.
    name
        Dataset name stored in the file (default: the directory name, ``_`` -> ``-``).
    tmpdir
        Directory for the edge sorter's spill files.
    show_progress
        Show progress bars.
    row_normalize
        Divide every feature row by the sum of its absolute values (recorded in the file,
        ``feature_normalization = "row"``).

    """
    started = time.perf_counter()
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: no such directory (OGB dataset root)")
    raw = root / "raw"
    source = _BinarySource(raw) if (raw / "data.npz").is_file() else _CsvSource(raw)
    split_dir = find_split(root, split)
    split_paths = [require_file(split_dir / f"{s}.csv.gz", "OGB split") for s in SPLIT_FILES]

    labels = source.labels()
    n = labels.size
    declared = source.declared_nodes()
    if declared is not None and declared != n:
        raise InputError(
            f"{source.label_path}: {n} labels but {source.count_file} says {declared} vertices"
        )
    if n == 0:
        raise InputError(f"{source.label_path}: no labels, so no vertices")
    if not (labels >= 0).any():
        raise InputError(f"{source.label_path}: every vertex is unlabelled")
    train, val, test = (read_column(p, np.int64, "OGB split ids") for p in split_paths)
    masks = masks_from_ids(n, train, val, test, source=str(split_dir))
    for mask_name, mask in zip(fmt.MASK_NAMES, masks, strict=True):
        if (labels[mask] == fmt.UNLABELLED).any():
            bad = int(np.flatnonzero(mask & (labels == fmt.UNLABELLED))[0])
            raise InputError(f"{split_dir}: {mask_name} vertex {bad} has no label")

    with EdgeSorter(n, directed, source.expected_edges(), tmpdir) as sorter:
        for src, dst in source.edges(show_progress):
            sorter.add(src, dst, source.edge_path)
        blocks = source.feature_blocks(n)
        first = next(blocks, None)
        if first is None:
            raise InputError(f"{source.feature_path}: no feature rows")
        parts = GraphParts(
            num_nodes=n,
            num_features=first.shape[1],
            num_classes=int(labels.max()) + 1,
            feature_blocks=(row_normalized_blocks(chain([first], blocks)) if row_normalize
                            else chain([first], blocks)),
            labels=labels,
            masks=masks,
            name=name or root.resolve().name.replace("_", "-"),
            source=f"ogb:{root}",
            feature_normalization="row" if row_normalize else "",
        )
        return write_graph(out, sorter, parts, started=started, show_progress=show_progress)


class _CsvSource:
    """The CSV layout's files (``raw/*.csv.gz``)."""

    count_file = "num-node-list.csv.gz"

    def __init__(self, raw: Path) -> None:
        self.raw = raw
        self.edge_path = require_file(
            raw / "edge.csv.gz", "OGB edge list; homogeneous datasets only"
        )
        self.feature_path = require_file(raw / "node-feat.csv.gz", "OGB node features")
        self.label_path = require_file(raw / "node-label.csv.gz", "OGB node labels")

    def labels(self) -> np.ndarray:
        return read_labels(self.label_path)

    def declared_nodes(self) -> int | None:
        return _count(self.raw / self.count_file, "OGB vertex count")

    def expected_edges(self) -> int:
        expected = _count(self.raw / "num-edge-list.csv.gz", "OGB edge count")
        return self.edge_path.stat().st_size // _GZ_BYTES_PER_EDGE if expected is None else expected

    def edges(self, show_progress: bool) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        table = NumericTable(self.edge_path, dtype=np.int64, columns=2, delimiter=",",
                             what="OGB edge list")
        for block in table.blocks("reading edges", show_progress):
            yield block[:, 0], block[:, 1]

    def feature_blocks(self, n: int) -> Iterator[np.ndarray]:
        return NumericTable(self.feature_path, dtype=np.float32, delimiter=",",
                            what="OGB node features").blocks()


class _BinarySource:
    """The binary layout's archives (``raw/data.npz``, ``raw/node-label.npz``)."""

    count_file = "data.npz num_nodes_list"

    def __init__(self, raw: Path) -> None:
        self.edge_path = self.feature_path = raw / "data.npz"
        self.label_path = require_file(raw / "node-label.npz", "OGB node labels")

    def labels(self) -> np.ndarray:
        with NpzArray(self.label_path, "node_label") as arr:
            table = arr.read()
        if table.ndim == 2 and table.shape[1] != 1:
            raise InputError(f"{self.label_path}: {table.shape[1]} label columns; only"
                             " single-label datasets are supported")
        return class_ids(table.reshape(-1).astype(np.float64), self.label_path)

    def declared_nodes(self) -> int | None:
        with NpzArray(self.edge_path, "num_nodes_list") as arr:
            counts = arr.read().reshape(-1)
        if counts.size != 1:
            raise InputError(f"{self.edge_path}: num_nodes_list holds {counts.size} graphs;"
                             " a node-property dataset has one")
        return int(counts[0])

    def expected_edges(self) -> int:
        with NpzArray(self.edge_path, "edge_index") as arr:
            return arr.shape[1] if len(arr.shape) == 2 else 0

    def edges(self, show_progress: bool) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        with NpzArray(self.edge_path, "edge_index") as arr:
            if arr.dtype.kind not in "iu":
                raise InputError(f"{self.edge_path}: edge_index has dtype {arr.dtype},"
                                 " expected integers")
            total = arr.shape[1] if len(arr.shape) == 2 else 0
            with Progress("reading edges", total, "edges", enabled=show_progress) as bar:
                for src, dst in arr.pair_blocks():
                    yield src.astype(np.int64), dst.astype(np.int64)
                    bar.update(len(src))

    def feature_blocks(self, n: int) -> Iterator[np.ndarray]:
        with NpzArray(self.feature_path, "node_feat") as arr:
            if arr.dtype.kind not in "biuf" or len(arr.shape) != 2 or arr.shape[0] != n:
                raise InputError(f"{self.feature_path}: node_feat has shape {arr.shape} and"
                                 f" dtype {arr.dtype}, expected ({n}, F) numbers")
            for block in arr.row_blocks():
                yield block.astype(np.float32)
