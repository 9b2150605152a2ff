"""Communication cost of the 2D (SUMMA) and 3D (Split-3D) GCN, in the measured accounting.

For one training epoch (forward with dropout, backward, one weight-gradient all-reduce)
on a ``Pr x Pc x Pl`` grid (2D: ``Pl = 1``) with the layout of
:mod:`hpcgnn.layout.summa`, this returns the bytes each rank *receives* per category
in the accounting of :class:`hpcgnn.comm.stats.CommStats`, summed over ranks
(``bytes_total``) and for the busiest rank (``bytes_max_rank``). Notation: ``n``
vertices, ``f_t -> f_{t+1}`` the widths of GCN layer ``t = 0 .. L-1`` (``f_L = C``
classes), ``s`` bytes per value, ``n_il`` the rows of fine block ``(i, l)``, ``n_i``
those of row block ``i``, ``w_j(f)`` the width of column block ``j`` of ``f`` columns.

Each layer follows its :class:`~hpcgnn.layout.summa.LayerPlan`: the SpMM runs on
``f = f_{t+1}`` columns when the layer is evaluated as ``Â^T (H W)`` (narrower output,
:func:`hpcgnn.layout.order.transform_first`) and on ``f = f_t`` otherwise; its backward
runs unless its operand is the input features. Each SpMM pass moves, in total,

- ``dense_bcast``: ``(Pr - 1) n f s`` (every row of ``H`` reaches the other ``Pr - 1``
  processes of its column); P(i,j,l) receives ``(|V_l| - n_il) w_j(f) s``;
- ``sparse_bcast``: ``(Pc - 1) sum_{i,l,stage} b(i,l,stage)`` with
  ``b = (min(n_i + 1, z) + z) x index bytes + z s`` for a block of ``z > 0`` nonzeros
  (see :func:`~hpcgnn.layout.summa.message_bytes`); the exact ``z`` per block come
  from :class:`SummaBlockNnz`, else ``z = nnz n_i |stage| / n^2`` (uniformly spread);
- ``reduce_scatter`` (fiber, ``Pl > 1``): ``(Pl - 1) n f s``.

Dense step ``T W`` of layer ``t`` (:func:`~hpcgnn.layout.summa.dense_variant`;
``T`` is the SpMM result, or ``H`` in the order ``Â^T (H W)``):

- ``allgather``: ``allgather`` ``(Pc - 1) n f_t s``, plus the same as ``reduce_scatter``
  in the backward for ``t >= 1``;
- ``reduce_scatter``: ``(Pc - 1) n f_{t+1} s`` in ``reduce_scatter`` and in ``allgather``;
- ``gather`` (last layer, order ``(Â^T H) W``): ``gather`` ``n (f_t - w_0(f_t)) s``,
  plus the same as ``scatter`` for ``t >= 1``;
- ``reduce`` (same place, when cheaper; never under the current order policy):
  ``(Pc - 1) n C s`` in ``reduce_scatter`` and in ``dense_bcast``.

Last layer in the order ``Â^T (H W)``: the logits are gathered to column 0, ``gather``
and ``scatter`` ``n (C - w_0(C)) s`` each.

CAGNET's backward (``--product-order paper``: :attr:`~hpcgnn.layout.summa.Step.adjoint`):
the dense step runs forward only, its backward SpMM on ``G`` (``f_{t+1}`` columns), then
``allgather`` ``(Pc - 1) n f_{t+1} s`` of ``Â G``; after a final step ``G`` is first
scattered from column 0, ``scatter`` ``n (f_{t+1} - w_0(f_{t+1})) s``.

Weight gradients: one all-reduce of all ``W^t`` (``m = s sum_t f_t f_{t+1}`` bytes) over
the ``P`` ranks, ``round(2 m (P-1)/P)`` per rank.

Latency (``Estimate.messages``, the critical path): a broadcast counts 1 message (as in
the paper's stage counts and :func:`hpcgnn.cost.block_row.predict_block_row`), every
reduce-scatter, all-gather, gather or scatter over ``q`` ranks ``ceil(log2 q)``, the
all-reduce ``2 ceil(log2 P)``; an SpMM pass costs ``stages x (dense + sparse)`` plus the
fiber reduce-scatter, with ``stages`` the largest stage count over the grid layers.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from hpcgnn.cost.estimate import Estimate, Problem, allreduce_share
from hpcgnn.graph.normalize import mean_block, normalize_block
from hpcgnn.kinds import GCN, Layer
from hpcgnn.layout.shapes import GridShape
from hpcgnn.layout.summa import (
    ALLGATHER,
    GATHER,
    REDUCE_SCATTER,
    RowReader,
    Step,
    SummaLayout,
    count_block_nnz,
    head_slices,
    layer_plans,
    sparse_block_bytes,
)
from hpcgnn.layout.trace import AGGREGATE, ATTENTION


@dataclass(frozen=True)
class SummaBlockNnz:
    """Exact nonzeros of the sparse blocks of one SUMMA grid.

    Attributes
    ----------
    dims
        ``(Pr, Pc, Pl)`` of the grid the counts belong to.
    forward, backward
        Per grid layer ``l``, an array of shape ``(Pr, stages of l)``: nonzeros of
        ``Â^T`` (forward) and ``Â`` (backward) in ``(row block i, stage)``.

    """

    dims: tuple[int, int, int]
    forward: tuple[np.ndarray, ...]
    backward: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class SummaProblem(Problem):
    """A :class:`~hpcgnn.cost.estimate.Problem` with the exact block nonzeros of a grid.

    :func:`predict_2d` and :func:`predict_3d` use ``block_nnz`` when its ``dims`` match
    the grid asked about, and the uniform estimate otherwise.
    """

    block_nnz: SummaBlockNnz | None = field(default=None, compare=False)


def _dims3(dims: tuple[int, ...]) -> tuple[int, int, int]:
    return (dims[0], dims[1], 1) if len(dims) == 2 else (dims[0], dims[1], dims[2])


def _pattern(gf: Any, transpose: bool, kind: Layer = GCN) -> RowReader:
    """Rows of ``A + I`` (or of its transpose) of an open graph file, duplicates merged as in Â.

    A kind without self loops (GraphSAGE's mean operator): of ``A`` alone.
    """
    ones = np.ones(gf.meta.num_nodes)

    def read(lo: int, hi: int) -> sp.csr_matrix:
        block = gf.read_csr(lo, hi, transpose=transpose)
        if not kind.self_loops:
            return mean_block(block, None, None)
        return normalize_block(block, lo, ones[lo:hi], ones)

    return read


def summa_block_nnz(
    path: str | os.PathLike, dims: tuple[int, ...], kind: Layer = GCN
) -> SummaBlockNnz:
    """Count the block nonzeros of ``Â^T`` and ``Â`` (sage: of the mean operator) for a grid.

    Reads the file one fine block of rows at a time (``O(nnz / (Pr Pl) + n)`` memory).
    A model already built holds the same counts:
    :meth:`hpcgnn.models.summa.GridGCN.block_nnz` gathers them without reading the file.
    :class:`BlockNnzCounter` reads a file once for many grids.
    """
    from hpcgnn.io.reader import GraphFile

    dims3 = _dims3(tuple(dims))
    with GraphFile(path) as gf:
        layout = SummaLayout(gf.meta.num_nodes, dims3, gf.meta.partition_offsets)
        fwd = count_block_nnz(layout, _pattern(gf, True, kind))
        transposed = gf.meta.directed and not kind.attention  # GAT keeps the forward's
        bwd = count_block_nnz(layout, _pattern(gf, False, kind)) if transposed else fwd
    return SummaBlockNnz(dims3, tuple(fwd), tuple(bwd))


class BlockNnzCounter:
    """Exact block nonzeros of one graph file for any SUMMA grid (what ``hpcgnn model`` uses).

    The pattern of ``Â^T`` (and of ``Â`` when the graph is directed) is read once and
    kept as the row and column of every nonzero; each grid then costs ``O(nnz + Pr x
    stages)``. Grids with more than ``max_cells`` (row block, stage) counts, and files with
    more than ``max_nnz`` nonzeros, are not counted (``None``: the caller spreads the
    nonzeros uniformly instead).

    Parameters
    ----------
    path
        Graph file.
    max_nnz, max_cells
        Limits on the memory the pattern and one grid's counts take.
    kind
        The layer kind: GCN counts ``Â = A + I`` normalised, GraphSAGE the mean operator
        (``A``, no self loops), as :func:`summa_block_nnz`.

    """

    def __init__(
        self, path: str | os.PathLike, max_nnz: int = 2**25, max_cells: int = 2**22,
        kind: Layer = GCN,
    ) -> None:
        from hpcgnn.io.reader import GraphFile

        self.max_cells = max_cells
        self._coo: list[tuple[np.ndarray, np.ndarray]] = []
        with GraphFile(path) as gf:
            meta = gf.meta
            self.n, self.partition = meta.num_nodes, meta.partition_offsets
            if meta.num_edges + meta.num_nodes > max_nnz:
                return
            both = meta.directed and not kind.attention  # GAT's backward keeps the forward's
            for transpose in (True, False) if both else (True,):
                m = _pattern(gf, transpose, kind)(0, self.n)
                rows = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(m.indptr))
                self._coo.append((rows, m.indices.astype(np.int64)))

    @property
    def loaded(self) -> bool:
        """Whether the file was small enough to be read (``max_nnz``)."""
        return bool(self._coo)

    def __call__(self, dims: tuple[int, ...]) -> SummaBlockNnz | None:
        """The counts for a ``Pr x Pc (x Pl)`` grid, or ``None`` beyond the limits."""
        if not self._coo:
            return None
        dims3 = _dims3(tuple(dims))
        layout = SummaLayout(self.n, dims3, self.partition)
        ids, first = layout.segment_ids()
        pr, total = layout.pr, int(first[-1])
        if pr * total > self.max_cells:
            return None
        starts = layout.fine[:: layout.pl]  # first row of every row block (and n)
        counts = []
        for rows, cols in self._coo:
            key = (np.searchsorted(starts, rows, side="right") - 1) * total + ids[cols]
            c = np.bincount(key, minlength=pr * total).reshape(pr, total)
            counts.append(tuple(c[:, first[k] : first[k + 1]] for k in range(layout.pl)))
        return SummaBlockNnz(dims3, counts[0], counts[-1])


def _sparse_per_rank(
    layout: SummaLayout, problem: Problem, nnz: tuple[np.ndarray, ...] | None
) -> np.ndarray:
    """Bytes each P(i, j, l) receives in the sparse broadcasts of one SpMM pass.

    Row block ``i`` of stage ``s`` is broadcast along the process row by the stage's
    sparse owner ``j_s``: P(i, j, l) receives every block of row block ``i`` in layer
    ``l`` except those it owns. ``nnz`` holds the exact nonzeros per (row block, stage)
    of each layer; without it they are spread uniformly (``nnz n_i |s| / n^2``), so row
    blocks of equal size receive alike and are computed once (the even split has at
    most three sizes), which keeps the work ``O(P)`` however many stages there are.
    """
    pr, pc, pl = layout.dims
    if pc == 1:
        return np.zeros((pr, pc, pl))
    t = layout.stages()
    rows = np.diff(layout.fine[::pl]).astype(np.float64)  # of every row block
    if nnz is None:
        rows, row_of = np.unique(rows, return_inverse=True)
        z = problem.nnz * rows[:, None] * t.size[None, :].astype(np.float64) / problem.n**2
    else:
        row_of = np.arange(pr)
        z = np.concatenate([np.asarray(a, dtype=np.float64) for a in nnz], axis=1)
    b = sparse_block_bytes(rows[:, None], layout.n, z, problem.itemsize)  # (rows, stages)
    ones, stage = np.ones(len(t.lo)), np.arange(len(t.lo))
    by_layer = sp.csr_matrix((ones, (t.layer, stage)), shape=(pl, len(stage)))
    by_owner = sp.csr_matrix((ones, (t.layer * pc + t.j, stage)), shape=(pl * pc, len(stage)))
    total = (by_layer @ b.T).T  # every block of row block i in layer l
    sent = (by_owner @ b.T).T.reshape(len(rows), pl, pc)  # the blocks P(i, j, l) owns
    return (total[:, None, :] - sent.transpose(0, 2, 1))[row_of]


def _log2(q: int) -> int:
    return math.ceil(math.log2(q)) if q > 1 else 0


def _dense_step(
    per: dict[tuple[str, str], np.ndarray], plan: Step, layout: SummaLayout,
    fine: np.ndarray, s: int,
) -> int:
    """Add the bytes of one dense step to ``per``; return its messages.

    With CAGNET's backward (``plan.adjoint``) the step runs forward only; its backward is
    the all-gather of ``Â G`` along the process row, after a final step's ``G`` is
    scattered from column 0 (:func:`hpcgnn.nn.gcn.aggregate_transform`).
    """
    pc = layout.pc
    f_in, f_out = plan.f_in, plan.f_out
    adjoint = not plan.adjoint  # the step's own adjoint runs
    input_grad = plan.backward and adjoint
    w_in = np.diff(layout.cols(f_in)).astype(np.float64)
    w_out = np.diff(layout.cols(f_out)).astype(np.float64)
    rows = fine[:, None, :]
    messages = 0
    if not adjoint:  # CAGNET's backward
        per["allgather", "row"] += rows * (f_out - w_out)[None, :, None] * s
        messages += _log2(pc)
        if plan.final:
            per["scatter", "row"][:, 1:, :] += rows * w_out[None, 1:, None] * s
            messages += _log2(pc)
    if plan.dense == ALLGATHER:
        moved = rows * (f_in - w_in)[None, :, None] * s
        per["allgather", "row"] += moved
        if input_grad:
            per["reduce_scatter", "row"] += moved
        return messages + _log2(pc) * (1 + int(input_grad))
    if plan.dense == REDUCE_SCATTER:
        moved = rows * (f_out - w_out)[None, :, None] * s
        per["reduce_scatter", "row"] += moved
        if adjoint:
            per["allgather", "row"] += moved
        return messages + _log2(pc) * (1 + int(adjoint))
    if plan.dense == GATHER:
        per["gather", "row"][:, 0, :] += fine * (f_in - w_in[0]) * s
        if input_grad:
            per["scatter", "row"][:, 1:, :] += rows * w_in[None, 1:, None] * s
        return messages + _log2(pc) * (1 + int(input_grad))
    per["reduce_scatter", "row"][:, 1:, :] += rows * f_out * s  # REDUCE
    if adjoint:
        per["dense_bcast", "row"][:, 1:, :] += rows * f_out * s
    return messages + _log2(pc) + int(adjoint)


def _attention_layer(
    per: dict[tuple[str, str], np.ndarray], plan: Step, layout: SummaLayout,
    fine: np.ndarray, sparse: np.ndarray, s: int,
) -> int:
    """Add the bytes of one GAT layer's edge computation (:mod:`hpcgnn.spmm.summa_attention`).

    Returns its messages. ``w_j``, ``h_j``: the columns of ``z`` (``K f'``) in column block
    ``j`` and the heads they touch. The score terms' row all-reduce (``2 K`` columns of
    the own rows, forward and adjoint); per stage ``[z | s_src]`` broadcast (``w_j + h_j``)
    and ``z`` again in the backward (``w_j``), ``[d z | d s_src]`` reduced onto the owners
    (``w_j + h_j``); the pattern blocks once (forward); in 3D the fiber's all-gathers
    (``s_dst``: ``h_j``; the output gradient: ``w_j``), reduce-scatters (the output,
    ``d s_dst``) of the row block's other rows and three all-reduces of ``h_j`` columns of
    the row block (maximum, sum, ``delta``). The dense step ``z = H W`` and the last
    layer's gather to column 0 are the caller's, as for every kind.
    """
    pr, pc, pl = layout.dims
    heads = plan.heads
    cols = layout.cols(plan.f_out)
    w = np.diff(cols).astype(np.float64)
    h = np.array([len(head_slices((int(cols[j]), int(cols[j + 1])), plan.f_out // heads))
                  for j in range(pc)], dtype=np.float64)
    own = fine[:, None, :]
    block = fine.sum(axis=1)[:, None, None]
    received = fine.sum(axis=0)[None, None, :] - own
    messages = layout.num_stages() * (3 * int(pr > 1) + int(pc > 1))
    if pc > 1:
        per["allreduce", "row"] += 2 * allreduce_share(own * 2 * heads * s, pc)
        messages += 4 * _log2(pc)
    if pr > 1:
        per["dense_bcast", "col"] += received * (2 * w + h)[None, :, None] * s
        per["dense_reduce", "col"] += received * (w + h)[None, :, None] * s
    per["sparse_bcast", "row"] += sparse
    if pl > 1:
        other = block - own
        per["allgather", "fiber"] += other * (h + w)[None, :, None] * s
        per["reduce_scatter", "fiber"] += other * (w + h)[None, :, None] * s
        per["allreduce", "fiber"] += 3 * allreduce_share(block * h[None, :, None] * s, pl)
        messages += 4 * _log2(pl) + 3 * 2 * _log2(pl)  # gathers, scatters; 3 all-reduces
    return messages


def _spmm_passes(
    per: dict[tuple[str, str], np.ndarray], plan: Step, layout: SummaLayout,
    fine: np.ndarray, sparse: dict[str, np.ndarray], s: int,
) -> int:
    """Add the bytes of an SpMM on ``plan.f_in`` columns; return its messages.

    Forward, and backward when the operand needs a gradient (``plan.backward``), on
    ``plan.adjoint`` columns with CAGNET's backward.
    """
    pr, pc, pl = layout.dims
    received = fine.sum(axis=0)[None, None, :] - fine[:, None, :]
    messages = 0
    for direction in ("fwd", "bwd") if plan.backward else ("fwd",):
        width = plan.adjoint if direction == "bwd" and plan.adjoint else plan.f_in
        w_sp = np.diff(layout.cols(width)).astype(np.float64)
        per["dense_bcast", "col"] += received * w_sp[None, :, None] * s
        per["sparse_bcast", "row"] += sparse[direction]
        if pl > 1:
            per["reduce_scatter", "fiber"] += (
                (fine.sum(axis=1)[:, None, None] - fine[:, None, :]) * w_sp[None, :, None] * s
            )
        messages += layout.num_stages() * (int(pr > 1) + int(pc > 1)) + _log2(pl)
    return messages


def predict_summa(
    problem: Problem, dims: tuple[int, ...], block_nnz: SummaBlockNnz | None = None
) -> Estimate:
    """Predicted communication of one epoch on a ``Pr x Pc x Pl`` (or ``Pr x Pc``) grid.

    Parameters
    ----------
    problem
        Sizes; ``problem.row_offsets`` is the file's partition (as
        ``GraphMeta.partition_offsets``) or ``None``, exactly as the model uses it.
    dims
        ``(Pr, Pc)`` or ``(Pr, Pc, Pl)``.
    block_nnz
        Exact block nonzeros; default: ``problem.block_nnz`` of a :class:`SummaProblem`
        when its grid matches, else the uniform estimate.

    """
    dims3 = _dims3(tuple(dims))
    if block_nnz is None:
        block_nnz = getattr(problem, "block_nnz", None)
    if block_nnz is not None and tuple(block_nnz.dims) != dims3:
        block_nnz = None
    layout = SummaLayout(problem.n, dims3, problem.row_offsets)
    pr, pc, pl = dims3
    p = pr * pc * pl
    s = problem.itemsize
    fwd, bwd = (None, None) if block_nnz is None else (block_nnz.forward, block_nnz.backward)
    sparse = {"fwd": _sparse_per_rank(layout, problem, fwd)}
    sparse["bwd"] = sparse["fwd"] if bwd is fwd else _sparse_per_rank(layout, problem, bwd)

    fine = layout.fine_sizes().astype(np.float64)  # (Pr, Pl)
    per: dict[tuple[str, str], np.ndarray] = defaultdict(lambda: np.zeros((pr, pc, pl)))
    messages = 0
    for plan in layer_plans(problem.widths, pc, problem.kind):  # each step the trace has
        for step in plan.steps:
            if step.primitive == AGGREGATE:
                messages += _spmm_passes(per, step, layout, fine, sparse, s)
            elif step.primitive == ATTENTION:  # the edge computation
                messages += _attention_layer(per, step, layout, fine, sparse["fwd"], s)
            elif pc > 1:
                messages += _dense_step(per, step, layout, fine, s)
        attention = plan.attention
        gathered = plan.f_out if plan.gather_logits else (
            attention.f_out if attention is not None and attention.final else None)
        if gathered is not None and pc > 1:  # the logits to column 0 (GAT: the heads)
            w_c = np.diff(layout.cols(gathered)).astype(np.float64)
            per["gather", "row"][:, 0, :] += fine * (gathered - w_c[0]) * s
            per["scatter", "row"][:, 1:, :] += fine[:, None, :] * w_c[None, 1:, None] * s
            messages += 2 * _log2(pc)
    m = s * sum(problem.param_sizes)  # weights and biases, one message
    if p > 1:
        per["allreduce", "world"] += allreduce_share(m, p)
        messages += 2 * _log2(p)
    return Estimate.from_per_rank(per, messages)


def predict_2d(
    problem: Problem, shape: GridShape, block_nnz: SummaBlockNnz | None = None
) -> Estimate:
    """CAGNET 2D (SUMMA) on a ``Pr x Pc`` grid of any shape; see the module docstring."""
    if len(shape.dims) != 2:
        raise ValueError(f"2d needs a Pr x Pc grid, got {shape}")
    return predict_summa(problem, shape.dims, block_nnz)


def predict_3d(
    problem: Problem, shape: GridShape, block_nnz: SummaBlockNnz | None = None
) -> Estimate:
    """CAGNET 3D (Split-3D) on a ``Pr x Pc x Pl`` grid of any shape; see the module docstring."""
    if len(shape.dims) != 3:
        raise ValueError(f"3d needs a Pr x Pc x Pl grid, got {shape}")
    return predict_summa(problem, shape.dims, block_nnz)
