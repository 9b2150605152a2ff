"""Convert a graph in the common benchmark ``.npz`` layout (``hpcgnn prepare npz``).

The layout of the citation and co-purchase graphs of Shchur et al., "Pitfalls of Graph
Neural Network Evaluation" (2018) and of nettack (Zügner et al. 2018): ``cora.npz``,
``citeseer.npz``, ``pubmed.npz``, ``cora_full.npz``, ``amazon_electronics_computers.npz``,
``ms_academic_cs.npz`` and others. Arrays (read without pickle; members that would need it,
such as ``idx_to_node`` or ``attr_text``, are never read):

- ``adj_data``, ``adj_indices``, ``adj_indptr``, ``adj_shape``: the adjacency as CSR
  (``A[u, v]``: an edge ``u -> v``); values all 1 mean unweighted, else they are weights;
- ``attr_data``, ``attr_indices``, ``attr_indptr``, ``attr_shape``: the features as CSR
  (stored CSR), or ``attr_matrix``: dense features;
- ``labels``: a class id per vertex (negative: unlabelled), or an ``(n, C)`` 0/1 matrix:
  multi-label targets (``--split random``, ``given`` or a file; ``per-class`` refuses);
- optionally ``train_mask``, ``val_mask``, ``test_mask`` (``--split given``).

These files have no split: ``--split per-class`` draws Planetoid's (20 per class / 500 /
1000), ``--split random`` fractions. The graph is made undirected unless ``directed``
(:mod:`hpcgnn.io.arrays`) and written by :func:`~hpcgnn.prepare.output.write_memory_graph`.
"""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import format as fmt
from hpcgnn.io.arrays import labels_of, masks_of
from hpcgnn.io.memory import MemoryGraph
from hpcgnn.prepare.npz import NpzArray
from hpcgnn.prepare.output import write_memory_graph
from hpcgnn.prepare.splits import Masks, SplitSpec
from hpcgnn.prepare.summary import PrepareSummary
from hpcgnn.prepare.textfile import require_file


def _members(path: Path) -> set[str]:
    try:
        with zipfile.ZipFile(path) as z:
            return {n.removesuffix(".npy") for n in z.namelist()}
    except (OSError, zipfile.BadZipFile) as err:
        raise InputError(f"{path}: not a readable .npz archive: {err}") from err


def _read(path: Path, key: str) -> np.ndarray:
    with NpzArray(path, key) as arr:
        return arr.read()


def _csr(path: Path, prefix: str) -> sp.csr_matrix:
    """The CSR matrix of the members ``PREFIX_{data,indices,indptr,shape}``."""
    data, indices, indptr, shape = (_read(path, f"{prefix}_{k}")
                                    for k in ("data", "indices", "indptr", "shape"))
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any():
        raise InputError(f"{path}: '{prefix}_shape' is {shape.tolist()}, expected two sizes")
    try:
        m = sp.csr_matrix((data, indices, indptr), shape=tuple(int(s) for s in shape))
        m.check_format(full_check=True)
    except (ValueError, TypeError) as err:
        raise InputError(f"{path}: '{prefix}_*' is not a CSR matrix: {err}") from err
    return m


def npz_graph(
    path: str | os.PathLike, split: SplitSpec, *, directed: bool = False,
    row_normalize: bool = False, name: str | None = None,
) -> MemoryGraph:
    """The graph of the benchmark ``.npz`` ``path`` in memory, its masks chosen by ``split``."""
    p = require_file(path, "benchmark .npz graph")
    keys = _members(p)
    for need in ("adj_data", "adj_indices", "adj_indptr", "adj_shape", "labels"):
        if need not in keys:
            raise InputError(f"{p}: no array '{need}' (the benchmark layout: adj_*, attr_* or"
                             f" attr_matrix, labels; it holds: {', '.join(sorted(keys))[:200]})")
    a = _csr(p, "adj")
    if a.shape[0] != a.shape[1]:
        raise InputError(f"{p}: the adjacency has shape {a.shape}, expected a square matrix")
    if "attr_data" in keys:
        x: np.ndarray | sp.csr_matrix = _csr(p, "attr")
    elif "attr_matrix" in keys:
        x = _read(p, "attr_matrix")
    else:
        raise InputError(f"{p}: no features (attr_data/attr_indices/attr_indptr/attr_shape or"
                         " attr_matrix)")
    n = a.shape[0]
    source = str(p)
    labels = labels_of(_read(p, "labels"), n, f"{source}: 'labels'")
    named = {m: f"{m}_mask" for m in fmt.MASK_NAMES}
    given: Masks | None = None
    if any(k in keys for k in named.values()):
        found = masks_of({m: _read(p, k) for m, k in named.items() if k in keys}, labels, source)
        given = found["train"], found["val"], found["test"]
    train, val, test = split.masks(labels, given, source)
    weighted = bool(a.nnz) and not np.all(a.data == 1)
    return MemoryGraph.from_arrays(
        features=x, labels=labels, train_mask=train, val_mask=val, test_mask=test,
        adjacency=a, weighted=weighted, directed=directed, row_normalize=row_normalize,
        name=name or p.stem, source=source,
    )


def convert_benchmark_npz(
    file: str | os.PathLike,
    out: str | os.PathLike,
    *,
    split: SplitSpec | None = None,
    directed: bool = False,
    row_normalize: bool = False,
    name: str | None = None,
    tmpdir: str | os.PathLike | None = None,
    show_progress: bool = True,
) -> PrepareSummary:
    """Convert the benchmark-layout ``file`` (module notes) to the graph file ``out``.

    Parameters
    ----------
    file
        An ``.npz`` archive of the benchmark layout.
    out
        Output ``.h5`` path.
    split
        How the masks are chosen (default: the file's masks, ``--split given``).
    directed
        Keep the adjacency's directions (default: made undirected).
    row_normalize
        Divide every feature row by the sum of its absolute values.
    name
        Dataset name stored in the file (default: the file name without extension).
    tmpdir, show_progress
        Spill directory of the edge sorter; progress bars.
    """
    started = time.perf_counter()
    graph = npz_graph(file, split or SplitSpec(), directed=directed,
                      row_normalize=row_normalize, name=name)
    return write_memory_graph(out, graph, source=f"npz:{file}", started=started,
                              tmpdir=tmpdir, show_progress=show_progress)
