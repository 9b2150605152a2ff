"""Block layout of CAGNET's 2D (SUMMA) and 3D (Split-3D) algorithms on any grid shape.

Pure NumPy (no MPI), so the cost model reasons about P = 1024 from it, and the SpMM, the
model and the cost model agree on every block by construction.

Notation
--------
The grid is ``Pr x Pc x Pl`` with coordinates ``(i, j, l)``; a 2D grid ``Pr x Pc`` is
the case ``Pl = 1``. The ``n`` vertices are split into ``Pr * Pl`` contiguous *fine
blocks* (:func:`hpcgnn.layout.blocks.vertex_offsets`: even, or the file's partition);
fine block ``(i, l)`` has index ``i * Pl + l``. *Row block* ``i`` is the union of the
fine blocks ``(i, 0) .. (i, Pl - 1)`` and is contiguous. A dense matrix ``H`` of width
``f`` is split by feature columns into ``Pc`` near-equal column blocks
(:meth:`SummaLayout.cols`), and

    P(i, j, l) holds ``H((i, l), j)``: the rows of fine block ``(i, l)``, columns ``j``.

Layer ``l`` of the grid computes the partial product over its *inner vertex set*
``V_l = (0, l) u (1, l) u ... u (Pr - 1, l)`` (the fine blocks of layer ``l``, listed in
that order; their concatenation defines the *positions* ``0 .. |V_l| - 1``):

    T_l(row block i, j) = sum over k in V_l of  Â^T(row block i, k) H(k, j).

The rows of ``H`` over ``V_l`` are distributed over the process column (fine block
``(k, l)`` on process row ``k``). The *sparse* blocks are distributed over the process
row: the positions of ``V_l`` are split into ``Pc`` column blocks
(:meth:`SummaLayout.column_split`), and P(i, j, l) owns ``Â^T(row block i, column block
j of V_l)``, about ``nnz / P`` nonzeros. Both splits need not agree when ``Pr != Pc``,
so the SUMMA *stages* of layer ``l`` are the pieces between the merged breakpoints
(:meth:`SummaLayout.segments`): each :class:`Segment` lies in exactly one fine block
(its dense owner, process row ``k``) and one sparse column block (its sparse owner,
process column ``j``). There are ``max(Pr, Pc)`` stages when one of ``Pr``, ``Pc``
divides the other and at most ``Pr + Pc - 1`` otherwise.

Column split rule (positions of ``V_l``; ``q`` = offsets of its ``Pr`` fine blocks):

- ``Pc`` divides ``Pr``: coarsen ``q`` into ``Pc`` groups of ``Pr / Pc`` fine blocks;
- ``Pr`` divides ``Pc``: split every fine block evenly into ``Pc / Pr`` pieces;
- otherwise: split the positions evenly into ``Pc`` parts.

With ``Pr = Pc`` (square layers) process column ``k`` owns exactly the columns of fine
block ``(k, l)``: the textbook SUMMA of CAGNET.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hpcgnn.kinds import GCN, Layer
from hpcgnn.layout.blocks import even_offsets, vertex_offsets
from hpcgnn.layout.trace import ATTENTION, DENSE, trace

#: Dense-step variants (see :func:`dense_variant`).
ALLGATHER, REDUCE_SCATTER, GATHER, REDUCE = "allgather", "reduce_scatter", "gather", "reduce"

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Segment:
    """One SUMMA stage of a grid layer: inner positions ``[lo, hi)`` of ``V_l``.

    Attributes
    ----------
    index
        Stage number within the layer (stages run in increasing ``index``).
    lo, hi
        Positions in the layer's inner ordering.
    k
        Process row owning the dense rows: the segment lies in fine block ``(k, l)``.
    j
        Process column owning the sparse block ``Â^T(row block i, segment)``.
    g0
        Global id of the segment's first vertex (its vertices are ``g0 .. g0 + size``).
    r0
        Offset of the segment's first row inside fine block ``(k, l)``.

    """

    index: int
    lo: int
    hi: int
    k: int
    j: int
    g0: int
    r0: int

    @property
    def size(self) -> int:
        """Number of inner vertices of the stage."""
        return self.hi - self.lo


@dataclass(frozen=True)
class StageTable:
    """Every SUMMA stage of every grid layer as arrays: the fields of :class:`Segment`.

    Entry ``s`` is stage ``s - first[layer[s]]`` of grid layer ``layer[s]``; the stages of
    layer ``l`` are the entries ``first[l]:first[l + 1]``, in order, so ``s`` is also the
    global stage id of :meth:`SummaLayout.segment_ids`. The cost model reads this table
    instead of building a :class:`Segment` per stage (millions of them at ``P = 2^20``).
    """

    first: np.ndarray
    layer: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    k: np.ndarray
    j: np.ndarray
    g0: np.ndarray
    r0: np.ndarray

    @property
    def size(self) -> np.ndarray:
        """Number of inner vertices of every stage."""
        return self.hi - self.lo


class SummaLayout:
    """Fine blocks, column blocks and SUMMA stages of a ``Pr x Pc x Pl`` grid.

    Every layer's stages are found at once with array operations (``O(P)`` work), so the
    cost model can lay out every grid of a large ``P``.

    Parameters
    ----------
    n
        Number of vertices.
    dims
        ``(Pr, Pc, Pl)``; a 2D grid ``(Pr, Pc)`` is accepted as ``Pl = 1``.
    partition
        A file's partition offsets (``GraphMeta.partition_offsets``) or ``None``; used as
        the fine blocks when it has ``Pr * Pl`` parts (or a multiple of it), see
        :func:`~hpcgnn.layout.blocks.vertex_offsets`.
    split
        ``"auto"``: the column split rule of the module docstring; ``"even"``: always
        split the positions evenly (the general rule; tests use it to exercise stages
        that cut fine blocks on small grids).

    """

    def __init__(
        self, n: int, dims: tuple[int, ...], partition: tuple[int, ...] | None = None,
        split: str = "auto",
    ) -> None:
        if split not in ("auto", "even"):
            raise ValueError(f"unknown column split {split!r}")
        self.split = split
        if len(dims) == 2:
            dims = (dims[0], dims[1], 1)
        if len(dims) != 3 or min(dims) < 1:
            raise ValueError(f"SUMMA grids have 2 or 3 positive dimensions, got {dims}")
        self.n = int(n)
        self.pr, self.pc, self.pl = (int(d) for d in dims)
        self.fine = vertex_offsets(self.n, self.pr * self.pl, partition)
        zero = np.zeros((1, self.pl), dtype=np.int64)
        self._inner = np.concatenate([zero, np.cumsum(self.fine_sizes(), axis=0)])
        self._split = self._column_splits()
        self._stages = self._stage_table()
        self._segments: dict[int, list[Segment]] = {}

    @property
    def dims(self) -> tuple[int, int, int]:
        """``(Pr, Pc, Pl)``."""
        return (self.pr, self.pc, self.pl)

    @property
    def size(self) -> int:
        """Number of processes."""
        return self.pr * self.pc * self.pl

    # -- vertex blocks -------------------------------------------------------------------
    def fine_range(self, i: int, layer: int) -> tuple[int, int]:
        """Global rows ``[lo, hi)`` of fine block ``(i, layer)``."""
        b = i * self.pl + layer
        return int(self.fine[b]), int(self.fine[b + 1])

    def fine_rows(self, i: int, layer: int) -> int:
        """Number of rows of fine block ``(i, layer)``."""
        lo, hi = self.fine_range(i, layer)
        return hi - lo

    def row_block(self, i: int) -> tuple[int, int]:
        """Global rows ``[lo, hi)`` of row block ``i`` (fine blocks ``(i, 0..Pl-1)``)."""
        return int(self.fine[i * self.pl]), int(self.fine[(i + 1) * self.pl])

    def fine_sizes(self) -> np.ndarray:
        """Rows of every fine block as an array of shape ``(Pr, Pl)``."""
        return np.diff(self.fine).reshape(self.pr, self.pl)

    def cols(self, width: int) -> np.ndarray:
        """Offsets of the ``Pc`` feature-column blocks of a matrix of ``width`` columns."""
        return even_offsets(int(width), self.pc)

    def col_range(self, width: int, j: int) -> tuple[int, int]:
        """Columns ``[c0, c1)`` of column block ``j`` of a matrix of ``width`` columns."""
        c = self.cols(width)
        return int(c[j]), int(c[j + 1])

    # -- inner dimension of a grid layer -------------------------------------------------
    def inner_offsets(self, layer: int) -> np.ndarray:
        """Positions of the fine blocks ``(0, layer) .. (Pr - 1, layer)`` in ``V_layer``."""
        return self._inner[:, layer].copy()

    def column_split(self, layer: int) -> np.ndarray:
        """Offsets (positions of ``V_layer``) of the ``Pc`` sparse column blocks."""
        return self._split[:, layer].copy()

    def _column_splits(self) -> np.ndarray:
        """:meth:`column_split` of every layer, shape ``(Pc + 1, Pl)``."""
        q, pr, pc = self._inner, self.pr, self.pc
        if self.split == "auto" and pr % pc == 0:
            return q[even_offsets(pr, pc)]
        if self.split == "auto" and pc % pr == 0:
            per = pc // pr
            pieces = q[None, :-1] + even_offsets(np.diff(q, axis=0), per)[:-1]  # (per, Pr, Pl)
            return np.concatenate([pieces.transpose(1, 0, 2).reshape(pc, self.pl), q[-1:]])
        return even_offsets(q[-1], pc)

    def _stage_table(self) -> StageTable:
        """Cut every layer at its fine-block and column-block offsets (empty pieces dropped).

        The layers are solved together: layer ``l``'s positions are shifted by ``l * span``
        (``span`` exceeds every layer's length), which keeps the offsets of all layers in
        one sorted array, so one sort finds every cut and one ``searchsorted`` every owner.
        """
        q, c, pr, pc, pl = self._inner, self._split, self.pr, self.pc, self.pl
        span = int(q[-1].max()) + 1
        shift = np.arange(pl, dtype=np.int64) * span
        qs, cs = (q + shift).T.ravel(), (c + shift).T.ravel()  # layer by layer, ascending
        cuts = np.sort(np.concatenate([qs, cs]), kind="stable").reshape(pl, pr + pc + 2)
        lo, hi = cuts[:, :-1].ravel(), cuts[:, 1:].ravel()
        keep = hi > lo
        layer = np.repeat(np.arange(pl, dtype=np.int64), pr + pc + 1)[keep]
        lo = lo[keep]
        k = np.searchsorted(qs, lo, side="right") - 1 - layer * (pr + 1)
        j = np.searchsorted(cs, lo, side="right") - 1 - layer * (pc + 1)
        lo = lo - layer * span
        hi = hi[keep] - layer * span
        r0 = lo - q[k, layer]
        first = np.concatenate([[0], np.cumsum(np.bincount(layer, minlength=pl))])
        return StageTable(first, layer, lo, hi, k, j, self.fine[k * pl + layer] + r0, r0)

    def stages(self) -> StageTable:
        """The stages of every grid layer as arrays (see :class:`StageTable`)."""
        return self._stages

    def segments(self, layer: int) -> list[Segment]:
        """The SUMMA stages of grid layer ``layer``, in order (empty pieces dropped)."""
        if layer not in self._segments:
            t = self._stages
            a, b = int(t.first[layer]), int(t.first[layer + 1])
            rows = zip(*(x[a:b].tolist() for x in (t.lo, t.hi, t.k, t.j, t.g0, t.r0)), strict=True)
            self._segments[layer] = [Segment(idx, *row) for idx, row in enumerate(rows)]
        return self._segments[layer]

    def num_stages(self) -> int:
        """Stages of the slowest grid layer (the critical path of one SpMM)."""
        return int(np.diff(self._stages.first).max())

    def segment_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """Map every vertex to its (layer, stage) as a global stage id.

        Returns
        -------
        ids : numpy.ndarray
            ``ids[v]`` = ``first[layer] + stage`` for the stage containing vertex ``v``.
        first : numpy.ndarray
            ``first[layer]`` = global id of the layer's first stage (length ``Pl + 1``).

        """
        t = self._stages
        order = np.argsort(t.g0, kind="stable")  # the stages tile the vertices
        return np.repeat(order, t.size[order]).astype(np.int64), t.first.astype(np.int64)


# -- sparse blocks on the wire -----------------------------------------------------------
def index_dtype(n: int, nnz: int) -> type:
    """Index dtype of a broadcast sparse block: int32 when every index fits, else int64."""
    return np.int32 if max(int(n), int(nnz) + 1) <= _INT32_MAX else np.int64


def sparse_ints(rows: int, nnz: int) -> int:
    """Integers sent for a sparse block: CSR ``indptr`` or COO rows (the fewer) + indices.

    A block with fewer nonzeros than rows (hypersparse, common at large ``P``) is sent as
    coordinates, so its row structure costs ``nnz`` instead of ``rows + 1`` integers.
    """
    return min(int(rows) + 1, int(nnz)) + int(nnz)


def sparse_block_bytes(
    rows: float | np.ndarray, n: int, nnz: float | np.ndarray, itemsize: int
) -> np.ndarray:
    """Bytes of the broadcast of blocks with ``rows`` rows and ``nnz`` nonzeros (arrays ok).

    Equals :func:`message_bytes` for integer ``nnz``; the cost model also evaluates it at
    expected (fractional) nonzero counts. Blocks without nonzeros are not sent (0 bytes).
    """
    z = np.asarray(nnz, dtype=np.float64)
    isz = np.where(np.maximum(n, np.ceil(z) + 1) <= _INT32_MAX, 4.0, 8.0)
    b = (np.minimum(np.asarray(rows, dtype=np.float64) + 1.0, z) + z) * isz + z * itemsize
    return np.where(z > 0, b, 0.0)


def pack_block(a: sp.csr_matrix, n: int, values_dtype: np.dtype | type) -> np.ndarray:
    """One sparse block as the bytes of its broadcast message.

    The message is the integers of :func:`sparse_ints` (CSR ``indptr`` or COO row ids,
    then column indices; dtype :func:`index_dtype`) followed by the values. The receiver
    knows ``nnz`` (exchanged once) and the block's shape, hence the message length.
    """
    rows, nnz = a.shape[0], a.nnz
    if nnz >= rows + 1:
        structure = a.indptr
    else:
        structure = np.repeat(np.arange(rows), np.diff(a.indptr))
    ints: np.ndarray = np.concatenate([structure, a.indices]).astype(index_dtype(n, nnz))
    values = np.ascontiguousarray(a.data, dtype=values_dtype)
    return np.concatenate([ints.view(np.uint8), values.view(np.uint8)])


def message_bytes(rows: int, n: int, nnz: int, values_dtype: np.dtype | type) -> int:
    """Length of the :func:`pack_block` message of a block of ``rows`` rows."""
    isz = np.dtype(index_dtype(n, nnz)).itemsize
    return sparse_ints(rows, nnz) * isz + nnz * np.dtype(values_dtype).itemsize


def message_sections(rows: int, n: int, nnz: int) -> tuple[np.dtype, int, int]:
    """Where :func:`pack_block`'s message keeps what: ``(index dtype, ints, values offset)``.

    The message starts with ``ints`` integers of the index dtype (``ints - nnz`` of
    structure, CSR ``indptr`` when ``nnz >= rows + 1`` else COO row ids, then ``nnz``
    column indices); the ``nnz`` values start at byte ``values offset``.
    """
    idt = np.dtype(index_dtype(n, nnz))
    n_ints = sparse_ints(rows, nnz)
    return idt, n_ints, n_ints * idt.itemsize


# -- reading the owned blocks --------------------------------------------------------------
RowReader = Callable[[int, int], sp.csr_matrix]


def owned_blocks(
    layout: SummaLayout, i: int, j: int, layer: int, read_rows: RowReader
) -> dict[int, sp.csr_matrix]:
    """Sparse blocks P(i, j, layer) owns: ``M(row block i, segment)`` per owned stage.

    Parameters
    ----------
    layout
        The grid layout.
    i, j, layer
        Grid coordinates of the owner.
    read_rows
        ``read_rows(lo, hi)`` returns rows ``[lo, hi)`` of the (normalised) matrix ``M``
        with all ``n`` columns. It is called once per fine block of row block ``i``, so at
        most ``nnz / (Pr Pl)`` nonzeros are in memory at a time.

    Returns
    -------
    dict
        Stage index -> CSR block of shape ``(rows of row block i, segment size)``.

    """
    mine = [s for s in layout.segments(layer) if s.j == j]
    pieces: dict[int, list[sp.csr_matrix]] = {s.index: [] for s in mine}
    for sub in range(layout.pl):
        lo, hi = layout.fine_range(i, sub)
        chunk = read_rows(lo, hi).tocsc()
        for s in mine:
            pieces[s.index].append(chunk[:, s.g0 : s.g0 + s.size].tocsr())
    out = {}
    for idx, parts in pieces.items():
        block = sp.csr_matrix(sp.vstack(parts, format="csr"))
        block.sort_indices()
        out[idx] = block
    return out


def count_block_nnz(layout: SummaLayout, read_rows: RowReader) -> list[np.ndarray]:
    """Nonzeros of every block ``M(row block i, stage s of layer l)`` of a matrix.

    Reads the matrix one fine block of rows at a time (``read_rows`` as for
    :func:`owned_blocks`). Returns one array per grid layer ``l``, of shape
    ``(Pr, stages of l)``.
    """
    ids, first = layout.segment_ids()
    total = int(first[-1])
    counts = np.zeros((layout.pr, total), dtype=np.int64)
    for i in range(layout.pr):
        for sub in range(layout.pl):
            lo, hi = layout.fine_range(i, sub)
            chunk = read_rows(lo, hi)
            counts[i] += np.bincount(ids[chunk.indices], minlength=total)
    return [counts[:, first[layer] : first[layer + 1]] for layer in range(layout.pl)]


# -- per-layer plan ------------------------------------------------------------------------
def dense_variant(input_grad: bool, final: bool, f_in: int, f_out: int, pc: int) -> str:
    """How a dense step ``Z = T W`` runs on ``T((i, l), j)`` (the cheaper by volume).

    Steps whose result stays in the layout of ``H``:

    - ``"allgather"``: all-gather ``T`` along the process row, ``Z((i,l), j') =
      T((i,l), :) W(:, j')``; backward: reduce-scatter of ``dT``, only when ``T`` needs a
      gradient (``input_grad``). Volume ``(Pc-1) n f_in`` per pass.
    - ``"reduce_scatter"``: ``T((i,l), j) W(j, :)`` reduce-scattered along the row by
      output columns; backward: all-gather of ``dZ`` (always, for ``W``'s gradient).
      Volume ``(Pc-1) n f_out`` per pass.

    A ``final`` step delivers whole logit rows to process column 0 (the scorers):

    - ``"gather"``: gather ``T`` to column 0, which multiplies by ``W``; backward: scatter
      of ``dT`` (if ``input_grad``). Volume ``n (f_in - w_0)`` per pass, ``w_0`` = width
      of column block 0.
    - ``"reduce"``: reduce ``T((i,l), j) W(j, :)`` to column 0; backward: broadcast of the
      logit gradient. Volume ``(Pc-1) n f_out`` per pass.

    Ties go to the gathering variant. With ``Pc = 1`` no variant communicates.
    """
    back = 2 if input_grad else 1
    if not final:
        gather = back * (pc - 1) * f_in
        reduce = 2 * (pc - 1) * f_out
        return ALLGATHER if gather <= reduce else REDUCE_SCATTER
    w0 = int(even_offsets(int(f_in), pc)[1])
    gather = back * (f_in - w0)
    reduce = 2 * (pc - 1) * f_out
    return GATHER if gather <= reduce else REDUCE


@dataclass(frozen=True)
class Step:
    """One primitive call of a layer on a SUMMA grid, as its trace records it.

    Attributes
    ----------
    primitive
        ``"aggregate"`` (the SUMMA / Split-3D SpMM), ``"dense"`` (``T W`` along the process
        row) or ``"attention"`` (:mod:`hpcgnn.spmm.summa_attention`).
    f_in, f_out
        A dense step's (an attention's ``W``'s) shape; the SpMM's width twice.
    backward
        The SpMM's backward runs; a dense step's input needs its gradient.
    dense
        A dense step's variant (:func:`dense_variant`).
    heads
        An attention's heads.
    final
        On the last layer: the step delivers (its part of) the logits to process column 0.
    adjoint
        CAGNET's backward (``--product-order paper``, :attr:`hpcgnn.layout.trace.Call.adjoint`):
        the SpMM's backward runs on ``G`` of this width, and the dense step's adjoint is
        replaced by the all-gather of ``Â G`` along the process row (after scattering a final
        step's ``G`` from column 0); 0: the adjoints of the forward.
    """

    primitive: str
    f_in: int
    f_out: int
    backward: bool
    dense: str | None = None
    heads: int = 1
    final: bool = False
    adjoint: int = 0


@dataclass(frozen=True)
class LayerPlan:
    """How one layer runs on a SUMMA grid: its steps, in the order its forward calls them.

    Attributes
    ----------
    steps
        The layer's primitive calls (:class:`Step`).
    f_out
        The layer's output width.
    gather_logits
        The last layer's output is left in the layout of ``H`` (split by columns, e.g. an
        SpMM came last): it is gathered to process column 0 (backward: scattered).
    """

    steps: tuple[Step, ...]
    f_out: int
    gather_logits: bool

    @property
    def dense_steps(self) -> list[tuple[int, int, str]]:
        """The dense steps, in order: ``(f_in, f_out, variant)``."""
        return [(s.f_in, s.f_out, s.dense) for s in self.steps if s.dense is not None]

    @property
    def attention(self) -> Step | None:
        """The layer's attention step, if it has one."""
        return next((s for s in self.steps if s.primitive == ATTENTION), None)


def layer_plans(
    widths: list[int] | tuple[int, ...], pc: int, kind: Layer = GCN
) -> list[LayerPlan]:
    """The :class:`LayerPlan` of every layer of a model of ``kind`` with widths ``f_0 .. f_L``.

    From the layer's trace (:func:`hpcgnn.layout.trace.trace`): every dense step takes the
    cheaper variant by volume (:func:`dense_variant`) given whether its input needs a
    gradient, and on the last layer whether it delivers the logits itself (its result
    reaches the output through elementwise operations only, as every other part of it:
    GCN's ``(Â^T H) W``, GIN's ``U W_2``); otherwise the output is gathered to column 0
    at the end (GCN's ``Â^T (H W)``). An attention step (GAT) delivers the last layer's
    heads to column 0, which averages them.
    """
    calls = trace(widths, kind)
    out = []
    for t, f_out in enumerate(widths[1:]):
        steps = tuple(
            Step(c.primitive, c.f_in, c.f_out, c.backward,
                 dense_variant(c.backward, c.final, c.f_in, c.f_out, pc)
                 if c.primitive == DENSE else None, c.heads, c.final, c.adjoint)
            for c in calls if c.layer == t
        )
        last = t == len(widths) - 2
        out.append(LayerPlan(steps, int(f_out), last and not any(s.final for s in steps)))
    return out


@dataclass(frozen=True)
class HeadSlice:
    """The part of one attention head in a column block of ``z`` (``K`` heads of ``f'``).

    Attributes
    ----------
    head
        The head's index ``k``.
    lo, hi
        Its columns ``[lo, hi)`` within the column block.
    """

    head: int
    lo: int
    hi: int


def head_slices(cols: tuple[int, int], width: int) -> list[HeadSlice]:
    """The heads that columns ``[c0, c1)`` of ``z`` (heads of ``width`` columns) intersect.

    A SUMMA process holds a column block of ``z``; a head may straddle two blocks, so
    each process computes the attention of the heads its columns touch, on the columns it
    has (its share of every sum over a head's units).
    """
    c0, c1 = cols
    if c1 <= c0:
        return []
    return [
        HeadSlice(k, max(c0, k * width) - c0, min(c1, (k + 1) * width) - c0)
        for k in range(c0 // width, (c1 - 1) // width + 1)
    ]
