"""Rows of the sampling matrix ``S`` addressed by global vertex id.

The samplers draw neighbours from the rows of ``A^T`` (row ``v`` lists the in-neighbours
of ``v``, the vertices GNN aggregation at ``v`` reads; for undirected graphs ``A^T = A``):

- node-wise (GraphSAGE's, ``sage``): ``S = A^T`` with unit values;
- layer-wise (``ladies``): ``S = D^{-1} (A^T + I)``, the row-normalised in-neighbourhood
  with a self loop (LADIES' ``row_normalize(A + I)``), values ``1 / |row|``.

What a sampler's ``S`` is comes from the :class:`~hpcgnn.sampling.samplers.Sampler`.

Both are stored as a pattern (``indptr``, ``indices``); values are a function of the row
length (:func:`row_values`), so a rank fetching a row of ``S`` from another one receives
only its column ids. A :class:`RowStore` holds any subset of rows (all of them in the
graph-replicated layout; a block row plus fetched rows in the graph-partitioned one), in
NumPy arrays or in tensors on the sampling device (:meth:`RowStore.on`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from hpcgnn.graph.normalize import sum_block
from hpcgnn.io.reader import GraphFile
from hpcgnn.kernels.csr import gather_ranges
from hpcgnn.kinds import Layer
from hpcgnn.sampling.arrays import HOST, Array, HostOps, ops, ops_on
from hpcgnn.sampling.samplers import Sampler

if TYPE_CHECKING:
    from hpcgnn.sampling.matrices import Csr
    from hpcgnn.sampling.sampled import SampledHop


def row_values(normalised: bool, indptr: Array) -> Array:
    """Values of the entries of the rows ``indptr`` describes (float64).

    ``normalised``: ``1 / |row|`` (the mean over the row), else ones.
    """
    xp = ops(indptr)
    lens = xp.diff(indptr)
    if not normalised:
        return xp.ones(int(lens.sum()))
    per_row = 1.0 / xp.float64(xp.maximum(lens, 1))
    return xp.repeat(per_row, lens)


def without_own(indptr: Array, indices: Array, own: Array) -> tuple[Array, Array]:
    """The rows ``(indptr, indices)`` without each row ``r``'s entry at column ``own[r]``.

    The rows of a sampler whose ``S`` has ``A^T + I``'s pattern (LADIES, Cluster-GCN) hold
    their vertex's ``+ I``: without it a row holds the vertex's in-neighbours alone (the
    graph file stores no self loops, ``docs/format.md``), which the mean and the weighted
    operator read. NumPy arrays, or tensors on the sampling device.
    """
    xp = ops(indices)
    row = xp.rows_of(indptr)
    keep = indices != own[row]
    return xp.ptr(xp.bincount(row[keep], len(indptr) - 1)), indices[keep]


@dataclass
class RowStore:
    """A set of rows of the pattern of ``S``, by sorted global vertex id.

    Attributes
    ----------
    ids
        Sorted global ids of the stored rows.
    indptr, indices
        CSR pattern of those rows (``indices`` are global column ids, sorted per row).
    num_nodes
        Number of columns of ``S``.

    """

    ids: Array
    indptr: Array
    indices: Array
    num_nodes: int

    @property
    def xp(self) -> HostOps:
        """The array operations of the store's arrays (host or device)."""
        return ops(self.indices)

    def on(self, device: Any | None) -> RowStore:
        """The store with its arrays on ``device`` (a ``torch.device``; ``None``: the host)."""
        xp = ops_on(device)
        return RowStore(xp.asarray(self.ids), xp.asarray(self.indptr),
                        xp.asarray(self.indices), self.num_nodes)

    @property
    def nnz(self) -> int:
        """Stored nonzeros."""
        return len(self.indices)

    def positions(self, ids: Array) -> Array:
        """Positions of ``ids`` among the stored rows; raises ``KeyError`` if one is absent."""
        xp = self.xp
        ids = xp.int64(ids)
        if len(self.ids) == self.num_nodes:  # every row: ids is arange(n)
            if len(ids) and bool((ids.min() < 0) | (ids.max() >= self.num_nodes)):
                raise KeyError("row id out of range")
            return ids
        pos = xp.minimum(xp.searchsorted(self.ids, ids), max(len(self.ids) - 1, 0))
        ok = self.ids[pos] == ids if len(self.ids) else xp.zeros(len(ids), "bool")
        if not bool(ok.all()):
            raise KeyError(f"row {int(ids[~ok][0])} of S is not held here")
        return pos

    def lengths(self, ids: Array) -> Array:
        """Lengths of rows ``ids`` (int64)."""
        pos = self.positions(ids)
        return self.indptr[pos + 1] - self.indptr[pos]

    def take(self, ids: Array) -> tuple[Array, Array]:
        """The pattern ``(indptr, indices)`` of rows ``ids`` in the given order."""
        return gather_ranges(self.indptr, self.indices, self.positions(ids))

    def matrix(self, ids: Array, sampler: Sampler) -> Csr:
        """Rows ``ids`` of ``S`` with the sampler's values: ``len(ids) x num_nodes`` CSR."""
        from hpcgnn.sampling.matrices import Csr

        ptr, idx = self.take(ids)
        values = row_values(sampler.row_normalised, ptr)
        return Csr(ptr, idx, values, (len(ptr) - 1, self.num_nodes))

    @classmethod
    def merge(cls, parts: list[RowStore], num_nodes: int, xp: HostOps | None = None
              ) -> RowStore:
        """One store holding the rows of several stores with disjoint ids.

        Where the parts are, or ``xp``'s (the host by default) when there is none.
        """
        xp = parts[0].xp if parts else (xp or ops_on(None))
        parts = [p for p in parts if len(p.ids)]
        if not parts:
            return cls(xp.zeros(0), xp.zeros(1), xp.zeros(0), num_nodes)
        ids = xp.concat([p.ids for p in parts])
        ptr = xp.ptr(xp.concat([xp.diff(p.indptr) for p in parts]))
        order = xp.argsort(ids)
        out_ptr, out_idx = gather_ranges(ptr, xp.concat([p.indices for p in parts]), order)
        return cls(ids[order], out_ptr, out_idx, num_nodes)


