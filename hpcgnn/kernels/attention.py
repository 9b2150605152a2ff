"""GAT's edge kernels on a CSR pattern: scores and row softmax, their backward, the SDDMM.

The pattern (:class:`EdgePattern`) is a rank's destination rows of ``A^T + I`` with
columns indexing the source rows it holds (its own and the gathered ones); ``K`` heads
per edge. CUDA: ``cuda/attention.cu`` (float/double, one thread per row and head for the
softmax, per edge and head for the SDDMM); the torch code here is the CPU twin with the
same contract, and what any other dtype runs. A row's sums are formed in edge order on
both, so the results do not depend on thread counts:

- :func:`edge_softmax`: ``t = s_dst[i] + s_src[j]``, ``e = LeakyReLU(t)``, ``alpha`` the
  softmax of ``e`` over each row (the row maximum subtracted first). Where a row's sources
  are split over ranks (1.5D), a :class:`RowReduce` makes the maximum and the sum the
  whole row's (then the torch code runs on every device);
- :func:`edge_softmax_backward`: given ``d alpha`` and each row's ``delta = sum_j alpha
  d alpha``, ``dt = alpha (d alpha - delta) LeakyReLU'(t)``;
- :func:`edge_dot`: the SDDMM ``out[e, k] = a[i, k, :] . b[j, k, :]`` over the edges;
- :func:`segment_sum`: per-row sums of edge values, in the pattern's or the transposed
  order (an SpMM with a pattern of ones: the same deterministic product on every device).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.backend.csr import fits_int32
from hpcgnn.kernels import cuda_modules as cm
from hpcgnn.kernels.dropout import keep_pair_words, keep_pairs
from hpcgnn.kernels.rows import row_word, take_rows
from hpcgnn.kernels.spmm import spmm, transpose_index
from hpcgnn.rng import TAG_ATTENTION, stream_key

#: Edges per chunk of :func:`edge_dot` times the heads' width: the entries of each of its
#: three temporaries (1 MiB at float32, so a chunk's gathers, product and sum stay in the
#: caches; SBM-20k, 4 heads of 4, one thread: 9.9 ms against 15.8 ms with 2^22).
DOT_CHUNK = 1 << 18

#: Head widths up to which :func:`edge_dot` runs column by column on the CPU, where
#: :func:`sums_in_order` finds torch's ``sum`` of that many values in order (so
#: ``((p_0 + p_1) + p_2) + ...`` added column by column is its ``sum`` bit for bit): at most
#: 4 always; float32's 8 on this machine's build (SBM-20k, one head of 8, one thread: 3.0
#: ms against 5.3 ms chunked).
DOT_COLUMNS = 8

#: Edges per chunk of the column-by-column :func:`edge_dot` (each ``E x K`` temporary then
#: stays in the caches; SBM-20k, 4 heads of 4, one thread: 5.5 ms against 10.8 ms by
#: :data:`DOT_CHUNK`, 6.8 ms unchunked; with the gathers into reused buffers 2^16 edges
#: beat 2^15 by 5% on a machine with 2 MiB of L2 a core, 3.4 against 3.5 ms; on one with
#: 4 MiB for two cores 2^15 beat 2^16 by 6%, both layers of SBM-20k's GAT: 10.9 against
#: 11.5 ms. 2^15: a 4-head chunk's three temporaries, 512 KiB each, fit either).
DOT_COLUMN_CHUNK = 1 << 15

#: LeakyReLU's negative slope in the scores (the paper's and PyG's 0.2).
NEGATIVE_SLOPE = 0.2


class RowReduce(Protocol):
    """Reductions over the ranks that share a row's sources (in place, ``rows x K``)."""

    def max(self, t: torch.Tensor) -> torch.Tensor:
        """The element-wise maximum over the ranks."""

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        """The element-wise sum over the ranks."""


