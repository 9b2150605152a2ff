"""Halo index sets of a contiguous vertex partition and their point-to-point exchange.

Rank ``r`` owns vertices ``[offsets[r], offsets[r+1])`` and the matching rows of a sparse
matrix ``M`` (``Â^T`` for the forward aggregation, ``Â`` for a pulled backward). The
*halo* of ``r`` is the set of columns of its rows outside its own range: the remote
vertices whose rows of a dense operand ``X`` it needs to form its rows of ``M X``.
Sorted by global id, the halo is grouped by owner. The request lists are exchanged once
(category ``"halo_setup"``), which gives every owner its *send lists*: the local rows
each other rank needs. One exchange then moves every needed row once per
(source, destination) pair in a single all-to-allv (category ``"halo"``); the reverse
exchange sends rows back along the same pairs and scatter-adds them at the owners.

For ``M = Â^T`` the halo of ``r`` is ``{v : Â[v, i] != 0, i owned by r, v remote}``; the
halo of ``Â``'s rows is ``{u : Â[i, u] != 0, ...}``. They coincide for undirected graphs
only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.kernels.rows import gather_rows, scatter_add_rows, scatter_map
from hpcgnn.layout.block_counts import remote_columns
from hpcgnn.layout.blocks import owner_of

HALO = "halo"
HALO_SETUP = "halo_setup"


def local_matrix(rows: sp.csr_matrix, lo: int, hi: int, halo: np.ndarray) -> sp.csr_matrix:
    """Compress ``rows`` (all ``n`` columns) to columns ``[owned | halo]``.

    Owned vertex ``v`` becomes column ``v - lo``; halo vertex ``halo[j]`` becomes column
    ``(hi - lo) + j``. Every column of ``rows`` must be owned or in ``halo``.
    """
    own = hi - lo
    idx = np.asarray(rows.indices, dtype=np.int64)
    remote = (idx < lo) | (idx >= hi)
    new = idx - lo
    new[remote] = own + np.searchsorted(halo, idx[remote])
    return sp.csr_matrix(
        (rows.data, new, rows.indptr), shape=(rows.shape[0], own + len(halo))
    )


def request_rows(
    comm: Comm, ids: np.ndarray, offsets: np.ndarray, category: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Send the sorted global ``ids`` to their owners (collective all-to-allv).

    Returns ``(counts, requests, served_counts)``: how many ids each owner got from this
    rank, the ids this rank was asked for (in requester order, int64), and how many each
    requester asked for.
    """
    counts = np.bincount(owner_of(ids, offsets), minlength=comm.size).astype(np.int64)
    requests, served_counts = comm.alltoallv(np.asarray(ids, dtype=np.int64), counts, category)
    return counts, requests.astype(np.int64), served_counts


@dataclass
class HaloSets:
    """One rank's halo and send lists for one matrix.

    Attributes
    ----------
    halo
        Global ids of the remote vertices this rank needs, sorted (grouped by owner).
    recv_counts
        ``recv_counts[k]``: how many of them rank ``k`` owns.
    send_rows
        Local row ids (relative to this rank's first vertex) the other ranks need,
        concatenated in destination-rank order, each destination's in its halo order.
    send_counts
        ``send_counts[d]``: how many rows go to rank ``d``.
    """

    halo: np.ndarray
    recv_counts: np.ndarray
    send_rows: np.ndarray
    send_counts: np.ndarray


def halo_sets(comm: Comm, rows: sp.csr_matrix, offsets: np.ndarray) -> HaloSets:
    """Find this rank's halo of ``rows`` and exchange the requests (collective).

    Parameters
    ----------
    comm
        The ranks of the partition; rank ``r`` owns ``[offsets[r], offsets[r+1])``.
    rows
        This rank's rows of the matrix, all ``n`` columns (global column ids).
    offsets
        Vertex offsets, ``len(offsets) == comm.size + 1``.
    """
    lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
    halo = remote_columns(rows.indices, lo, hi)
    recv_counts, requests, send_counts = request_rows(comm, halo, offsets, HALO_SETUP)
    return HaloSets(halo, recv_counts, requests - lo, send_counts)


class HaloExchange:
    """Gather of halo rows and the reverse scatter-add, one all-to-allv each.

    Parameters
    ----------
    comm
        The partition's communicator (bytes recorded under ``category``).
    sets
        This rank's halo and send lists.
    category
        Communication category of the exchanges.
    methods
        The pair method of every peer (:mod:`hpcgnn.planning.methods`), by which the
        exchanges' bytes are also counted (:attr:`hpcgnn.comm.stats.CommStats.methods`);
        ``None``: not split.
    """

    def __init__(
        self, comm: Comm, sets: HaloSets, category: str = HALO,
        methods: list[str] | None = None,
    ) -> None:
        self.comm = comm
        self.sets = sets
        self.category = category
        self.methods = methods
        self._send_rows = comm.device.from_numpy(sets.send_rows)
        # the fixed-order inverse map of the static send rows: a GPU adds duplicates
        # without atomics, in the CPU's order (made once, not per backward)
        self._send_map = scatter_map(self._send_rows)

    def gather(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Rows of ``X`` for this rank's halo (in halo order), given its owned rows ``x``.

        ``out``: where the rows go (contiguous, one per halo vertex; a new tensor when
        ``None``).
        """
        send = gather_rows(x, self._send_rows)
        recv, _ = self.comm.alltoallv(
            send, self.sets.send_counts, self.category, recvcounts=self.sets.recv_counts,
            methods=self.methods, out=out,
        )
        return recv

    def scatter_add(self, halo_rows: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Send ``halo_rows`` (one per halo vertex) back to the owners; add them into ``out``.

        ``out`` holds this rank's owned rows; it is updated in place and returned.
        """
        recv, _ = self.comm.alltoallv(
            halo_rows.contiguous(), self.sets.recv_counts, self.category,
            recvcounts=self.sets.send_counts, methods=self.methods,
        )
        return scatter_add_rows(out, self._send_map, recv)
