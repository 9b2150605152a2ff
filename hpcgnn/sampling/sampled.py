"""The sampled minibatch: per-hop adjacency matrices in local and global vertex ids.

Hop ``h`` of a batch is a ``len(rows) x len(cols)`` CSR matrix. Hop 0's rows are the
batch's seed vertices; hop ``h + 1``'s rows are hop ``h``'s columns. A model of ``L``
layers applies hop ``L - 1`` first (to the features of hop ``L - 1``'s columns, the
*input vertices*) and hop 0 last (producing the seeds' outputs).

A hop sampled on a device keeps its arrays there (tensors): :meth:`SampledHop.matrix`
is then a CSR tensor on that device, ready for the layer's SpMM, and
:meth:`SampledBatch.on_host` copies the batch to the host where NumPy is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from hpcgnn.kernels.cuda_modules import is_tensor
from hpcgnn.sampling.arrays import HOST, Array, ops
from hpcgnn.sampling.matrices import sum_duplicates
from hpcgnn.sampling.rows import row_values, without_own


@dataclass
class SampledHop:
    """One sampled adjacency matrix.

    Attributes
    ----------
    rows, cols
        Global vertex ids of the rows and of the columns (the next hop's vertices).
    indptr, indices, values
        CSR of the matrix; ``indices`` are positions in ``cols`` (sorted per row) and
        ``values`` the aggregation weights the model uses.

    """

    rows: Array
    cols: Array
    indptr: Array
    indices: Array
    values: Array

    @property
    def nnz(self) -> int:
        """Sampled edges."""
        return len(self.indices)

    @property
    def on_device(self) -> bool:
        """Whether the hop's arrays are tensors on the sampling device."""
        return is_tensor(self.indices)

    def on_host(self) -> SampledHop:
        """The hop with NumPy arrays (copied from the device if it is there)."""
        if not self.on_device:
            return self
        return SampledHop(*(HOST.to_host(a) for a in (self.rows, self.cols, self.indptr,
                                                     self.indices, self.values)))

    def matrix(self, dtype: np.dtype | type = np.float64) -> Any:
        """The hop as a local ``len(rows) x len(cols)`` CSR matrix.

        SciPy's for a hop on the host; a ``torch.sparse_csr`` tensor on the device for a
        hop sampled there (``dtype`` a NumPy dtype either way).
        """
        shape = (len(self.rows), len(self.cols))
        if self.on_device:
            import torch

            from hpcgnn.kernels.spmm import index_dtype

            values = self.values.to(torch.float32 if np.dtype(dtype) == np.float32
                                    else torch.float64)
            idx = index_dtype(len(self.indices), shape, self.indices.device)
            return torch.sparse_csr_tensor(self.indptr.to(idx), self.indices.to(idx), values,
                                           size=shape, check_invariants=False)
        return sp.csr_matrix((self.values.astype(dtype), self.indices, self.indptr),
                             shape=shape)

    def own_columns(self, rows_lead: bool = True) -> Array:
        """Each row's own vertex's position among the columns.

        Every row's vertex is a column: ``rows_lead``, the rows are the first columns (the
        node-wise hops, Cluster-GCN's induced subgraphs); else the columns are sorted
        (LADIES keeps the rows among its sorted next vertex set). No device wait either way;
        on the host a row missing from the columns is refused.
        """
        xp = ops(self.indices)
        rows = len(self.rows)
        if rows_lead:
            return xp.arange(rows)
        own = xp.searchsorted(self.cols, self.rows)
        if not self.on_device and rows and not np.array_equal(
            self.cols[np.minimum(own, len(self.cols) - 1)], self.rows
        ):
            raise ValueError("a row's own vertex is not among the hop's columns")
        return own

    def in_edges(self, own: Array) -> SampledHop:
        """The hop without each row's own entry (``own``: :meth:`own_columns`), row means.

        The in-edges alone of a hop whose rows hold ``S``'s ``+ I`` (Cluster-GCN's induced
        subgraph): the mean operator's block ``D_b^-1 A_b^T``, each row ``1 / k`` over its
        ``k`` in-neighbours among the columns (an empty row, a mean of 0, where there are
        none), whose entries the weighted operator gives the file's weights.
        """
        indptr, indices = without_own(self.indptr, self.indices, own)
        return SampledHop(self.rows, self.cols, indptr, indices, row_values(True, indptr))

    def sum_matrix(
        self, self_weight: float, dtype: np.dtype | type = np.float64,
        replace_diagonal: bool = False, own: Array | None = None,
    ) -> Any:
        """The hop's block of GIN's sum and GAT's edges, as :meth:`matrix` gives it.

        Every sampled edge counts 1 and each row's own vertex (:meth:`own_columns`)
        ``self_weight``, duplicates summed, columns sorted: the sampled rows of ``A^T +
        self_weight I`` (:func:`hpcgnn.graph.normalize.sum_block`'s values).
        ``replace_diagonal``: the sampled rows' own entries are ``S``'s ``+ I`` (LADIES'
        ``S = D^-1 (A^T + I)``), so they count ``self_weight`` alone.
        ``own``: :meth:`own_columns` where the caller has it (default: the rows lead).
        """
        xp = ops(self.indices)
        rows, cols = len(self.rows), len(self.cols)
        row = xp.rows_of(self.indptr)
        own = self.own_columns() if own is None else own
        ones = xp.ones(len(row))
        if replace_diagonal:
            ones = xp.where(self.indices == own[row], xp.zeros(len(row), "float64"), ones)
        keys, sums = sum_duplicates(
            xp.concat([row * cols + self.indices, xp.arange(rows) * cols + own]),
            xp.concat([ones, xp.ones(rows) * float(self_weight)]),
        )
        indptr = xp.ptr(xp.bincount(keys // cols, rows))
        return SampledHop(self.rows, self.cols, indptr, keys % cols, sums).matrix(dtype)

    def global_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """``(dst, src)``: global row and column vertex id of every sampled edge."""
        dst = np.repeat(self.rows, np.diff(self.indptr))
        return dst, self.cols[self.indices]


@dataclass
class SampledBatch:
    """All hops of one minibatch."""

    batch: int
    seeds: np.ndarray
    hops: list[SampledHop] = field(default_factory=list)

    @property
    def input_ids(self) -> Array:
        """Vertices whose features the first layer reads (the last hop's columns)."""
        return self.hops[-1].cols if self.hops else self.seeds

    def on_host(self) -> SampledBatch:
        """The batch with every hop's arrays on the host."""
        return SampledBatch(self.batch, self.seeds, [h.on_host() for h in self.hops])

    @property
    def nnz(self) -> int:
        """Sampled edges over all hops."""
        return sum(h.nnz for h in self.hops)


def stack(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate per-batch id arrays into ``(ptr, ids)`` (int64, on the host)."""
    ptr = np.concatenate([[0], np.cumsum([len(a) for a in arrays])]).astype(np.int64)
    ids = np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, np.int64)
    return ptr, ids


def split_stacked(
    row_ptr: Array, rows: Array, col_ptr: Array, cols: Array,
    indptr: Array, indices: Array, values: Array,
) -> list[SampledHop]:
    """Cut a stacked (bulk) hop into one :class:`SampledHop` per batch.

    ``row_ptr``/``col_ptr`` delimit each batch's rows and columns; ``indices`` are
    batch-local column positions. On a device the pointers are read once (three copies to
    the host), the hops are views of the stacked tensors.
    """
    xp = ops(indices)
    edge_ptr = xp.to_host(indptr[row_ptr])
    row_ptr, col_ptr = xp.to_host(row_ptr), xp.to_host(col_ptr)
    out = []
    for b in range(len(row_ptr) - 1):
        r0, r1 = int(row_ptr[b]), int(row_ptr[b + 1])
        e0, e1 = int(edge_ptr[b]), int(edge_ptr[b + 1])
        out.append(SampledHop(
            rows=rows[r0:r1], cols=cols[int(col_ptr[b]) : int(col_ptr[b + 1])],
            indptr=indptr[r0 : r1 + 1] - e0, indices=indices[e0:e1], values=values[e0:e1],
        ))
    return out
