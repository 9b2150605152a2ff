"""Write a small graph as a PyG user and a benchmark user hold one: ``D.pt`` and ``F.npz``.

``python examples/own_graph/write_inputs.py DIR`` writes ``DIR/data.pt`` (a PyG ``Data``
saved with ``torch.save``; its ``to_dict()`` where PyG is not installed) and
``DIR/graph.npz`` (the benchmark layout: ``adj_*``, ``attr_*``, ``labels``), a graph with
class structure that a GCN learns. Then::

    hpcgnn prepare pyg --file DIR/data.pt --out DIR/pyg.h5
    hpcgnn prepare npz --file DIR/graph.npz --split per-class --val-size 100
        --test-size 200 --row-normalize --out DIR/npz.h5    (one line)
    mpiexec -n 2 hpcgnn train DIR/pyg.h5 --epochs 20

``make wheel-check`` runs these from the installed wheel (``inputs/README.md``, "Your own
graph").
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

N, CLASSES, FEATURES = 400, 4, 32


def arrays(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges mostly within a class (both directions), bag-of-words-like features, labels."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, N)
    src = rng.integers(0, N, 4 * N)
    same = [np.flatnonzero(y == c) for c in range(CLASSES)]
    dst = np.array([rng.choice(same[y[u]]) if rng.random() < 0.8 else rng.integers(N)
                    for u in src])
    words = (rng.random((N, FEATURES)) < 0.05) | (
        rng.random((N, FEATURES)) < 0.3) & (np.arange(FEATURES) % CLASSES == y[:, None])
    return np.stack([np.r_[src, dst], np.r_[dst, src]]), words.astype(np.float32), y


def main(directory: str) -> None:
    """Write ``data.pt`` and ``graph.npz`` of :func:`arrays` into ``directory``."""
    out = Path(directory)
    edges, x, y = arrays()
    idx = np.arange(N)
    data = {"x": torch.from_numpy(x), "edge_index": torch.from_numpy(edges),
            "y": torch.from_numpy(y), "train_mask": torch.from_numpy(idx < 200),
            "val_mask": torch.from_numpy((idx >= 200) & (idx < 300)),
            "test_mask": torch.from_numpy(idx >= 300)}
    try:
        from torch_geometric.data import Data

        torch.save(Data(**data), out / "data.pt")
    except ImportError:
        torch.save(data, out / "data.pt")
    a = sp.csr_matrix((np.ones(edges.shape[1]), (edges[0], edges[1])), shape=(N, N))
    a.data[:] = 1.0
    f = sp.csr_matrix(x)
    np.savez(out / "graph.npz", adj_data=a.data, adj_indices=a.indices, adj_indptr=a.indptr,
             adj_shape=np.array(a.shape), attr_data=f.data, attr_indices=f.indices,
             attr_indptr=f.indptr, attr_shape=np.array(f.shape), labels=y)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
