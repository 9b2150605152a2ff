"""Feature fetching: the rows of ``H`` a minibatch reads, by all-to-all(v) in the process column.

``H`` (features and labels) is distributed 1.5D: process row ``i`` holds block row ``i``
(vertices ``[offsets[i], offsets[i+1])``), replicated on its ``c`` ranks, so every
process column holds all of ``H`` and a rank fetches only from the ``P/c`` ranks of its
own column: the ids go out (``feature_request``), the feature rows and labels come back
(``feature_fetch``). More replication means fewer, larger peers per column.
"""

from __future__ import annotations

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.layout.blocks import owner_of

REQUEST = "feature_request"
FETCH = "feature_fetch"


class FeatureFetcher:
    """Serve this process row's block of ``H`` and fetch arbitrary rows from the column.

    Parameters
    ----------
    col
        The process column (rank ``k`` holds block row ``k``).
    offsets
        Vertex offsets of the block rows.
    features
        This block row's features (``n_i x f``).
    labels
        This block row's labels (``n_i``, int64).

    """

    def __init__(
        self, col: Comm, offsets: np.ndarray, features: np.ndarray, labels: np.ndarray
    ) -> None:
        self.col = col
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.lo = int(self.offsets[col.rank])
        self.features = np.ascontiguousarray(features)
        self.labels = np.ascontiguousarray(labels, dtype=np.int64)

    def fetch(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Features and labels of the global vertices ``ids`` (any order), collectively.

        Every rank of the column must call it, with its own (possibly empty) ``ids``.
        """
        ids = np.asarray(ids, dtype=np.int64)
        owner = owner_of(ids, self.offsets)
        order = np.argsort(owner, kind="stable")
        counts = np.bincount(owner, minlength=self.col.size).astype(np.int64)
        asked, asked_counts = self.col.alltoallv(ids[order], counts, REQUEST)
        local = asked - self.lo
        x_in, _ = self.col.alltoallv(
            np.ascontiguousarray(self.features[local]), asked_counts, FETCH, recvcounts=counts
        )
        y_in, _ = self.col.alltoallv(self.labels[local], asked_counts, FETCH, recvcounts=counts)
        x = np.empty_like(x_in)
        y = np.empty_like(y_in)
        x[order] = x_in
        y[order] = y_in
        return x, y