@dataclass(frozen=True)
class EdgePattern:
    """A CSR pattern with its row of every edge and its transposed order.

    Attributes
    ----------
    crow, col, row
        CSR row pointers (int64), column of each edge, row of each edge (on the device;
        ``col`` and ``row`` in :func:`spmm_index`'s dtype: int32 on the host where they
        fit, so the gathers by them read half the index bytes; SBM-20k GAT, one thread:
        the epoch's ``index_select`` time 26 against 21 ms).
    perm, row_t
        The edges in column order (a stable argsort of ``col``) and their rows: the column
        indices of the transposed pattern (``col``'s dtype).
    sums, sums_t
        Patterns of ones ``rows x edges`` and ``cols x edges`` (CSR tensors): their
        products with edge values are the per-row and per-column sums.
    shape
        ``(rows, cols)``.
    row_ids, col_ids
        Global vertex ids of the rows and of the columns (int64, on the device; the
        attention dropout's keys).
    csr, csr_t
        Row pointers and column indices of :meth:`matrix` and of :meth:`transposed`, in
        :func:`spmm_index`'s dtype (int32 on the host where they fit).
    """

    crow: torch.Tensor
    col: torch.Tensor
    row: torch.Tensor
    perm: torch.Tensor
    row_t: torch.Tensor
    sums: torch.Tensor
    sums_t: torch.Tensor
    shape: tuple[int, int]
    row_ids: torch.Tensor
    col_ids: torch.Tensor
    csr: tuple[torch.Tensor, torch.Tensor]
    csr_t: tuple[torch.Tensor, torch.Tensor]

    @property
    def edges(self) -> int:
        """Stored edges."""
        return int(self.col.numel())

    def matrix(self, values: torch.Tensor) -> torch.Tensor:
        """The pattern with one value per edge, a CSR tensor ``rows x cols``."""
        return torch.sparse_csr_tensor(*self.csr, values, size=self.shape, check_invariants=False)

    def transposed(self, values: torch.Tensor) -> torch.Tensor:
        """The transposed pattern with the edges' values (in edge order), ``cols x rows``."""
        return torch.sparse_csr_tensor(
            *self.csr_t, self.in_column_order(values), size=(self.shape[1], self.shape[0]),
            check_invariants=False,
        )

    def in_column_order(self, values: torch.Tensor) -> torch.Tensor:
        """Edge values (``E`` or ``E x K``) in the transposed pattern's order: ``values[perm]``.

        An ``E x K`` array's rows move as one word each (:func:`take_rows`): every head's
        values in one gather (SBM-20k, 4 heads: 0.6x the time of a gather per head).
        """
        return take_rows(values, self.perm)

    def at_rows(self, x: torch.Tensor) -> torch.Tensor:
        """``x[row[e]]`` for every edge ``e`` (rows of a per-row array)."""
        return take_rows(x, self.row)

    def at_cols(self, x: torch.Tensor) -> torch.Tensor:
        """``x[col[e]]`` for every edge ``e`` (rows of a per-column array)."""
        return take_rows(x, self.col)


def edge_pattern(
    a: sp.csr_matrix | torch.Tensor,
    row_ids: np.ndarray | torch.Tensor,
    col_ids: np.ndarray | torch.Tensor,
    device: torch.device | str,
    dtype: torch.dtype,
) -> EdgePattern:
    """The :class:`EdgePattern` of a CSR matrix (its values are ignored).

    ``a``: a SciPy matrix (copied to ``device``), or a ``torch.sparse_csr`` tensor on it
    with sorted columns per row (a hop sampled on the GPU); ``row_ids``, ``col_ids``: host
    arrays or tensors. ``dtype``: of the patterns of ones (the values they sum). One
    integer computation on ``device`` either way.
    """
    if not isinstance(a, torch.Tensor):
        a = a.tocsr()
        a.sort_indices()
        a = torch.sparse_csr_tensor(
            torch.from_numpy(a.indptr.astype(np.int64)),
            torch.from_numpy(a.indices.astype(np.int64)),
            torch.ones(a.nnz, dtype=dtype),
            size=a.shape,
            check_invariants=False,
        ).to(device)
    rows, cols = a.shape
    crow, col = a.crow_indices().long(), a.col_indices().long()
    device = col.device
    row, perm, crow_t = transpose_index(crow, col, cols)
    idx = spmm_index(len(col), (rows, cols), device)
    # the edges' ids in the CSR tensors' dtype (int32 on the host where they fit: the
    # gathers by them read half the index bytes); col, perm and row_t are also those
    # tensors' column indices, one array each
    row, col, perm = row.to(idx), col.to(idx), perm.to(idx)
    row_t = row[perm]
    ones = torch.ones(len(col), dtype=dtype, device=device)
    edges = torch.arange(len(col), dtype=idx, device=device)
    sums = torch.sparse_csr_tensor(
        crow.to(idx), edges, ones, size=(rows, len(col)), check_invariants=False
    )
    sums_t = torch.sparse_csr_tensor(
        crow_t.to(idx), perm, ones, size=(cols, len(col)), check_invariants=False
    )

    def ids(x: np.ndarray | torch.Tensor) -> torch.Tensor:
        t = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x, np.int64))
        return t.to(device=device, dtype=torch.int64)

    return EdgePattern(
        crow=crow,
        col=col,
        row=row,
        perm=perm,
        row_t=row_t,
        sums=sums,
        sums_t=sums_t,
        shape=(rows, cols),
        row_ids=ids(row_ids),
        col_ids=ids(col_ids),
        csr=(sums.crow_indices(), col),
        csr_t=(sums_t.crow_indices(), row_t),
    )


