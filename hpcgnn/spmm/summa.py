"""CAGNET's 2D (SUMMA) and 3D (Split-3D) distributed SpMM, one implementation for both.

On a ``Pr x Pc x Pl`` grid (2D: ``Pl = 1``) with the layout of
:mod:`hpcgnn.layout.summa`, P(i, j, l) holds ``H((i, l), j)`` and owns the sparse
blocks ``M(row block i, s)`` of the stages ``s`` of grid layer ``l`` assigned to process
column ``j``. ``Y = M H`` (``M = Â^T`` forward, ``M = Â`` backward) runs, on every grid
layer ``l`` at once:

1. for each stage ``s = (k, j_s)`` of layer ``l`` (a piece of fine block ``(k, l)``):

   - process row ``k`` broadcasts its rows ``H(s, j)`` along process column ``j``
     (category ``"dense_bcast"``),
   - process column ``j_s`` broadcasts ``M(row block i, s)`` along process row ``i``
     (category ``"sparse_bcast"``: one message holding CSR ``indptr`` or, for
     hypersparse blocks, COO row ids, then column indices, then values; the blocks'
     nonzero counts are exchanged once at construction, so no per-stage header is sent
     and the stages of empty blocks are skipped),
   - every process accumulates ``Y_l(row block i, j) += M(row block i, s) H(s, j)``;

2. the partial sums of the ``Pl`` grid layers are reduce-scattered along the fiber
   (category ``"reduce_scatter"``), so P(i, j, l) ends with ``Y((i, l), j)``, the layout
   of ``H``: layers chain without redistribution. With ``Pl = 1`` this step vanishes and
   the algorithm is 2D SUMMA.

The backward of ``T = Â^T H`` is ``G_H = Â G_T``, the same operator with the blocks of
``Â`` (read from the file's ``A``, not transposed, so directed graphs are exact), hence
the same communication. Its literal adjoint (all-gather along the fiber, reductions along
process columns) would move the same volume but needs a reduction to one root per stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.errors import GridError
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.kernels.spmm import index_dtype, spmm
from hpcgnn.layout.summa import (
    Segment,
    SummaLayout,
    message_bytes,
    message_sections,
    pack_block,
)

SPARSE_BCAST = "sparse_bcast"
DENSE_BCAST = "dense_bcast"
REDUCE_SCATTER = "reduce_scatter"


@dataclass(frozen=True)
class SummaGrid:
    """A 2D or 3D process grid seen as ``Pr x Pc x Pl`` (``Pl = 1`` for 2D).

    Attributes
    ----------
    dims
        ``(Pr, Pc, Pl)``.
    coords
        ``(i, j, l)``.
    world
        All ranks.
    row, col
        Same process row (size ``Pc``, rank ``j``) / column (size ``Pr``, rank ``i``)
        within the grid layer.
    fiber
        Same ``(i, j)`` over the grid layers (size ``Pl``, rank ``l``); ``None`` in 2D.

    """

    dims: tuple[int, int, int]
    coords: tuple[int, int, int]
    world: Comm
    row: Comm
    col: Comm
    fiber: Comm | None

    @classmethod
    def of(cls, grid: ProcessGrid) -> SummaGrid:
        """View a ``2d`` or ``3d`` :class:`ProcessGrid` as ``Pr x Pc x Pl``."""
        if grid.kind == "2d":
            pr, pc = grid.dims
            i, j = grid.coords
            return cls((pr, pc, 1), (i, j, 0), grid.world, grid.row, grid.col, None)
        if grid.kind == "3d":
            pr, pc, pl = grid.dims
            i, j, layer = grid.coords
            fiber = grid.fiber if pl > 1 else None
            return cls((pr, pc, pl), (i, j, layer), grid.world, grid.row, grid.col, fiber)
        raise GridError(f"the 2D/3D algorithms need a 2d or 3d grid, not {grid.kind}")


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype of a torch dtype."""
    return torch.empty(0, dtype=dtype).numpy().dtype


def unpack_block(
    message: torch.Tensor, shape: tuple[int, int], n: int, nnz: int, dtype: torch.dtype,
) -> torch.Tensor:
    """The ``torch.sparse_csr`` block of a :func:`pack_block` message.

    Unpacked where ``message`` (``uint8``) lives, on the device without a host copy: the
    integers and values are views of it (the values copied only where the index section
    leaves them misaligned), a hypersparse block's COO rows become ``indptr`` by a count.
    Indices of :func:`~hpcgnn.kernels.spmm.index_dtype` (int32 on a GPU where they fit).
    """
    rows = shape[0]
    if nnz == 0:  # an empty message (torch cannot view zero bytes as another dtype)
        zeros = torch.zeros(rows + 1, dtype=torch.int64, device=message.device)
        return torch.sparse_csr_tensor(zeros, zeros[:0], zeros[:0].to(dtype), size=shape,
                                       check_invariants=False)
    idt, n_ints, offset = message_sections(rows, n, nnz)
    ints = message[:offset].view(torch.int32 if idt == np.int32 else torch.int64)
    raw = message[offset:]
    if offset % dtype.itemsize:
        raw = raw.clone()
    values = raw.view(dtype)[:nnz]
    head, indices = ints[: n_ints - nnz].long(), ints[n_ints - nnz :].long()
    if nnz < rows + 1:  # COO row ids -> indptr
        counts = torch.bincount(head, minlength=rows)
        head = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    idx = index_dtype(nnz, shape, message.device)
    return torch.sparse_csr_tensor(head.to(idx), indices.to(idx), values, size=shape,
                                   check_invariants=False)


