"""Convert the public Planetoid files (Cora, CiteSeer, PubMed) with their standard split.

The raw files (Yang et al. 2016, as used by Kipf & Welling's GCN) are
``ind.NAME.{x,y,tx,ty,allx,ally,graph}``, Python 2 pickles of SciPy sparse matrices,
one-hot NumPy arrays and a ``{vertex: [neighbours]}`` dict, plus ``ind.NAME.test.index``,
one test vertex id per line. The conversion reproduces ``load_data`` of the GCN code:

- vertices ``0 .. len(allx)-1`` take the rows of ``allx``/``ally``; the ``k``-th id of
  ``test.index`` takes row ``k`` of ``tx``/``ty``;
- test ids need not be contiguous: ids in ``[len(allx), n)`` missing from ``test.index``
  (15 isolated CiteSeer vertices) get all-zero feature rows, which is what the GCN code's
  zero-padding of ``tx``/``ty`` amounts to. ``n = max(len(allx) + len(tx), max(test) + 1)``;
- labels are the argmax of the one-hot rows; an all-zero label row (those missing ids)
  becomes ``-1``, unlabelled, and such vertices are in no mask;
- train = ``range(len(y))``, val = the next 500 ids (fewer if ``allx`` ends first),
  test = the ids in ``test.index`` — 140/500/1000 (Cora), 120/500/1000 (CiteSeer),
  60/500/1000 (PubMed);
- the graph is made undirected, self loops and duplicate edges are dropped;
- features are row-normalised (each row divided by its sum, as Kipf & Welling's
  preprocessing does; ``normalize_features=False``: stored as given, binary bag of words
  and TF-IDF for PubMed).
"""

from __future__ import annotations

import os
import time
from itertools import chain
from pathlib import Path
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import EdgeSorter
from hpcgnn.io import format as fmt
from hpcgnn.io.arrays import row_normalized
from hpcgnn.prepare.features import sparse_feature_blocks
from hpcgnn.prepare.legacy_pickle import load_legacy_pickle
from hpcgnn.prepare.output import GraphParts, check_memory, write_graph
from hpcgnn.prepare.splits import drop_unlabelled, masks_from_ids
from hpcgnn.prepare.summary import PrepareSummary
from hpcgnn.prepare.textfile import read_column

PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph")

#: Size of the standard validation set.
VAL_SIZE = 500


def find_planetoid_dir(root: str | os.PathLike, name: str) -> Path:
    """Return the directory holding ``ind.NAME.*`` under ``root``.

    Looks in ``root``, ``root/raw`` and ``root/<Name>/raw`` (the PyTorch Geometric
    layout, any capitalisation of the name).
    """
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: no such directory (Planetoid root)")
    candidates = [root, root / "raw"]
    candidates += [
        d / "raw" for d in sorted(root.iterdir()) if d.is_dir() and d.name.lower() == name
    ]
    for d in candidates:
        if (d / f"ind.{name}.x").is_file():
            return d
    raise InputError(
        f"{root}: no Planetoid files ind.{name}.{{x,y,tx,ty,allx,ally,graph,test.index}} "
        f"(looked in {', '.join(str(d) for d in candidates)})"
    )


def _matrix(obj: Any, path: Path) -> sp.sparray | sp.spmatrix | np.ndarray:
    """``obj`` checked to be a 2-D numeric matrix and left as it is, sparse or dense.

    Nothing is converted yet: a sparse matrix may declare any shape in a few bytes, and
    the sizes are checked before anything of that size is allocated.
    """
    matrix = obj if sp.issparse(obj) else np.asarray(obj)
    if matrix.ndim != 2 or np.dtype(matrix.dtype).kind not in "biuf":
        raise InputError(f"{path}: expected a 2-D numeric matrix, got {type(obj).__name__} "
                         f"of shape {matrix.shape}")
    return matrix


def _dense(matrix: sp.sparray | sp.spmatrix | np.ndarray) -> np.ndarray:
    return cast(Any, matrix).toarray() if sp.issparse(matrix) else matrix


def _graph_edges(graph: Any, path: Path) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(graph, dict):
        raise InputError(f"{path}: expected a dict of adjacency lists, got {type(graph).__name__}")
    try:
        keys = np.fromiter(graph.keys(), dtype=np.int64, count=len(graph))
        lengths = np.fromiter((len(v) for v in graph.values()), dtype=np.int64, count=len(graph))
        dst = np.fromiter(chain.from_iterable(graph.values()), dtype=np.int64,
                          count=int(lengths.sum()))
    except (TypeError, ValueError, OverflowError) as err:
        raise InputError(f"{path}: adjacency lists must map integer ids to integer lists") from err
    return np.repeat(keys, lengths), dst


def read_planetoid(directory: Path, name: str) -> dict[str, Any]:
    """Load the seven pickles and the test index of dataset ``name`` from ``directory``."""
    raw = {p: load_legacy_pickle(directory / f"ind.{name}.{p}") for p in PARTS}
    raw["test.index"] = read_column(directory / f"ind.{name}.test.index", np.int64,
                                    "Planetoid test index")
    return raw


