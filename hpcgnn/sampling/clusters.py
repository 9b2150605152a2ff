"""Cluster-GCN's minibatches: METIS clusters of the training graph and the subgraphs they induce.

``--sampler cluster --clusters N --clusters-per-batch q`` (Chiang et al., Cluster-GCN; the
"Cluster" minibatches GIST trains on):

1. the *training graph* (the training vertices and the edges among them) is cut into
   ``N`` clusters by METIS (:func:`cluster_parts`, once per run, on world rank 0, which
   broadcasts each training vertex's cluster);
2. each epoch shuffles the clusters (a permutation keyed by ``(seed, epoch)``, the same
   on every rank) and batch ``b`` is the union ``V_b`` of clusters ``b q .. b q + q - 1``
   of that order (:meth:`Clusters.batches`): every training vertex is in exactly one batch
   of the epoch, and is a seed of it;
3. every layer of batch ``b`` reads the subgraph ``V_b`` induces, through
   ``(D_b + I)^-1 (A_b^T + I)`` (Cluster-GCN's normalisation, ``D_b`` the in-degrees
   inside ``V_b``): rows ``V_b`` of the pattern of ``S = A^T + I`` with their columns
   outside ``V_b`` dropped and each row renormalised (:func:`induced_hops`). The links
   between clusters of the same batch are kept, as Cluster-GCN's multiple-cluster batches
   keep them.

Nothing is drawn per hop, so the hops of a batch are one matrix, ``L`` times. The rows
come from any :class:`~hpcgnn.sampling.rows.RowStore` holding ``V_b``: the whole pattern
(graph-replicated layout) or the rows the sparsity-aware 1.5D SpGEMM fetches
(graph-partitioned), on the host or on the sampling device.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpcgnn.partition.methods import metis_partition
from hpcgnn.rng import TAG_CLUSTER
from hpcgnn.sampling.arrays import Array
from hpcgnn.sampling.rows import RowStore, row_values
from hpcgnn.sampling.sampled import SampledBatch, SampledHop, split_stacked, stack
from hpcgnn.sampling.setops import contains
from hpcgnn.sampling.shuffle import permutation

#: METIS takes a C ``int`` seed: the run's seed is folded into ``[0, 2^31)``.
_METIS_SEEDS = 1 << 31


def training_graph(store: RowStore, train_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The training graph's CSR pattern ``(indptr, indices)`` in positions of ``train_ids``.

    Rows ``train_ids`` of ``S`` (on the host) with the columns that are training vertices,
    renumbered ``0 .. len(train_ids) - 1``; self loops and the direction of the edges are
    left to METIS's symmetrisation (:func:`~hpcgnn.partition.methods.symmetrised`).
    """
    ptr, cols = store.take(np.asarray(train_ids, dtype=np.int64))
    ptr, cols = np.asarray(ptr), np.asarray(cols)
    keep = contains(train_ids, cols)
    rows = np.repeat(np.arange(len(train_ids)), np.diff(ptr))[keep]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(train_ids)))])
    return indptr.astype(np.int64), np.searchsorted(train_ids, cols[keep]).astype(np.int64)


def cluster_parts(
    store: RowStore, train_ids: np.ndarray, clusters: int, seed: int
) -> np.ndarray:
    """METIS's cluster of every training vertex (``int64``, in ``[0, clusters)``).

    ``store`` holds (at least) the rows ``train_ids`` of ``S`` on the host.
    """
    import scipy.sparse as sp

    indptr, indices = training_graph(store, train_ids)
    n = len(train_ids)
    graph = sp.csr_matrix((np.ones(len(indices), dtype=np.int8), indices, indptr), shape=(n, n))
    return metis_partition(graph, clusters, seed % _METIS_SEEDS)


