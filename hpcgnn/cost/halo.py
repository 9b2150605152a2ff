"""Communication cost model of the halo-exchange (p2p) full-batch GCN.

The halo volume depends on the graph, not only on its size: :func:`halo_volumes` counts
from the file the (vertex, destination rank) pairs each exchange moves, and
:func:`predict_halo` turns them into bytes per epoch in
:class:`hpcgnn.comm.stats.CommStats` accounting (summed over ranks).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from hpcgnn.cost.estimate import Estimate, Problem, allreduce_exact
from hpcgnn.io.reader import GraphFile
from hpcgnn.layout.block_counts import halo_pairs
from hpcgnn.layout.shapes import GridShape
from hpcgnn.layout.trace import row_exchange_widths


@dataclass(frozen=True)
class HaloVolumes:
    """Halo sizes of a contiguous partition, per rank.

    Attributes
    ----------
    fwd_recv
        ``|halo_fwd(r)|``: remote vertices of ``r``'s ``Â^T`` rows (forward gather).
    fwd_send
        Pairs ``(v, d)`` with ``v`` owned by ``r`` in ``halo_fwd(d)``: what ``r`` sends in
        the forward and receives in a pushed backward.
    bwd_recv
        ``|halo_bwd(r)|``: remote vertices of ``r``'s ``Â`` rows (pulled backward).
    """

    fwd_recv: np.ndarray
    fwd_send: np.ndarray
    bwd_recv: np.ndarray

    @property
    def fwd_pairs(self) -> int:
        """(vertex, destination) pairs of one forward exchange."""
        return int(self.fwd_recv.sum())

    @property
    def bwd_pairs(self) -> int:
        """(vertex, destination) pairs of one pulled backward exchange."""
        return int(self.bwd_recv.sum())


def choose_backward(fwd_pairs: int, bwd_pairs: int) -> str:
    """``push`` unless pulling ``Â``'s halo moves strictly fewer (vertex, rank) pairs."""
    return "pull" if bwd_pairs < fwd_pairs else "push"


def halo_volumes(path: str | os.PathLike, offsets: np.ndarray) -> HaloVolumes:
    """Count the halo pairs of the partition ``offsets`` from the graph file (serial).

    Reads the whole adjacency twice (``A^T`` and ``A``); self loops are never remote.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    with GraphFile(path) as gf:
        n = gf.meta.num_nodes
        fwd_recv, fwd_send = halo_pairs(gf.read_csr(0, n, transpose=True), offsets)
        bwd_recv, _ = halo_pairs(gf.read_csr(0, n), offsets)
    return HaloVolumes(fwd_recv, fwd_send, bwd_recv)


def planned_volumes(counts: dict[tuple[int, int, int], int], ranks: int) -> HaloVolumes:
    """Volumes of a staged (planned) exchange from its ``(stage, src, dst) -> count`` tables.

    Every transfer of the plan counts, forwarding through intermediate ranks included; the
    backward is the push along the same transfers, so ``fwd_send`` is what each rank sends.
    """
    recv = np.zeros(ranks, dtype=np.int64)
    send = np.zeros(ranks, dtype=np.int64)
    for (_, s, d), c in counts.items():
        recv[d] += c
        send[s] += c
    return HaloVolumes(recv, send, recv)


def predict_halo(
    problem: Problem, shape: GridShape, volumes: HaloVolumes, backward: str = "auto"
) -> Estimate:
    """Bytes of one training epoch of the halo GCN (summed over ranks and busiest rank).

    Per layer with SpMM width ``f`` (``s`` bytes per value, ``P`` ranks): the forward
    gather moves ``sum_r |halo_fwd(r)| f s``; when a backward SpMM runs, on ``f'`` columns
    (``f``, or CAGNET's ``G^l`` of the layer's output width with ``--product-order paper``:
    :func:`hpcgnn.layout.trace.row_exchange_widths`) the push backward sends the same pairs
    back, ``sum_r |halo_fwd(r)| f' s``, and the pull backward moves
    ``sum_r |halo_bwd(r)| f' s``; ``"auto"`` picks as
    :func:`choose_backward`. Then ``W^l`` gradients
    (``f_{l-1} f_l s`` bytes each) are all-reduced over the ``P`` ranks,
    ``P round(2 m (P - 1) / P)`` bytes in total each
    (see :func:`~hpcgnn.cost.estimate.allreduce_exact`). GAT (an attention kind) gathers
    the rows of ``[z | s_src]`` and pushes their gradients back on every layer
    (:func:`~hpcgnn.layout.trace.row_exchange_widths` of the kind), and its score vectors
    are all-reduced with the ``W^l``.
    """
    p = shape.size
    s = problem.itemsize
    if backward == "auto":
        backward = choose_backward(volumes.fwd_pairs, volumes.bwd_pairs)
    back = volumes.fwd_send if backward == "push" else volumes.bwd_recv
    msgs = 1 if p > 1 else 0
    steps = row_exchange_widths(problem.widths, problem.kind)
    f_fwd = sum(f for f, _ in steps) * s
    f_bwd = sum(f for _, f in steps) * s
    # what each rank receives over the epoch: the busiest rank is the maximum of the sums
    per_rank = volumes.fwd_recv * f_fwd + back * f_bwd
    est = Estimate()
    est.add("halo", float(per_rank.sum()), float(per_rank.max(initial=0)),
            msgs * (len(steps) + sum(1 for _, f in steps if f)))
    for size in problem.param_sizes:
        allreduce_exact(est, "allreduce", size * s, p)
    return est
