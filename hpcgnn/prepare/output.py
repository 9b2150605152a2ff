"""What every converter shares: a memory check first, and writing the graph file last.

:func:`check_memory` refuses impossible sizes before anything is allocated;
:func:`write_graph` writes the sorted edges, features, labels and masks;
:func:`write_memory_graph` writes a graph held in memory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import ConfigError, HpcgnnError, InputError
from hpcgnn.io import EdgeSorter, GraphFileWriter
from hpcgnn.io import format as fmt
from hpcgnn.io.edges import BYTES_PER_EDGE, EDGES_PER_BUCKET
from hpcgnn.io.memory import MemoryGraph
from hpcgnn.prepare.features import BLOCK_BYTES, array_feature_blocks, sparse_feature_blocks
from hpcgnn.prepare.splits import Masks
from hpcgnn.prepare.summary import PrepareSummary
from hpcgnn.utils.memory import require_memory
from hpcgnn.utils.progress import Progress

#: Memory held per vertex while a graph is prepared: labels, id permutations, masks and
#: node ids (about 40 bytes measured for ``prepare synthetic``).
BYTES_PER_VERTEX = 48


def check_memory(
    what: str,
    num_nodes: int,
    num_features: int,
    stored_edges: int = 0,
    extra_bytes: int = 0,
    error: type[HpcgnnError] = ConfigError,
) -> None:
    """Refuse, before anything is allocated, a graph too large for this node's memory.

    Parameters
    ----------
    what
        The flags or the input that set the sizes, e.g. ``"--nodes 10000000000000"``;
        the message starts with it.
    num_nodes, num_features
        Sizes of the graph.
    stored_edges
        Edge records the sorter holds; at most one bucket of them is in memory at once.
    extra_bytes
        What the converter needs besides, e.g. class centres or one-hot label rows.
    error
        :class:`ConfigError` for flags (default), :class:`InputError` for input files.

    Notes
    -----
    The estimate is :data:`BYTES_PER_VERTEX` per vertex, one bucket of edges being sorted,
    three feature blocks (generated, converted, compressed) and ``extra_bytes``.
    """
    need = (
        num_nodes * BYTES_PER_VERTEX
        + min(stored_edges, EDGES_PER_BUCKET) * BYTES_PER_EDGE
        + 3 * max(BLOCK_BYTES, 4 * num_features)
        + extra_bytes
    )
    require_memory(need, what, error)


@dataclass(frozen=True)
class GraphParts:
    """Everything but the edges of a graph about to be written.

    Attributes
    ----------
    num_nodes, num_features, num_classes
        Sizes; ``num_classes`` must exceed every label.
    feature_blocks
        Consecutive row blocks of the feature matrix covering rows ``0 .. num_nodes-1``,
        consumed lazily so features never need to be in memory at once.
    labels
        Class id per vertex, ``-1`` for unlabelled vertices; or multi-label targets, a
        ``(num_nodes, num_classes)`` 0/1 matrix (written as format version 3).
    masks
        Boolean train, validation and test masks.
    name, source
        Dataset name and provenance stored as attributes.
    node_ids
        Original vertex ids, or ``None`` for ``0 .. num_nodes-1``.
    sparse_features
        Store the features as CSR (``features_csr``: bag-of-words features), else dense.
    feature_normalization
        How the features were normalised (``"row"``), recorded in the file; ``""``: as given.

    """

    num_nodes: int
    num_features: int
    num_classes: int
    feature_blocks: Iterable[np.ndarray | sp.csr_matrix]
    labels: np.ndarray
    masks: Masks
    name: str
    source: str
    node_ids: np.ndarray | None = None
    sparse_features: bool = False
    feature_normalization: str = ""


def write_graph(
    path: str | os.PathLike,
    sorter: EdgeSorter,
    parts: GraphParts,
    *,
    started: float,
    show_progress: bool = True,
) -> PrepareSummary:
    """Write a complete graph file and return its summary.

    Parameters
    ----------
    path
        Output ``.h5`` file (written under a temporary name, renamed when complete).
    sorter
        Holds every edge (with its weight, if the sorter is weighted); consumed by this call.
    parts
        Features, labels, masks and metadata.
    started
        ``time.perf_counter()`` at the start of the run, for the reported wall time.
    show_progress
        Show progress bars for slow steps.

    """
    n = parts.num_nodes
    with GraphFileWriter(
        path,
        num_nodes=n,
        num_features=parts.num_features,
        num_classes=parts.num_classes,
        directed=sorter.directed,
        name=parts.name,
        source=parts.source,
        show_progress=show_progress,
        sparse_features=parts.sparse_features,
        feature_normalization=parts.feature_normalization,
        weight_dtype=sorter.weight_dtype,
        multi_label=parts.labels.ndim == 2,
    ) as writer:
        nnz = writer.write_adjacency(sorter)
        rows = 0
        with Progress("writing features", n, "rows", enabled=show_progress) as bar:
            for block in parts.feature_blocks:
                k = block.shape[0]
                if rows + k > n:
                    raise InputError(
                        f"{parts.source}: more than {n} feature rows (one per vertex expected)"
                    )
                writer.write_features(rows, block)
                rows += k
                bar.update(k)
        if rows != n:
            raise InputError(f"{parts.source}: {rows} feature rows, expected one per vertex ({n})")
        writer.write_labels(parts.labels)
        writer.write_masks(*parts.masks)
        if parts.node_ids is not None:
            writer.write_node_ids(parts.node_ids)
    train, val, test = (int(m.sum()) for m in parts.masks)
    return PrepareSummary(
        path=str(path),
        name=parts.name,
        num_nodes=n,
        num_edges=nnz,
        num_features=parts.num_features,
        num_classes=parts.num_classes,
        directed=sorter.directed,
        train=train,
        val=val,
        test=test,
        unlabelled=int(np.count_nonzero(~fmt.labelled(parts.labels))),
        edges_read=sorter.edges_added,
        seconds=time.perf_counter() - started,
        weighted=sorter.weight_dtype is not None,
    )


def write_memory_graph(
    path: str | os.PathLike,
    graph: MemoryGraph,
    *,
    source: str,
    started: float,
    tmpdir: str | os.PathLike | None = None,
    show_progress: bool = True,
) -> PrepareSummary:
    """Write ``graph`` as a graph file: a file that trains as the graph in memory does.

    An undirected graph's edges go to the sorter once (``u < v``; it adds both
    directions), a directed graph's all; weights, features (dense or CSR), labels, masks
    and the feature normalisation as the graph holds them.
    """
    meta = graph.meta
    n = meta.num_nodes
    a = graph.read_csr(0, n, weights=True).tocoo()
    keep = a.row < a.col if not meta.directed else np.ones(a.nnz, dtype=bool)
    weights = a.dtype if meta.weighted else None
    x = graph.features
    with EdgeSorter(n, meta.directed, int(keep.sum()), tmpdir, weights=weights) as sorter:
        sorter.add(a.row[keep].astype(np.int64), a.col[keep].astype(np.int64), source,
                   weights=a.data[keep] if meta.weighted else None)
        parts = GraphParts(
            num_nodes=n,
            num_features=meta.num_features,
            num_classes=meta.num_classes,
            feature_blocks=(sparse_feature_blocks(x) if sp.issparse(x)
                            else array_feature_blocks(x)),
            labels=graph.read_labels(0, n),
            masks=(graph.read_mask("train", 0, n), graph.read_mask("val", 0, n),
                   graph.read_mask("test", 0, n)),
            name=meta.name,
            source=source,
            sparse_features=sp.issparse(x),
            feature_normalization=meta.feature_normalization,
        )
        return write_graph(path, sorter, parts, started=started, show_progress=show_progress)
