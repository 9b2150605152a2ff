"""The last step every converter shares: write sorted edges, features, labels and masks."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from hpcgnn.errors import InputError
from hpcgnn.io import EdgeSorter, GraphFileWriter
from hpcgnn.io import format as fmt
from hpcgnn.prepare.splits import Masks
from hpcgnn.prepare.summary import PrepareSummary
from hpcgnn.utils.progress import Progress


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
        Class id per vertex, ``-1`` for unlabelled vertices.
    masks
        Boolean train, validation and test masks.
    name, source
        Dataset name and provenance stored as attributes.
    node_ids
        Original vertex ids, or ``None`` for ``0 .. num_nodes-1``.

    """

    num_nodes: int
    num_features: int
    num_classes: int
    feature_blocks: Iterable[np.ndarray]
    labels: np.ndarray
    masks: Masks
    name: str
    source: str
    node_ids: np.ndarray | None = None


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
        Holds every edge; consumed by this call.
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
    ) as writer:
        nnz = writer.write_adjacency(sorter)
        rows = 0
        with Progress("writing features", n, "rows", enabled=show_progress) as bar:
            for block in parts.feature_blocks:
                if rows + len(block) > n:
                    raise InputError(
                        f"{parts.source}: more than {n} feature rows (one per vertex expected)"
                    )
                writer.write_features(rows, block)
                rows += len(block)
                bar.update(len(block))
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
        unlabelled=int(np.count_nonzero(parts.labels == fmt.UNLABELLED)),
        edges_read=sorter.edges_added,
        seconds=time.perf_counter() - started,
    )
