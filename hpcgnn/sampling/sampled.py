"""The sampled minibatch: per-hop adjacency matrices in local and global vertex ids.

Hop ``h`` of a batch is a ``len(rows) x len(cols)`` CSR matrix. Hop 0's rows are the
batch's seed vertices; hop ``h + 1``'s rows are hop ``h``'s columns. A model of ``L``
layers applies hop ``L - 1`` first (to the features of hop ``L - 1``'s columns, the
*input vertices*) and hop 0 last (producing the seeds' outputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


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

    rows: np.ndarray
    cols: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray

    @property
    def nnz(self) -> int:
        """Sampled edges."""
        return len(self.indices)

    def matrix(self, dtype: np.dtype | type = np.float64) -> sp.csr_matrix:
        """The hop as a local ``len(rows) x len(cols)`` CSR matrix."""
        return sp.csr_matrix(
            (self.values.astype(dtype), self.indices, self.indptr),
            shape=(len(self.rows), len(self.cols)),
        )

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
    def input_ids(self) -> np.ndarray:
        """Vertices whose features the first layer reads (the last hop's columns)."""
        return self.hops[-1].cols if self.hops else self.seeds

    @property
    def nnz(self) -> int:
        """Sampled edges over all hops."""
        return sum(h.nnz for h in self.hops)


def split_stacked(
    row_ptr: np.ndarray, rows: np.ndarray, col_ptr: np.ndarray, cols: np.ndarray,
    indptr: np.ndarray, indices: np.ndarray, values: np.ndarray,
) -> list[SampledHop]:
    """Cut a stacked (bulk) hop into one :class:`SampledHop` per batch.

    ``row_ptr``/``col_ptr`` delimit each batch's rows and columns; ``indices`` are
    batch-local column positions.
    """
    out = []
    for b in range(len(row_ptr) - 1):
        r0, r1 = int(row_ptr[b]), int(row_ptr[b + 1])
        e0, e1 = int(indptr[r0]), int(indptr[r1])
        out.append(SampledHop(
            rows=rows[r0:r1], cols=cols[int(col_ptr[b]) : int(col_ptr[b + 1])],
            indptr=indptr[r0 : r1 + 1] - e0, indices=indices[e0:e1], values=values[e0:e1],
        ))
    return out