def spmm_index(edges: int, shape: tuple[int, int], device: torch.device) -> torch.dtype:
    """The index dtype of a pattern's CSR tensors: int32 on the host where it fits, else int64.

    MKL takes int32 indices: torch converts int64 ones on every product (SBM-20k, a
    quarter of a 4-column SpMM's time at one thread), with the same sums either way. On a
    GPU the pattern keeps int64.
    """
    return torch.int32 if device.type == "cpu" and fits_int32(edges, shape) else torch.int64


def segment_sum(
    pattern: EdgePattern, values: torch.Tensor, transposed: bool = False
) -> torch.Tensor:
    """Per-row (``transposed``: per-column) sums of edge values ``E x K``."""
    return spmm(pattern.sums_t if transposed else pattern.sums, values)


def _on_gpu(x: torch.Tensor) -> bool:
    """Whether ``x`` runs the CUDA kernels (a float32/float64 tensor on a CUDA device)."""
    return x.is_cuda and x.dtype in (torch.float32, torch.float64)


def _launch(kernel: str, like: torch.Tensor, work: int, *args: object) -> None:
    """Run ``kernel<T>`` of ``attention.cu`` (``T`` of ``like``) on ``work`` threads' worth."""
    name = f"{kernel}<{cm.c_type(like.dtype)}>"
    cast = [cm.as_cupy(a.contiguous()) if isinstance(a, torch.Tensor) else a for a in args]
    cm.launch("attention.cu", name, cm.device_index(like.device), cm.blocks(work), tuple(cast))


def _scalar(like: torch.Tensor, value: float) -> np.floating:
    """``value`` as the C type of ``like``'s values."""
    return np.float32(value) if like.dtype == torch.float32 else np.float64(value)


def leaky_relu(t: torch.Tensor, slope: float) -> torch.Tensor:
    """``t`` where positive, else ``slope t``.

    One fused kernel: ``torch.where`` of the two took 50x its time on the CPU.
    """
    return torch.nn.functional.leaky_relu(t, slope)


def row_max(pattern: EdgePattern, e: torch.Tensor) -> torch.Tensor:
    """Each row's maximum of the edge values ``e`` (``E x K``); ``-inf`` on an empty row.

    The pattern's edges are in row order, so a segment reduction over the row lengths
    (a third less time than a scatter by row on the CPU; the same maxima).
    """
    return torch.segment_reduce(
        e, "max", lengths=pattern.crow.diff(), axis=0, unsafe=True, initial=-torch.inf
    )