def convert_planetoid(
    root: str | os.PathLike,
    name: str,
    out: str | os.PathLike,
    *,
    tmpdir: str | os.PathLike | None = None,
    show_progress: bool = True,
    normalize_features: bool = True,
) -> PrepareSummary:
    """Convert Planetoid dataset ``name`` (e.g. ``cora``) found under ``root`` to ``out``.

    Parameters
    ----------
    root
        Directory with the ``ind.NAME.*`` files (or ``raw/`` or ``<Name>/raw/`` below it).
    name
        Dataset name as in the file names; matched case-insensitively.
    out
        Output ``.h5`` path.
    tmpdir
        Directory for the edge sorter's spill files.
    show_progress
        Show progress bars.
    normalize_features
        Divide every feature row by its sum (rows of zeros stay zero), as Kipf & Welling's
        preprocessing does; recorded in the file (``feature_normalization = "row"``).
        ``False``: the values as the files give them.

    """
    started = time.perf_counter()
    name = name.lower()
    directory = find_planetoid_dir(root, name)
    raw = read_planetoid(directory, name)
    path = {p: directory / f"ind.{name}.{p}" for p in (*PARTS, "test.index")}

    allx, tx = _matrix(raw["allx"], path["allx"]), _matrix(raw["tx"], path["tx"])
    ally, ty = _matrix(raw["ally"], path["ally"]), _matrix(raw["ty"], path["ty"])
    num_train = _matrix(raw["y"], path["y"]).shape[0]
    test_ids = raw["test.index"]
    src, dst = _graph_edges(raw["graph"], path["graph"])
    n_all, n_test, width = allx.shape[0], tx.shape[0], allx.shape[1]
    # Test ids may leave gaps (CiteSeer), but not beyond the vertices of the graph.
    bound = max(n_all + n_test, int(max(src.max(), dst.max())) + 1 if src.size else 0)
    lowest, highest = (int(test_ids.min()), int(test_ids.max())) if test_ids.size else (n_all, -1)
    checks = [
        (tx.shape[1] == width, f"{path['tx']}: {tx.shape[1]} features but allx has {width}"),
        (ally.shape[0] == n_all, f"{path['ally']}: {ally.shape[0]} rows but allx has {n_all}"),
        (ty.shape[0] == n_test, f"{path['ty']}: {ty.shape[0]} rows but tx has {n_test}"),
        (ty.shape[1] == ally.shape[1],
         f"{path['ty']}: {ty.shape[1]} classes but ally has {ally.shape[1]}"),
        (test_ids.size == n_test,
         f"{path['test.index']}: {test_ids.size} ids but tx has {n_test} rows"),
        (num_train <= n_all, f"{path['y']}: {num_train} training rows but allx has {n_all}"),
        (lowest >= 0, f"{path['test.index']}: test id {lowest} is negative"),
        (lowest >= n_all,
         f"{path['test.index']}: test id {lowest} overlaps the {n_all} rows of allx"),
        (highest < bound,
         f"{path['test.index']}: test id {highest} is beyond the {bound} vertices of the dataset "
         f"(rows of allx and tx, ids in {path['graph'].name})"),
        (np.unique(test_ids).size == test_ids.size, f"{path['test.index']}: repeated test ids"),
    ]
    for ok, message in checks:
        if not ok:
            raise InputError(message)
    n = max(n_all + n_test, highest + 1)
    num_classes = ally.shape[1]
    check_memory(
        f"{directory / f'ind.{name}.*'}: {n} vertices, {width} features, {num_classes} classes",
        n, width, stored_edges=2 * src.size,
        extra_bytes=n * (16 * num_classes + 32),  # dense one-hot rows, CSR row pointers
        error=InputError,
    )

    # Row k of tx/ty goes to vertex test_ids[k]; ids in the gap stay zero.
    place = sp.csr_matrix(
        (np.ones(n_test), (test_ids - n_all, np.arange(n_test))), shape=(n - n_all, n_test)
    )
    features = sp.vstack([sp.csr_matrix(allx), place @ sp.csr_matrix(tx)], format="csr")
    if normalize_features:
        features = row_normalized(features)
    onehot = np.vstack([_dense(ally), place @ _dense(ty)])
    labels = np.where(onehot.any(axis=1), onehot.argmax(axis=1), fmt.UNLABELLED).astype(np.int64)

    masks = masks_from_ids(
        n, np.arange(num_train), np.arange(num_train, min(num_train + VAL_SIZE, n_all)), test_ids,
        source=str(directory),
    )
    with EdgeSorter(n, directed=False, expected_edges=src.size, tmpdir=tmpdir) as sorter:
        sorter.add(src, dst, path["graph"])
        parts = GraphParts(
            num_nodes=n,
            num_features=width,
            num_classes=num_classes,
            feature_blocks=sparse_feature_blocks(features),
            labels=labels,
            masks=drop_unlabelled(labels, masks),
            name=name,
            source=f"planetoid:{directory}",
            sparse_features=True,  # bag of words (TF-IDF for PubMed): 1-10% nonzero
            feature_normalization="row" if normalize_features else "",
        )
        return write_graph(out, sorter, parts, started=started, show_progress=show_progress)