@dataclass(frozen=True)
class Clusters:
    """The training vertices grouped by cluster.

    Attributes
    ----------
    ptr
        Cluster ``c`` holds ``vertices[ptr[c]:ptr[c + 1]]`` (``N + 1`` offsets).
    vertices
        Global ids of the training vertices, by cluster, sorted inside each.
    """

    ptr: np.ndarray
    vertices: np.ndarray

    @classmethod
    def of_parts(cls, train_ids: np.ndarray, parts: np.ndarray, count: int) -> Clusters:
        """Group the sorted ``train_ids`` by their cluster ``parts`` (``count`` clusters).

        A cluster METIS left empty (it may, on a training graph with few edges) is dropped,
        so every batch holds training vertices: :attr:`count` may be below ``count``.
        """
        order = np.argsort(parts, kind="stable")  # ids stay sorted inside a cluster
        sizes = np.bincount(parts, minlength=count)
        sizes = sizes[sizes > 0]
        return cls(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                   np.asarray(train_ids, dtype=np.int64)[order])

    @property
    def count(self) -> int:
        """Number of clusters ``N``."""
        return len(self.ptr) - 1

    def batches(self, per_batch: int, seed: int, epoch: int) -> list[np.ndarray]:
        """The epoch's minibatches: ``per_batch`` shuffled clusters each, sorted vertex ids.

        A function of ``(seed, epoch)`` alone; the last batch takes the clusters left over.
        """
        order = permutation(seed, epoch, self.count, TAG_CLUSTER)
        out = []
        for lo in range(0, self.count, per_batch):
            picked = order[lo : lo + per_batch]
            parts = [self.vertices[self.ptr[c] : self.ptr[c + 1]] for c in picked]
            out.append(np.sort(np.concatenate(parts)))
        return out


def induced_hops(
    ptr: Array, ids: Array, store: RowStore
) -> list[SampledHop]:
    """Each stacked batch's induced subgraph as one :class:`SampledHop`.

    ``(ptr, ids)``: the stacked vertex sets ``V_b`` (sorted inside each batch), where
    ``store`` computes. Row ``v`` of batch ``b``'s matrix holds ``v``'s in-neighbours in
    ``V_b`` and ``v`` itself (``S``'s pattern), each ``1 / |row|``; rows and columns are
    ``V_b``.
    """
    xp = store.xp
    n = int(store.num_nodes)
    r_ptr, r_cols = store.take(ids)
    entry_row = xp.rows_of(r_ptr)
    row_batch = xp.rows_of(ptr)
    entry_batch = row_batch[entry_row]
    keys = row_batch * n + ids  # ascending: sorted ids inside ascending batches
    entry_keys = entry_batch * n + r_cols
    hit = contains(keys, entry_keys)
    local = xp.searchsorted(keys, entry_keys[hit]) - ptr[entry_batch[hit]]
    indptr = xp.ptr(xp.bincount(entry_row[hit], len(ids)))
    return split_stacked(ptr, ids, ptr, ids, indptr, local, row_values(True, indptr))


def induced_batches(
    batch_ids: list[int], vertex_sets: list[np.ndarray], store: RowStore, layers: int,
    spans: list[tuple[int, int]] | None = None, stacked: tuple[Array, Array] | None = None,
) -> list[SampledBatch]:
    """The batches ``batch_ids`` (vertex sets ``vertex_sets``) with ``layers`` induced hops.

    Every seed of a batch is a vertex of it (all are training vertices). ``spans``: the
    consecutive batch ranges computed together (default: all at once). ``stacked``: the
    sets already stacked where ``store`` computes (:func:`stack`), if the caller has them.
    """
    xp = store.xp
    if stacked is None:
        ptr_h, ids_h = stack(vertex_sets)
        stacked = (xp.asarray(ptr_h), xp.asarray(ids_h))
    ptr, ids = stacked
    out = []
    for lo, hi in spans or [(0, len(batch_ids))]:
        a, b = ptr[lo], ptr[hi]
        hops = induced_hops(ptr[lo : hi + 1] - a, ids[a:b], store)
        out += [SampledBatch(int(bid), np.asarray(v), [h] * layers)
                for bid, v, h in zip(batch_ids[lo:hi], vertex_sets[lo:hi], hops, strict=True)]
    return out
