"""Convert an OGB node-property dataset from its raw CSV layout (ogbn-arxiv, ogbn-products).

Layout of a downloaded and unzipped dataset directory (e.g. ``arxiv/`` or
``dataset/ogbn_arxiv/``)::

    raw/edge.csv.gz            one "src,dst" edge per line
    raw/node-feat.csv.gz       one comma-separated feature row per vertex
    raw/node-label.csv.gz      one class id per vertex ("nan" for unlabelled ones)
    raw/num-node-list.csv.gz   the vertex count (optional)
    raw/num-edge-list.csv.gz   the edge count (optional, sizes the edge sorter)
    split/<split>/{train,valid,test}.csv.gz   one vertex id per line

The edges are made undirected by default (stored in both directions), as OGB's GCN
examples do for ogbn-arxiv (``to_undirected``); ``directed=True`` keeps the file's
direction, ``src -> dst``. Self loops and duplicate edges are dropped. Only homogeneous,
single-label datasets fit this layout (not ogbn-mag or ogbn-proteins).
"""

from __future__ import annotations

import os
import time
from itertools import chain
from pathlib import Path

import numpy as np

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.io import EdgeSorter
from hpcgnn.io import format as fmt
from hpcgnn.prepare.output import GraphParts, write_graph
from hpcgnn.prepare.splits import class_ids, masks_from_ids
from hpcgnn.prepare.summary import PrepareSummary
from hpcgnn.prepare.textfile import NumericTable, read_column, require_file

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

    """
    started = time.perf_counter()
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: no such directory (OGB dataset root)")
    raw = root / "raw"
    edge_path = require_file(raw / "edge.csv.gz", "OGB edge list; homogeneous datasets only")
    feat_path = require_file(raw / "node-feat.csv.gz", "OGB node features")
    label_path = require_file(raw / "node-label.csv.gz", "OGB node labels")
    split_dir = find_split(root, split)
    split_paths = [require_file(split_dir / f"{s}.csv.gz", "OGB split") for s in SPLIT_FILES]

    labels = read_labels(label_path)
    n = labels.size
    declared = _count(raw / "num-node-list.csv.gz", "OGB vertex count")
    if declared is not None and declared != n:
        raise InputError(
            f"{label_path}: {n} labels but num-node-list.csv.gz says {declared} vertices"
        )
    if n == 0:
        raise InputError(f"{label_path}: no labels, so no vertices")
    if not (labels >= 0).any():
        raise InputError(f"{label_path}: every vertex is unlabelled")
    train, val, test = (read_column(p, np.int64, "OGB split ids") for p in split_paths)
    masks = masks_from_ids(n, train, val, test, source=str(split_dir))
    for mask_name, mask in zip(fmt.MASK_NAMES, masks, strict=True):
        if (labels[mask] == fmt.UNLABELLED).any():
            bad = int(np.flatnonzero(mask & (labels == fmt.UNLABELLED))[0])
            raise InputError(f"{split_dir}: {mask_name} vertex {bad} has no label")

    expected = _count(raw / "num-edge-list.csv.gz", "OGB edge count")
    if expected is None:
        expected = edge_path.stat().st_size // _GZ_BYTES_PER_EDGE
    features = NumericTable(feat_path, dtype=np.float32, delimiter=",", what="OGB node features")
    edges = NumericTable(edge_path, dtype=np.int64, columns=2, delimiter=",", what="OGB edge list")
    with EdgeSorter(n, directed, expected, tmpdir) as sorter:
        for block in edges.blocks("reading edges", show_progress):
            sorter.add(block[:, 0], block[:, 1], edge_path)
        blocks = features.blocks()
        first = next(blocks, None)
        if first is None:
            raise InputError(f"{feat_path}: no feature rows")
        parts = GraphParts(
            num_nodes=n,
            num_features=first.shape[1],
            num_classes=int(labels.max()) + 1,
            feature_blocks=chain([first], blocks),
            labels=labels,
            masks=masks,
            name=name or root.resolve().name.replace("_", "-"),
            source=f"ogb:{root}",
        )
        return write_graph(out, sorter, parts, started=started, show_progress=show_progress)