@dataclass
class EdgeWeights:
    """The graph file's weights of ``A^T``'s entries by global ``(row, column)``.

    The ``"weighted"`` operator's values on a sampled block (:meth:`of_hop`): every rank
    reads them whole (``16`` bytes per edge), so no rank asks another for them.

    Attributes
    ----------
    keys
        ``row * num_nodes + column`` of every entry of ``A^T``, sorted.
    values
        Their weights (float64; ones where the file has none).
    num_nodes
        Vertices.
    """

    keys: Array
    values: Array
    num_nodes: int

    @classmethod
    def read(cls, gf: GraphFile) -> EdgeWeights:
        """Every entry's weight of ``A_w^T`` from ``gf``."""
        n = gf.meta.num_nodes
        a = gf.read_csr(0, n, transpose=True, weights=True)
        a.sum_duplicates()
        a.sort_indices()
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(a.indptr))
        return cls(rows * n + a.indices.astype(np.int64), a.data.astype(np.float64), n)

    def on(self, device: Any | None) -> EdgeWeights:
        """The weights on ``device`` (a ``torch.device``; ``None``: the host)."""
        xp = ops_on(device)
        return EdgeWeights(xp.asarray(self.keys), xp.asarray(self.values, "float64"),
                           self.num_nodes)

    def of_hop(self, hop: SampledHop) -> Array:
        """The weights of a hop's sampled entries (its rows' in-edges from its columns)."""
        xp = ops(hop.indices)
        rows = xp.int64(hop.rows)[xp.rows_of(hop.indptr)]
        keys = rows * self.num_nodes + xp.int64(hop.cols)[hop.indices]
        return self.values[xp.searchsorted(self.keys, keys)]

    def rows(self, lo: int, hi: int, dtype: np.dtype | type) -> sp.csr_matrix:
        """Rows ``[lo, hi)`` of ``A_w^T`` (SciPy CSR, ``dtype``)."""
        n = self.num_nodes
        keys, values = HOST.to_host(self.keys), HOST.to_host(self.values)
        a, b = np.searchsorted(keys, [lo * n, hi * n])
        rows, cols = np.divmod(keys[a:b], n)
        ptr = np.concatenate([[0], np.cumsum(np.bincount(rows - lo, minlength=hi - lo))])
        return sp.csr_matrix((values[a:b].astype(dtype), cols, ptr), shape=(hi - lo, n))