class SummaSpMM:
    """``Y = M X`` for an ``n x n`` sparse ``M`` on a SUMMA grid (collective construction).

    Parameters
    ----------
    layout
        The block layout.
    grid
        The process grid; ``grid.dims`` must equal ``layout.dims``.
    blocks
        The sparse blocks this process owns (:func:`~hpcgnn.layout.summa.owned_blocks`):
        stage index of its grid layer -> ``M(row block i, stage)``.
    dtype
        Torch dtype of values and dense blocks.

    Notes
    -----
    Construction all-gathers the owned blocks' nonzero counts along the process row
    (category ``"control"``), so every process knows the size of every block it will
    receive.

    """

    def __init__(
        self, layout: SummaLayout, grid: SummaGrid, blocks: dict[int, sp.csr_matrix],
        dtype: torch.dtype,
    ) -> None:
        if layout.dims != grid.dims:
            raise ValueError(f"layout {layout.dims} does not match grid {grid.dims}")
        self.layout = layout
        self.grid = grid
        self.dtype = dtype
        i, j, layer = grid.coords
        self.segments = layout.segments(layer)
        self.rows = layout.row_block(i)[1] - layout.row_block(i)[0]
        self.fine_counts = [layout.fine_rows(i, sub) for sub in range(layout.pl)]
        np_dtype = numpy_dtype(dtype)
        want = {s.index for s in self.segments if s.j == j}
        if set(blocks) != want:
            raise ValueError(f"blocks for stages {sorted(blocks)}, expected {sorted(want)}")
        self._own: dict[int, torch.Tensor] = {}
        self._own_csr: dict[int, torch.Tensor] = {}  # the owned blocks, unpacked on first use
        for idx, b in blocks.items():
            seg = self.segments[idx]
            if b.shape != (self.rows, seg.size):
                raise ValueError(f"block of stage {idx} has shape {b.shape}")
            self._own[idx] = grid.row.device.from_numpy(pack_block(b, layout.n, np_dtype))
        counts = {idx: int(b.nnz) for idx, b in blocks.items()}
        merged: dict[int, int] = {}
        for d in grid.row.allgather_obj(counts):
            merged.update(d)
        self.nnz = np.array([merged[s.index] for s in self.segments], dtype=np.int64)
        self._np_dtype = np_dtype

    @property
    def uploads(self) -> int:
        """Sparse blocks copied to the device: the owned ones, once, at construction."""
        return len(self._own)

    def sparse_block(self, seg_index: int) -> torch.Tensor:
        """``M(row block i, stage)``, broadcast along the process row from its owner.

        The owner unpacks its own blocks once and keeps them (they never change: on a ``Pr
        x 1`` grid every block is owned and no step unpacks); a received one is unpacked
        from its message at every step.
        """
        seg = self.segments[seg_index]
        nnz = int(self.nnz[seg_index])
        row = self.grid.row
        n, shape = self.layout.n, (self.rows, seg.size)
        if seg_index in self._own:
            message = self._own[seg_index]
        else:
            nbytes = message_bytes(self.rows, n, nnz, self._np_dtype)
            message = row.device.empty((nbytes,), torch.uint8)
        if row.size > 1:
            row.bcast(message, seg.j, SPARSE_BCAST)
        if seg_index in self._own_csr:  # an owned block never changes: unpacked once
            return self._own_csr[seg_index]
        with row.stats.phase("sparse_unpack"):
            block = unpack_block(message, shape, n, nnz, self.dtype)
        if seg_index in self._own:
            self._own_csr[seg_index] = block
        return block

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``Y((i, l), j)`` given ``X((i, l), j)`` (this process's blocks)."""
        i = self.grid.coords[0]
        col = self.grid.col
        f = x.shape[1]
        out = col.device.zeros((self.rows, f), x.dtype)
        for step, seg in enumerate(self.segments):
            with col.stats.tagged(step=step):
                self._step(seg, i, x, out)
        fiber = self.grid.fiber
        if fiber is None or fiber.size == 1:
            return out
        return fiber.reduce_scatter(out, self.fine_counts, REDUCE_SCATTER)

    def _step(self, seg: Segment, i: int, x: torch.Tensor, out: torch.Tensor) -> None:
        """One SUMMA stage: broadcast the stage's block of ``X`` and add its product."""
        col, f = self.grid.col, x.shape[1]
        if seg.k == i:
            xs = x[seg.r0 : seg.r0 + seg.size].contiguous()
        else:
            xs = col.device.empty((seg.size, f), x.dtype)
        if col.size > 1 and f > 0:
            col.bcast(xs, seg.k, DENSE_BCAST)
        if self.nnz[seg.index] == 0:
            return
        a = self.sparse_block(seg.index)
        if f > 0:
            with col.stats.phase("local_spmm"):
                out += spmm(a, xs)


class SummaAggregation:
    """``Â^T H`` forward and ``Â G`` backward with SUMMA / Split-3D SpMMs.

    Implements :class:`hpcgnn.nn.gcn.Aggregation`; both directions map the layout
    ``H((i, l), j)`` to itself.
    """

    def __init__(self, forward: SummaSpMM, backward: SummaSpMM) -> None:
        self._fwd = forward
        self._bwd = backward

    def matrices(self) -> tuple[SummaSpMM, SummaSpMM]:
        """The forward (``Â^T``) and backward (``Â``) SpMM operators."""
        return self._fwd, self._bwd

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """This process's block of ``Â^T H``."""
        return self._fwd(h)

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        """This process's block of ``Â G``."""
        return self._bwd(g)