def edge_softmax(
    pattern: EdgePattern,
    s_dst: torch.Tensor,
    s_src: torch.Tensor,
    slope: float,
    split: RowReduce | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention coefficients ``alpha`` (``E x K``) and the raw scores ``t`` they came from.

    Parameters
    ----------
    pattern
        The edges.
    s_dst
        ``rows x K``: the destination terms ``a_dst . z_i``.
    s_src
        ``cols x K``: the source terms ``a_src . z_j``.
    slope
        LeakyReLU's negative slope.
    split
        Where the rows' sources are split over ranks: the reductions that make each row's
        maximum and sum the whole row's (``None``: every source is here).
    """
    if _on_gpu(s_dst) and split is None:
        rows, heads = pattern.shape[0], s_dst.shape[1]
        alpha = s_dst.new_empty((pattern.edges, heads))
        t = torch.empty_like(alpha)
        if alpha.numel():
            _launch(
                "edge_softmax",
                s_dst,
                rows * heads,
                pattern.crow,
                pattern.col,
                s_dst,
                s_src,
                np.int64(rows),
                np.int64(heads),
                _scalar(s_dst, slope),
                alpha,
                t,
            )
        return alpha, t
    t = pattern.at_rows(s_dst).add_(pattern.at_cols(s_src))
    e = leaky_relu(t, slope)
    top = row_max(pattern, e)
    if split is not None:
        top = split.max(top)
    top = torch.nan_to_num(top, nan=0.0, posinf=0.0, neginf=0.0)  # rows without edges
    p = e.sub_(pattern.at_rows(top)).exp_()  # in place: the same values, fewer E x K arrays
    total = segment_sum(pattern, p)
    if split is not None:
        total = split.sum(total)
    return p.div_(pattern.at_rows(total)), t


def edge_softmax_backward(
    pattern: EdgePattern,
    alpha: torch.Tensor,
    t: torch.Tensor,
    d_alpha: torch.Tensor,
    delta: torch.Tensor,
    slope: float,
) -> torch.Tensor:
    """The gradient of the raw scores ``t`` (``E x K``) given that of ``alpha``.

    ``delta`` (``rows x K``): each row's ``sum_j alpha_ij d alpha_ij``, the whole row's
    (the GAT layer has it as ``dout_i . out_i``, without a reduction over split sources).
    """
    if _on_gpu(alpha):
        edges, heads = alpha.shape
        dt = torch.empty_like(alpha)
        if dt.numel():
            _launch(
                "edge_softmax_backward",
                alpha,
                edges * heads,
                pattern.row,
                alpha,
                t,
                d_alpha,
                delta,
                np.int64(edges),
                np.int64(heads),
                _scalar(alpha, slope),
                dt,
            )
        return dt
    # alpha (d_alpha - delta) as (-delta + d_alpha) alpha: the same values (a subtraction is
    # the addition of the negation; both commute), in the one new array, then the
    # LeakyReLU's backward into it (de where t > 0, else slope de)
    de = pattern.at_rows(delta).neg_().add_(d_alpha).mul_(alpha)
    return torch.ops.aten.leaky_relu_backward.grad_input(de, t, slope, False, grad_input=de)


def head_scores(z: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``s[i, k] = z[i, k, :] . a[k, :]``: GAT's per-vertex score terms, differentiable.

    ``z``: ``n x K x f``, ``a``: ``K x f``. The values and gradients of ``(z * a).sum(2)``
    bit for bit, in less time (torch's kernels broadcast a short last axis slowly):

    - the products as ``n x Kf`` times a row of ``Kf``; with several heads, where torch's
      ``sum`` of ``f`` values is the in-order one (:func:`sums_in_order`), the columns
      added in order (``+ 0`` last, as :func:`_edge_dot_by_column` does) instead of a
      reduction over the short axis;
    - the backward expands ``ds`` to ``n x K x f`` once, for both ``dz = ds a`` (a row
      broadcast, in place) and ``da = sum_i ds z`` (autograd's reduction over the rows).

    SBM-20k, 4 heads of 4, one thread: forward 0.22 against 0.35 ms, backward 0.32
    against 0.76 ms.
    """
    return _HeadScores.apply(z, a)


class _HeadScores(torch.autograd.Function):
    """:func:`head_scores` with the backward of ``(z * a).sum(2)``."""

    @staticmethod
    def forward(ctx, z: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(z, a)
        n, heads, width = z.shape
        prod = (z.reshape(n, heads * width) * a.reshape(-1)).view(n, heads, width)
        if heads == 1 or not 0 < width <= DOT_COLUMNS or not sums_in_order(width, z.dtype):
            return prod.sum(dim=2)
        s = prod[:, :, 0] + prod[:, :, 1] if width > 1 else prod[:, :, 0].clone()
        for c in range(2, width):
            s.add_(prod[:, :, c])
        return s.add_(0.0)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        z, a = ctx.saved_tensors
        n, heads, width = z.shape
        expanded = g.unsqueeze(2).expand(n, heads, width).contiguous()
        da = (expanded * z).sum(dim=0) if ctx.needs_input_grad[1] else None
        dz = expanded.view(n, -1).mul_(a.reshape(-1)).view(n, heads, width)
        return dz, da


def edge_dot(pattern: EdgePattern, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``out[e, k] = a[row[e], k, :] . b[col[e], k, :]`` for ``a``, ``b`` of ``n x K x f``."""
    heads, width = a.shape[1], a.shape[2]
    out = torch.empty((pattern.edges, heads), dtype=a.dtype, device=a.device)
    if _on_gpu(a):
        if out.numel():
            _launch(
                "edge_dot",
                a,
                pattern.edges * heads,
                pattern.row,
                pattern.col,
                a,
                b,
                np.int64(pattern.edges),
                np.int64(heads),
                np.int64(width),
                out,
            )
        return out
    if 0 < width <= DOT_COLUMNS and sums_in_order(width, a.dtype):
        return _edge_dot_by_column(pattern, a, b, out)
    step = max(1, DOT_CHUNK // max(1, heads * width))
    a, b = a.contiguous(), b.contiguous()  # once, for every chunk's fast gather
    for lo in range(0, pattern.edges, step):
        hi = min(lo + step, pattern.edges)
        prod = _take_word_rows(a, pattern.row[lo:hi]).mul_(_take_word_rows(b, pattern.col[lo:hi]))
        torch.sum(prod, dim=2, out=out[lo:hi])
    return out


#: The word :func:`_take_word_rows` moves (16 bytes).
_WORD = torch.complex128


def _take_word_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows ``idx`` of a contiguous ``x``: :func:`take_rows`, by 16-byte words where they fit.

    A row of ``w > 1`` whole words (a head's 8 float32 units: 32 bytes) is gathered as the
    words ``idx * w + c`` of the flat data, the 1-D copy (:func:`take_rows` moves one
    word per row so; a 2-D gather of such rows took 1.5x as long, with the index built per
    chunk). The bits are moved unchanged.
    """
    row = x[0].numel() * x.element_size() if x.shape[0] else 0
    if row <= _WORD.itemsize or row % _WORD.itemsize or x.data_ptr() % _WORD.itemsize:
        return take_rows(x, idx)
    w = row // _WORD.itemsize
    flat = (idx.long()[:, None] * w + torch.arange(w, device=idx.device)).reshape(-1)
    words = x.view(-1).view(_WORD).index_select(0, flat)
    return words.view(x.dtype).view(len(idx), *x.shape[1:])


def _edge_dot_by_column(
    pattern: EdgePattern, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    """:func:`edge_dot` on the CPU one feature column at a time (``f <= DOT_COLUMNS``).

    Each column ``c`` of both sides is an ``n x K`` array (the heads' rows of 8 or 16 bytes
    gathered as one word, :func:`_column_words`): ``out += a_c[row] b_c[col]`` in ``c``
    order, then ``+ 0`` (``torch.sum`` starts from ``+0``, so an all ``-0`` sum is
    ``+0``): the values of the product-and-sum, without its ``E x K x f`` temporaries. A
    chunk's gathers go into two buffers reused for every column and chunk.
    """
    a_cols, b_cols = _column_words(a), _column_words(b)
    buf_a = a_cols.new_empty((min(DOT_COLUMN_CHUNK, pattern.edges), *a_cols.shape[2:]))
    buf_b = torch.empty_like(buf_a)
    for lo in range(0, pattern.edges, DOT_COLUMN_CHUNK):
        hi = min(lo + DOT_COLUMN_CHUNK, pattern.edges)
        rows, cols, acc = pattern.row[lo:hi], pattern.col[lo:hi], out[lo:hi]
        xa, xb = buf_a[: hi - lo], buf_b[: hi - lo]
        va, vb = xa.view(out.dtype).view(acc.shape), xb.view(out.dtype).view(acc.shape)
        for c in range(a.shape[2]):
            torch.index_select(a_cols[c], 0, rows, out=xa)
            torch.index_select(b_cols[c], 0, cols, out=xb)
            if c == 0:
                torch.mul(va, vb, out=acc)
            else:
                acc.add_(va.mul_(vb))
    return out.add_(0.0)


def _column_words(x: torch.Tensor) -> torch.Tensor:
    """The ``f`` columns of ``x`` (``n x K x f``), each ``n`` rows of its ``K`` heads.

    ``f x n``: one word (or value) per row, where ``K`` values make one (:func:`row_word`);
    else ``f x n x K`` values. Copied into a new array (an empty ``x``'s permuted view
    counts as contiguous but has no word strides).
    """
    cols = torch.empty((x.shape[2], x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    cols.copy_(x.permute(2, 0, 1))
    if x.shape[1] == 1:
        return cols.view(x.shape[2], x.shape[0])
    word = row_word(x.shape[1] * x.element_size())
    return cols if word is None else cols.view(word).view(x.shape[2], x.shape[0])


@functools.cache
def sums_in_order(width: int, dtype: torch.dtype) -> bool:
    """Whether this torch's ``sum`` of ``width`` contiguous values is the in-order sum.

    ``((0 + p_0) + p_1) + ... + p_{width-1}``: probed once per width and dtype on values
    over a wide range of magnitudes (a different order differs on some of them). Torch
    sums up to 4 values so on every build (``row_sum``'s four accumulators); how it sums
    more depends on its vector width (float32's 8 in order where a vector holds 8).
    """
    gen = torch.Generator().manual_seed(width)
    scale = torch.exp(6 * torch.randn((4096, 3, width), generator=gen, dtype=torch.float64))
    p = (torch.randn((4096, 3, width), generator=gen, dtype=torch.float64) * scale).to(dtype)
    acc = torch.zeros(p.shape[:2], dtype=dtype)
    for c in range(width):
        acc = acc + p[..., c]
    return torch.equal(p.sum(dim=2).view(torch.uint8), acc.view(torch.uint8))


#: ``heads(layer)``: the global model's heads of a layer and the global ids of the model's
#: own (a GIST sub-GAT's), or ``None`` where the model has the layer's heads all.
HeadIds = Callable[[int], tuple[int, np.ndarray] | None]


@dataclass(frozen=True)
class AttentionDrop:
    """The attention dropout of one step: drop probability and stream key per layer.

    Full-batch steps are keyed ``(seed, epoch, layer)``, a minibatch's ``(seed, epoch,
    batch, layer)``. ``heads``: a GIST sub-GAT's global head ids (:data:`HeadIds`), so it
    draws the global model's decisions of its heads.
    """

    p: float
    seed: int
    epoch: int
    batch: int | None = None
    heads: HeadIds | None = None

    def keep(
        self,
        layer: int,
        pattern: EdgePattern,
        heads: int,
        head_ids: Sequence[int] | None = None,
        dtype: torch.dtype = torch.bool,
    ) -> torch.Tensor:
        """Keep decisions of the pattern's edges, keyed by global ``(i, j, k)``.

        ``E x K`` for the layer's ``heads``, or ``E x len(head_ids)`` for some of them (a
        SUMMA process's heads). A GIST sub-GAT (``self.heads``) draws the global model's
        decisions of its heads: its head ``k`` is global head ``self.heads(layer)[1][k]``.
        ``dtype``: booleans, or ones and zeros of the coefficients' dtype (``alpha * keep``
        the same values, faster on the CPU).
        """
        step = (self.epoch,) if self.batch is None else (self.epoch, self.batch)
        key = stream_key(self.seed, TAG_ATTENTION, *step, layer)
        ids = list(range(heads)) if head_ids is None else list(head_ids)  # the model's own
        device = pattern.col.device
        total, k = heads, torch.tensor(ids, dtype=torch.int64, device=device)
        sub = None if self.heads is None else self.heads(layer)
        if sub is not None:  # a sub-GAT: its heads' ids among the global model's
            total = sub[0]
            k = torch.as_tensor(sub[1][ids], dtype=torch.int64, device=device)
        if device.type != "cuda":  # each vertex's words once, gathered per edge and head
            return keep_pair_words(
                key,
                pattern.row_ids,
                pattern.col_ids[:, None] * total + k,
                pattern.row,
                pattern.col,
                self.p,
                dtype,
            )
        rows = pattern.at_rows(pattern.row_ids)
        cols = pattern.at_cols(pattern.col_ids)
        pairs_r = rows[:, None].expand(-1, len(ids)).reshape(-1)
        pairs_c = (cols[:, None] * total + k).reshape(-1)
        return keep_pairs(key, pairs_r, pairs_c, self.p).reshape(-1, len(ids)).to(dtype)