def read_pattern(gf: GraphFile, lo: int, hi: int, sampler: Sampler) -> RowStore:
    """Rows ``[lo, hi)`` of the pattern of ``S`` (``A^T``, plus ``I`` for LADIES) from a file."""
    block = gf.read_csr(lo, hi, transpose=True)
    if sampler.self_loops:
        rows = hi - lo
        eye = sp.csr_matrix(
            (np.ones(rows, dtype=np.float32), np.arange(lo, hi), np.arange(rows + 1)),
            shape=block.shape,
        )
        block = (block + eye).tocsr()
    block.sum_duplicates()
    block.sort_indices()
    return RowStore(
        np.arange(lo, hi, dtype=np.int64), block.indptr.astype(np.int64),
        block.indices.astype(np.int64), gf.meta.num_nodes,
    )


def eval_block(
    store: RowStore, lo: int, hi: int, sampler: Sampler, kind: Layer,
    dtype: np.dtype | type, edge_weights: EdgeWeights | None = None,
) -> sp.csr_matrix:
    """Rows ``[lo, hi)`` of the full-graph operator a sampled model of ``kind`` is evaluated with.

    The sampler's normalised ``S`` (:func:`normalized_block`) for its own operator and for
    ``"mean"`` (``D^-1 A^T``: ``S``'s ``+ I`` left out where it has one), or for
    ``"sum"`` and ``"pattern"`` the sum ``A^T + s I`` of ``S``'s pattern, every stored
    entry counting 1 (``S``'s own ``+ I`` replaced: :func:`~hpcgnn.graph.normalize.sum_block`),
    whose pattern an attention attends over; for ``"weighted"`` the rows of ``A_w^T``
    (``edge_weights``).
    """
    op = kind.operator
    if op.weighted:
        if edge_weights is None:
            raise ValueError("the weighted operator needs the file's edge weights")
        return edge_weights.rows(lo, hi, dtype)
    if op.name in ("sum", "pattern"):
        rows = store.matrix(np.arange(lo, hi), sampler).scipy()
        return sum_block(rows, lo, op.self_weight, dtype, replace_diagonal=sampler.self_loops)
    extra_loops = sampler.self_loops and not op.self_loops  # S's + I, which the mean lacks
    return normalized_block(store, lo, hi, dtype, loops=not extra_loops)


def normalized_block(
    store: RowStore, lo: int, hi: int, dtype: np.dtype | type, loops: bool = True
) -> sp.csr_matrix:
    """Rows ``[lo, hi)`` of the row-normalised ``S`` (mean over the row), for evaluation.

    For ``sage`` it is the full-neighbourhood mean ``D^{-1} A^T`` (zero rows for vertices
    without in-neighbours); for ``ladies`` and ``cluster`` it is ``D^-1 (A^T + I)``, or
    without ``loops`` (``S``'s ``+ I`` left out, :func:`without_own`) the mean
    ``D^{-1} A^T``.
    """
    rows = np.arange(lo, hi, dtype=np.int64)
    ptr, idx = store.take(rows)
    if not loops:
        ptr, idx = without_own(ptr, idx, rows)
    return sp.csr_matrix(
        (row_values(True, ptr).astype(dtype), idx, ptr), shape=(hi - lo, store.num_nodes)
    )
