"""Small graphs for tests, written straight through the format writer."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import h5py
import numpy as np

from hpcgnn.io import EdgeSorter, GraphFileWriter


def random_graph_arrays(
    n: int = 60, avg_degree: float = 4.0, features: int = 6, classes: int = 3,
    directed: bool = False, seed: int = 0, feature_density: float = 1.0,
    multi_label: bool = False,
) -> dict:
    """Edges with class structure, features correlated with labels, masks and labels.

    ``feature_density < 1``: each feature entry is kept with that probability, the others
    are zero (bag-of-words-like sparse features). ``multi_label``: ``y`` is an ``(n,
    classes)`` 0/1 matrix instead, each vertex's class set and every other class with
    probability 0.3 (drawn apart: the rest of the graph is the single-label one's).
    """
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
    if feature_density < 1.0:
        x[np.random.default_rng(seed + 1).random(x.shape) >= feature_density] = 0.0
    split = rng.permutation(n)
    train = np.zeros(n, bool)
    val = np.zeros(n, bool)
    test = np.zeros(n, bool)
    train[split[: n // 2]] = True
    val[split[n // 2 : 3 * n // 4]] = True
    test[split[3 * n // 4 :]] = True
    y = labels
    if multi_label:
        extra = np.random.default_rng(seed + 2).random((n, classes)) < 0.3
        y = (extra | (np.arange(classes) == labels[:, None])).astype(np.uint8)
    return dict(src=src, dst=dst, x=x, y=y, train=train, val=val, test=test,
                n=n, classes=classes, directed=directed)


def edge_weights(g: dict, dtype: type = np.float32) -> np.ndarray:
    """Seeded random weights in ``[0.1, 2)``, one per edge record of ``random_graph_arrays``."""
    rng = np.random.default_rng(len(g["src"]))
    return (0.1 + 1.9 * rng.random(len(g["src"]))).astype(dtype)


def write_random_graph(
    path: Path | str, sparse_features: bool = False, weights: type | None = None, **kwargs
) -> Path:
    """Write :func:`random_graph_arrays` to ``path`` and return the path.

    ``sparse_features``: store the features as CSR (``features_csr``). ``weights``: the
    dtype of :func:`edge_weights`, given to every edge (``None``: unweighted).
    ``multi_label=True`` (to :func:`random_graph_arrays`): a multi-label file (version 3).
    """
    g = random_graph_arrays(**kwargs)
    return write_graph_arrays(path, g, sparse_features,
                              None if weights is None else edge_weights(g, weights))


def write_graph_arrays(
    path: Path | str, g: dict, sparse_features: bool = False, w: np.ndarray | None = None
) -> Path:
    """Write the arrays ``g`` (as :func:`random_graph_arrays` returns them) to ``path``.

    ``w``: one weight per edge record (``None``: unweighted).
    """
    weights = None if w is None else w.dtype.type
    with EdgeSorter(g["n"], g["directed"], len(g["src"]), weights=weights) as sorter:
        sorter.add(g["src"], g["dst"], weights=w)
        with GraphFileWriter(
            path, num_nodes=g["n"], num_features=g["x"].shape[1], num_classes=g["classes"],
            directed=g["directed"], name="test", show_progress=False,
            sparse_features=sparse_features, weight_dtype=sorter.weight_dtype,
            multi_label=g["y"].ndim == 2,
        ) as writer:
            writer.write_adjacency(sorter)
            writer.write_features(0, g["x"])
            writer.write_labels(g["y"])
            writer.write_masks(g["train"], g["val"], g["test"])
    return Path(path)


# -- altered copies: valid or broken in one known way ------------------------------------------
def _csr(h5: h5py.File, group: str) -> tuple[np.ndarray, np.ndarray]:
    """(row of every entry, column of every entry) of a CSR group."""
    ptr = h5[f"{group}/indptr"][()]
    return np.repeat(np.arange(len(ptr) - 1), np.diff(ptr)), h5[f"{group}/indices"][()]


def _swappable(rows: np.ndarray, cols: np.ndarray) -> tuple[int, int]:
    """Entries ``p``, ``q`` (``a -> x``, ``b -> y``) whose ``a -> y``, ``b -> x`` are new."""
    edges = set(zip(rows.tolist(), cols.tolist(), strict=True))
    for p in range(len(cols)):
        for q in range(p + 1, len(cols)):
            a, x, b, y = int(rows[p]), int(cols[p]), int(rows[q]), int(cols[q])
            if len({a, b, x, y}) == 4 and (a, y) not in edges and (b, x) not in edges:
                return p, q
    raise ValueError("no swappable pair of entries")


def swap_entries(path: Path | str, group: str = "adjacency") -> None:
    """Swap the columns of two entries of ``group``: every degree stays, the edges change.

    The undirected ``A`` is then not symmetric, or a directed file's ``adjacency_t`` not
    the transpose of ``A``, while every per-vertex degree comparison still agrees.
    """
    with h5py.File(path, "r+") as h5:
        rows, cols = _csr(h5, group)
        p, q = _swappable(rows, cols)
        cols[[p, q]] = cols[[q, p]]
        h5[f"{group}/indices"][...] = cols


def rewire(path: Path | str) -> None:
    """Replace undirected edges ``a-x``, ``b-y`` by ``a-y``, ``b-x``: a valid graph, same sizes."""
    with h5py.File(path, "r+") as h5:
        rows, cols = _csr(h5, "adjacency")
        p, q = _swappable(rows, cols)
        a, x, b, y = (int(v) for v in (rows[p], cols[p], rows[q], cols[q]))
        back = {e: k for k, e in enumerate(zip(rows.tolist(), cols.tolist(), strict=True))}
        cols[p], cols[q] = y, x
        cols[back[(x, a)]], cols[back[(y, b)]] = b, a
        h5["adjacency/indices"][...] = cols


def add_weights(path: Path | str) -> None:
    """Store edge weights ``w(i, j) = 0.5 + ((i + j) % 7) / 4`` (symmetric): a valid version 2."""
    with h5py.File(path, "r+") as h5:
        for group in ("adjacency", "adjacency_t"):
            if group in h5:
                rows, cols = _csr(h5, group)
                h5.create_dataset(f"{group}/data", data=(0.5 + (rows + cols) % 7 / 4), dtype="f4")
        h5.attrs["format_version"] = 2


def add_partition(path: Path | str, offsets: list[int] | np.ndarray, perm: np.ndarray) -> None:
    """Record ``offsets`` and ``perm`` as the file's partition (nothing is relabelled)."""
    with h5py.File(path, "r+") as h5:
        g = h5.create_group("partition")
        g.create_dataset("offsets", data=np.asarray(offsets, dtype=np.int64))
        g.create_dataset("perm", data=np.asarray(perm, dtype=np.int64))
        g.attrs["method"] = "block"
        g.attrs["num_parts"] = len(offsets) - 1


def _two_parts(path: Path | str, repeat: bool = False) -> None:
    """Add a partition into two halves; ``perm`` the identity, or with id 4 twice."""
    with h5py.File(path, "r") as h5:
        n = h5.attrs["num_nodes"]
    perm = np.arange(n)
    if repeat:
        perm[3] = 4
    add_partition(path, [0, n // 2, n], perm)


def _in_place(change: Callable[[h5py.File], None]) -> Callable[[Path | str], None]:
    """``change`` applied to a file opened for writing."""

    def alter(path: Path | str) -> None:
        with h5py.File(path, "r+") as h5:
            change(h5)

    return alter


def _bump_feature(h5: h5py.File) -> None:
    h5["features"][7, 1] += 1.0


def _relabel(h5: h5py.File) -> None:
    h5["labels"][7] = (h5["labels"][7] + 1) % h5.attrs["num_classes"]


def _drop_from_train(h5: h5py.File) -> None:
    h5["masks/train"][int(np.flatnonzero(h5["masks/train"][()])[0])] = False


def _new_node_id(h5: h5py.File) -> None:
    h5["node_ids"][7] = 1000


#: name -> an alteration that keeps a file of :func:`write_random_graph` valid and its sizes
ALTERED: dict[str, Callable[[Path | str], None]] = {
    "features": _in_place(_bump_feature),
    "labels": _in_place(_relabel),
    "masks": _in_place(_drop_from_train),
    "node_ids": _in_place(_new_node_id),
    "edges": rewire,
    "partition": _two_parts,
    "weights": add_weights,
}


def _weighted(change: Callable[[h5py.File], None]) -> Callable[[Path | str], None]:
    """Weights added (:func:`add_weights`), then ``change`` applied."""

    def alter(path: Path | str) -> None:
        add_weights(path)
        _in_place(change)(path)

    return alter


def _nan_weight(h5: h5py.File) -> None:
    h5["adjacency/data"][h5["adjacency/indptr"][7] + 1] = np.nan  # the second entry of row 7


def _asymmetric_weight(h5: h5py.File, group: str = "adjacency") -> None:
    h5[f"{group}/data"][3] += 1.0


def _indptr_starts_at_one(h5: h5py.File) -> None:
    h5["adjacency/indptr"][0] = 1


def _overlapping_masks(h5: h5py.File) -> None:
    h5["masks/train"][0] = h5["masks/val"][0] = True


def _duplicate_node_id(h5: h5py.File) -> None:
    h5["node_ids"][5] = h5["node_ids"][7]


#: name -> (directed, how a file of :func:`write_random_graph` is broken, ``info``'s words)
BROKEN: dict[str, tuple[bool, Callable[[Path | str], None], str]] = {
    "indptr-start": (
        False, _in_place(_indptr_starts_at_one), "'adjacency/indptr' starts at 1, expected 0",
    ),
    "overlapping-masks": (
        False, _in_place(_overlapping_masks),
        "masks overlap: vertex 0 is in both the train and val masks",
    ),
    "not-symmetric": (False, swap_entries, "'adjacency' of an undirected graph is not symmetric"),
    "not-transposed": (
        True, partial(swap_entries, group="adjacency_t"),
        "'adjacency_t' is not the transpose of 'adjacency'",
    ),
    "duplicate-node-id": (
        False, _in_place(_duplicate_node_id), "original id 7 occurs more than once",
    ),
    "perm-not-permutation": (
        False, partial(_two_parts, repeat=True),
        "'partition/perm' is not a permutation of 0..39: id 3 is missing (id 4 occurs 2 times)",
    ),
    "nan-weight": (
        False, _weighted(_nan_weight),
        "edge weights contain NaN or Inf (first in row 7 of 'adjacency')",
    ),
    "asymmetric-weight": (
        False, _weighted(_asymmetric_weight),
        "'adjacency' of an undirected graph is not symmetric in its weights "
        "(some edge has w(i, j) != w(j, i))",
    ),
    "weight-not-transposed": (
        True, _weighted(partial(_asymmetric_weight, group="adjacency_t")),
        "'adjacency_t/data' is not the transpose of 'adjacency/data'",
    ),
}


def write_broken_graph(path: Path | str, name: str, n: int = 40) -> Path:
    """A random graph of ``n`` vertices broken as ``BROKEN[name]`` says."""
    directed, breaks, _ = BROKEN[name]
    write_random_graph(path, n=n, directed=directed, seed=5)
    breaks(path)
    return Path(path)
