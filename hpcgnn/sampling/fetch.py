"""Feature fetching: the rows of ``H`` a minibatch reads, by all-to-all(v) in the process column.

``H`` (features and labels) is distributed 1.5D: process row ``i`` holds block row ``i``
(vertices ``[offsets[i], offsets[i+1])``), replicated on its ``c`` ranks, so every
process column holds all of ``H`` and a rank fetches only from the ``P/c`` ranks of its
own column: the ids go out (``feature_request``), the feature rows and labels come back
(``feature_fetch``). More replication means fewer, larger peers per column.

Sparse features (CSR, :mod:`hpcgnn.kernels.sparse_input`) travel as their nonzeros: the
column indices (``int32``) and the values of the rows asked for. The rows' lengths are
known to every rank of the column (gathered once at set-up, like the sampler's row
lengths), so a fetch sends no lengths and the cost model knows its bytes in advance.

On a GPU the dense rows are gathered from the block held on the device (the copy the
full-graph evaluation reads), travel through the communicator's wire (device buffers
to a CUDA-aware MPI, else staged through pinned host buffers) and arrive on the device:
the batch's features never pass through pageable host memory. Labels and sparse rows
are served from the host arrays.

Labels travel as held: a class id is an ``int64`` (8 bytes), a multi-label row of the
``(n, C)`` 0/1 matrix (``--loss bce``) its ``C`` ``uint8`` entries (``C`` bytes,
:attr:`FeatureFetcher.label_bytes`).
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.layout.blocks import owner_of

REQUEST = "feature_request"
FETCH = "feature_fetch"
#: Bytes of one column index of a sparse feature row on the wire.
INDEX_BYTES = 4

#: A block of features as held: dense rows, or CSR.
Features: TypeAlias = np.ndarray | sp.csr_matrix


class FeatureFetcher:
    """Serve this process row's block of ``H`` and fetch arbitrary rows from the column.

    Parameters
    ----------
    col
        The process column (rank ``k`` holds block row ``k``).
    offsets
        Vertex offsets of the block rows.
    features
        This block row's features (``n_i x f``), dense or CSR.
    labels
        This block row's labels: class ids (``n_i``, int64), or multi-label rows
        (``n_i x C``, a 0/1 matrix kept as uint8).
    on_device
        The same dense block on the GPU (``None``: fetch from ``features`` on the host).

    Attributes
    ----------
    lengths
        Sparse features: the nonzeros of every vertex's row (gathered over the column, one
        ``control`` all-gather at set-up); ``None`` for dense features.
    """

    def __init__(
        self, col: Comm, offsets: np.ndarray, features: Features, labels: np.ndarray,
        on_device: torch.Tensor | None = None,
    ) -> None:
        self.col = col
        self.on_device = None if sp.issparse(features) else on_device
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.lo = int(self.offsets[col.rank])
        self.labels = np.ascontiguousarray(
            labels, dtype=np.int64 if np.ndim(labels) == 1 else np.uint8
        )
        self.lengths: np.ndarray | None = None
        self.features: Features
        if sp.issparse(features):
            csr = sp.csr_matrix(features)
            csr.sort_indices()
            self.features = csr
            self.lengths = col.allgatherv(np.diff(csr.indptr).astype(np.int64), "control")
        else:
            self.features = np.ascontiguousarray(features)

    @property
    def sparse(self) -> bool:
        """Whether the rows travel as CSR nonzeros."""
        return self.lengths is not None

    @property
    def label_bytes(self) -> int:
        """Bytes of one vertex's label on the wire: 8 (a class id), or ``C`` (a 0/1 row)."""
        return self.labels.itemsize * int(np.prod(self.labels.shape[1:], dtype=np.int64))

    @property
    def device(self) -> str:
        """Where the features are gathered: ``cuda`` or ``cpu`` (``sampling.feature_device``)."""
        return "cpu" if self.on_device is None else "cuda"

    def fetch(self, ids: np.ndarray) -> tuple[Features | torch.Tensor, np.ndarray]:
        """Features (dense, or CSR) and labels of the global vertices ``ids`` (any order).

        The labels are class ids, or a multi-label file's ``(len(ids), C)`` uint8 rows.

        Collective: every rank of the column must call it, with its own (possibly empty)
        ``ids``. The dense rows are a tensor on the GPU when :attr:`on_device` is set.
        """
        ids = np.asarray(ids, dtype=np.int64)
        owner = owner_of(ids, self.offsets)
        order = np.argsort(owner, kind="stable")
        counts = np.bincount(owner, minlength=self.col.size).astype(np.int64)
        asked, asked_counts = self.col.alltoallv(ids[order], counts, REQUEST)
        local = asked - self.lo
        if self.on_device is not None:
            return self._fetch_on_device(local, asked_counts, counts, order), self._labels(
                local, asked_counts, counts, order)
        if self.sparse:
            x_in = self._fetch_rows(local, asked_counts, ids[order], owner[order])
        else:
            x_in, _ = self.col.alltoallv(
                np.ascontiguousarray(self.features[local]), asked_counts, FETCH,
                recvcounts=counts,
            )
        y = self._labels(local, asked_counts, counts, order)
        if self.sparse:
            return x_in[np.argsort(order, kind="stable")], y
        x = np.empty_like(x_in)
        x[order] = x_in
        return x, y

    def _labels(self, local: np.ndarray, asked_counts: np.ndarray, counts: np.ndarray,
                order: np.ndarray) -> np.ndarray:
        """The labels of the peers' ``local`` rows, back in the order of the ids asked for."""
        y_in, _ = self.col.alltoallv(self.labels[local], asked_counts, FETCH, recvcounts=counts)
        y = np.empty_like(y_in)
        y[order] = y_in
        return y

    def _fetch_on_device(self, local: np.ndarray, asked_counts: np.ndarray, counts: np.ndarray,
                         order: np.ndarray) -> torch.Tensor:
        """The dense rows, gathered, exchanged and put in order on the GPU."""
        assert self.on_device is not None
        dev = self.on_device.device
        rows = self.on_device[torch.as_tensor(local, device=dev)]
        x_in, _ = self.col.alltoallv(rows, asked_counts, FETCH, recvcounts=counts)
        x = torch.empty_like(x_in)
        x[torch.as_tensor(order, device=dev)] = x_in
        return x

    def _fetch_rows(self, local: np.ndarray, asked_counts: np.ndarray, wanted: np.ndarray,
                    owners: np.ndarray) -> sp.csr_matrix:
        """The CSR rows ``wanted`` (grouped by their ``owners``) for the peers' ``local`` rows.

        Two messages: the column indices, then the values; the lengths are known.
        """
        assert self.lengths is not None
        rows = self.features[local]
        send_nnz = np.diff(rows.indptr[np.concatenate([[0], np.cumsum(asked_counts)])])
        lengths = self.lengths[wanted]
        recv_nnz = np.bincount(owners, weights=lengths, minlength=self.col.size).astype(np.int64)
        cols, _ = self.col.alltoallv(rows.indices.astype(np.int32), send_nnz, FETCH, recv_nnz)
        vals, _ = self.col.alltoallv(rows.data, send_nnz, FETCH, recv_nnz)
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return sp.csr_matrix((vals, cols, indptr), shape=(len(wanted), self.features.shape[1]))
