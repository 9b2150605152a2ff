"""Planetoid-shaped stand-ins: ``ind.NAME.*`` files with Cora's or CiteSeer's exact sizes.

Where the real Planetoid files cannot be downloaded (no network on a compute node or CI),
:func:`write_planetoid_like` writes files of the same format, vertex count, feature width,
feature density (binary bag of words), edge count, class count and split as the real data
set, with features and edges correlated with the classes. Epoch times depend on these
sizes only, so a benchmark on them stands in for the real graph; accuracies do not.
"""

from __future__ import annotations

import pickle
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class Shape:
    """Sizes of a Planetoid data set (Yang et al. 2016, as Kipf & Welling load it)."""

    nodes: int
    features: int
    feature_nnz: int
    edges: int  # undirected, no self loops
    classes: int
    train: int
    test: int = 1000


#: The real data sets' sizes.
SHAPES = {
    "cora": Shape(nodes=2708, features=1433, feature_nnz=49216, edges=5278, classes=7,
                  train=140),
    "citeseer": Shape(nodes=3327, features=3703, feature_nnz=105165, edges=4552, classes=6,
                      train=120),
}


def _pickle(obj: object) -> bytes:
    return pickle.dumps(obj, protocol=2)


def write_planetoid_like(directory: Path, name: str, seed: int = 0) -> Path:
    """Write ``directory/ind.NAME.*`` shaped like the real ``name``; return ``directory``."""
    s = SHAPES[name]
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, s.classes, s.nodes)
    # Features: each class prefers its own slice of the vocabulary.
    per_row = max(1, s.feature_nnz // s.nodes)
    cols = rng.integers(0, s.features, (s.nodes, per_row))
    own = rng.random((s.nodes, per_row)) < 0.5
    width = s.features // s.classes
    cols[own] = (labels[:, None] * width + cols % width)[own]
    rows = np.repeat(np.arange(s.nodes), per_row)
    x = sp.csr_matrix((np.ones(rows.size, np.float32), (rows, cols.ravel())),
                      shape=(s.nodes, s.features))
    x.data[:] = 1.0
    y = np.eye(s.classes)[labels]
    # Edges: 80% inside a class.
    graph: dict[int, list[int]] = defaultdict(list)
    by_class = [np.flatnonzero(labels == c) for c in range(s.classes)]
    u = rng.integers(0, s.nodes, s.edges)
    same = rng.random(s.edges) < 0.8
    v = rng.integers(0, s.nodes, s.edges)
    for i in np.flatnonzero(same):
        members = by_class[labels[u[i]]]
        v[i] = members[rng.integers(0, members.size)]
    for a, b in zip(u.tolist(), v.tolist(), strict=True):
        if a != b:
            graph[a].append(b)
    n_all = s.nodes - s.test
    test_ids = np.arange(n_all, s.nodes)
    rng.shuffle(test_ids)
    directory.mkdir(parents=True, exist_ok=True)
    parts = {
        "x": x[: s.train], "y": y[: s.train], "allx": x[:n_all], "ally": y[:n_all],
        "tx": x[test_ids], "ty": y[test_ids], "graph": dict(graph),
    }
    for part, obj in parts.items():
        (directory / f"ind.{name}.{part}").write_bytes(_pickle(obj))
    (directory / f"ind.{name}.test.index").write_text("\n".join(map(str, test_ids)) + "\n")
    return directory
