"""Small graphs for tests, written straight through the format writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hpcgnn.io import EdgeSorter, GraphFileWriter


def random_graph_arrays(
    n: int = 60, avg_degree: float = 4.0, features: int = 6, classes: int = 3,
    directed: bool = False, seed: int = 0,
) -> dict:
    """Edges with class structure, features correlated with labels, masks and labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    m = int(n * avg_degree / (1 if directed else 2))
    src = rng.integers(0, n, m)
    same = rng.random(m) < 0.7
    pool = [np.flatnonzero(labels == c) for c in range(classes)]
    dst = rng.integers(0, n, m)
    for k in np.flatnonzero(same):
        cands = pool[labels[src[k]]]
        if len(cands):
            dst[k] = cands[rng.integers(len(cands))]
    centres = rng.normal(size=(classes, features))
    x = (centres[labels] + rng.normal(scale=1.0, size=(n, features))).astype(np.float32)
    split = rng.permutation(n)
    train = np.zeros(n, bool)
    val = np.zeros(n, bool)
    test = np.zeros(n, bool)
    train[split[: n // 2]] = True
    val[split[n // 2 : 3 * n // 4]] = True
    test[split[3 * n // 4 :]] = True
    return dict(src=src, dst=dst, x=x, y=labels, train=train, val=val, test=test,
                n=n, classes=classes, directed=directed)


def write_random_graph(path: Path | str, **kwargs) -> Path:
    """Write :func:`random_graph_arrays` to ``path`` and return the path."""
    g = random_graph_arrays(**kwargs)
    with EdgeSorter(g["n"], g["directed"], len(g["src"])) as sorter:
        sorter.add(g["src"], g["dst"])
        with GraphFileWriter(
            path, num_nodes=g["n"], num_features=g["x"].shape[1], num_classes=g["classes"],
            directed=g["directed"], name="test", show_progress=False,
        ) as w:
            w.write_adjacency(sorter)
            w.write_features(0, g["x"])
            w.write_labels(g["y"])
            w.write_masks(g["train"], g["val"], g["test"])
    return Path(path)
