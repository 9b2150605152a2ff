"""A run's cost-model view and the ranking behind ``hpcgnn model`` (sizes only, no MPI).

:func:`cost_problem` turns a graph's metadata and the hyper-parameters into the
:class:`~hpcgnn.cost.estimate.Problem` every cost model takes; :func:`memory_estimate`
bounds a full-batch rank's memory on a grid (minibatch:
:mod:`hpcgnn.cost.minibatch_memory`);
:func:`rank_choices` evaluates every algorithm on every
admissible grid for ``P`` ranks and sorts them by modelled time. ``P`` need not be
runnable here (e.g. 4096).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpcgnn.config import TrainConfig
from hpcgnn.cost.block_row import replication_note
from hpcgnn.cost.estimate import Estimate, Problem
from hpcgnn.cost.halo import choose_backward
from hpcgnn.cost.paper import PAPER_ALGORITHMS, paper_words
from hpcgnn.cost.predict import PREDICTORS, predict
from hpcgnn.cost.summa import SummaBlockNnz, predict_summa
from hpcgnn.io.reader import GraphMeta
from hpcgnn.io.validate import scan_bytes
from hpcgnn.layout.blocks import vertex_offsets
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.shapes import GridShape, admissible_shapes
from hpcgnn.layout.trace import ATTENTION, aggregation_widths, uses


def cost_problem(
    meta: GraphMeta, cfg: TrainConfig, row_offsets: Sequence[int] | np.ndarray | None
) -> Problem:
    """The cost model's view of training ``cfg`` on the graph ``meta`` describes."""
    widths = tuple(layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers))
    offsets = None if row_offsets is None else tuple(int(x) for x in row_offsets)
    return Problem(
        meta.num_nodes,
        meta.num_edges + (meta.num_nodes if cfg.kind.self_loops else 0),
        widths,
        cfg.itemsize,
        offsets,
        cfg.kind,
        cfg.bias,
    )


def weight_bytes(meta: GraphMeta, cfg: TrainConfig, per_layer: int = 1) -> float:
    """Bytes the weights take on every rank (they are replicated), all copies counted.

    ``per_layer`` weight matrices per layer (GraphSAGE has two). Each weight is held five
    times (value, gradient, Adam's two moments, the fused gradient all-reduce buffer),
    and the initialiser draws one matrix at a time in float64.
    """
    widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
    sizes = [float(a) * b for a, b in zip(widths[:-1], widths[1:], strict=True)]
    return per_layer * 5 * cfg.itemsize * sum(sizes) + 8 * max(sizes)


#: The parts of :func:`memory_parts`, in the order ``hpcgnn model`` prints them.
MEMORY_PARTS = (
    "graph_blocks", "features", "activations", "attention", "weights_adam",
    "comm_buffers", "heap_reuse", "temporaries",
)
#: Bytes per nonzero the loading of one operator block passes through besides the block it
#: keeps: the file's 64-bit column ids and float32 ones, SciPy's ``block + I`` and its
#: normalised values, the 64-bit copy of the column ids for torch.
LOAD_BYTES_PER_NNZ = 36
#: The heap that glibc keeps beyond an epoch's temporaries when freed memory is kept for
#: reuse (``utils/memory.py`` ``keep_freed_memory``): freed blocks of other sizes left
#: between new ones, measured at a third to a half of an epoch's temporaries
#: (``perf/results/bench_memory.md``).
HEAP_REUSE = 0.5


@dataclass(frozen=True)
class MemoryParts:
    """One rank's predicted peak bytes by part (:data:`MEMORY_PARTS`); ``total`` is the sum.

    Attributes
    ----------
    parts
        Bytes by part, every part of :data:`MEMORY_PARTS` (0 where none).
    """

    parts: dict[str, float]

    @property
    def total(self) -> float:
        """The predicted peak: the sum of the parts."""
        return float(sum(self.parts.values()))


@dataclass(frozen=True)
class RankBlock:
    """One rank's block of the graph, as the memory estimate counts it.

    Attributes
    ----------
    rows
        Vertices (rows) the rank owns.
    nnz, nnz_t
        Nonzeros of its rows of ``Â^T`` and of ``Â`` (self loops included).
    halo, sent
        Rows it receives and sends in one halo exchange (halo only: its widest of the
        forward gather and a pulled backward's).
    """

    rows: float
    nnz: float
    nnz_t: float
    halo: float = 0.0
    sent: float = 0.0


def rank_blocks(meta: GraphMeta, shape: GridShape, halo: bool = False) -> list[RankBlock]:
    """Every rank's block on ``shape`` where the file records them, else the mean block.

    A block-row grid (1D, 1.5D, halo) that follows a partition ``hpcgnn partition``
    recorded the blocks of (``meta.block_counts``) gets each block's exact rows, nonzeros
    and halo; otherwise one block of ``n / (P/c)`` rows (``n / P`` on SUMMA grids) and the
    mean nonzeros, whose halo is bounded by every remote vertex and by one per
    off-diagonal nonzero (``nnz - 2 rows``: the self loop and at least one local edge).
    """
    row_grid = shape.kind in ("1d", "1.5d")
    blocks = shape.dims[0] if row_grid else shape.size
    counts = meta.block_counts(blocks) if row_grid else None
    if counts is None:
        rows = meta.num_nodes / blocks
        nnz = (meta.num_edges + meta.num_nodes) / blocks
        remote = min(meta.num_nodes - rows, max(nnz - 2 * rows, 0.0)) if halo else 0.0
        return [RankBlock(rows, nnz, nnz, remote, remote)]
    offsets = vertex_offsets(meta.num_nodes, blocks, meta.partition_offsets)
    pull = choose_backward(sum(counts.fwd_recv), sum(counts.bwd_recv)) == "pull"
    out = []
    for b, rows in enumerate(np.diff(offsets).tolist()):
        recv, sent = counts.fwd_recv[b], counts.fwd_send[b]
        if pull:  # the backward gathers its own halo: the wider exchange of the two
            recv, sent = max(recv, counts.bwd_recv[b]), max(sent, counts.bwd_send[b])
        out.append(RankBlock(rows, counts.in_edges[b] + rows, counts.out_edges[b] + rows,
                             recv if halo else 0.0, sent if halo else 0.0))
    return out


def memory_parts(
    meta: GraphMeta, cfg: TrainConfig, shape: GridShape, algo: str | None = None
) -> MemoryParts:
    """The bytes the busiest full-batch rank reaches at its peak, by part (the memory check's).

    ``algo``: the algorithm on ``shape`` (``halo`` runs on a 1D grid; ``None``: the grid's
    kind). Each rank's block (:func:`rank_blocks`: exact where the partitioned file records
    its blocks, else the mean block); the parts of the block with the largest total:

    - ``graph_blocks``: the rank's blocks of ``Â^T`` and ``Â`` as torch CSR (64-bit
      column ids, one value per nonzero, a 64-bit row pointer); halo's are ``Â^T``'s rows
      on the columns ``[owned | halo]`` and the backward's operator (their transpose, a
      row per owned and halo vertex, or pulling ``Â``'s rows: the larger), and it also
      keeps its SciPy ``[owned | halo]`` block of ``Â^T`` (32-bit ids);
    - ``features``: the rank's rows of ``X`` in the training dtype, labels and masks;
    - ``activations``: every layer's input, output, dropout mask and gradient of the
      rank's rows (``4 sum(f)`` values per row);
    - ``attention``: GAT's per-edge scores, coefficients, their dropped copy and gradient
      and the gathered rows of ``[z | s_src]``; on a SUMMA grid the row block's edge
      patterns the backward keeps;
    - ``weights_adam``: :func:`weight_bytes`;
    - ``comm_buffers``: a received block and the partial sums, ``2 max(f)`` values per
      row; halo, at the widest aggregation: the ``[owned | halo]`` rows a product reads
      (the halo rows received into them in place, kept from call to call), the sent block
      and a pushed backward's halo rows of the product and the gradients received for the
      owned rows;
    - ``heap_reuse``: :data:`HEAP_REUSE` of an epoch's temporaries (activations, attention,
      buffers), the heap glibc keeps beyond them;
    - ``temporaries``: the graph check's block of edges (``hpcgnn.io.validate``
      ``SCAN_BYTES_PER_ENTRY`` for each of at most ``EDGE_BLOCK`` of the rank's ``1 / P`` of
      the edges), whose freed memory the epoch's larger blocks do not fit in, and the
      loading of the blocks (:data:`LOAD_BYTES_PER_NNZ` per nonzero of each, and the other
      side's degrees, two ``n``-vectors of 64-bit values) beyond the epoch's temporaries
      and the heap kept with them (``heap_reuse``), which later reuse its memory (a
      partition's busiest block loads more than its epoch holds).

    Not counted: the libraries' first use after the run's start mark (autograd's engine,
    the sparse kernels; about 20 MiB on the CPU whatever the graph).
    """
    halo = (algo or shape.kind) == "halo"
    blocks = [block_parts(meta, cfg, shape, block, halo)
              for block in rank_blocks(meta, shape, halo)]
    return max(blocks, key=lambda parts: parts.total)


def block_parts(
    meta: GraphMeta, cfg: TrainConfig, shape: GridShape, block: RankBlock, halo: bool
) -> MemoryParts:
    """:func:`memory_parts` of one rank's ``block``."""
    itemsize = cfg.itemsize
    rows, nnz = block.rows, block.nnz
    widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)

    def csr(nonzeros: float, pointers: float) -> float:
        return nonzeros * (8 + itemsize) + 8 * (pointers + 1)

    if halo:  # the backward's: the transpose (push; a row per owned and halo vertex) or Â's
        back = csr(max(nnz, block.nnz_t), rows + block.halo)
        graph = csr(nnz, rows) + back + nnz * (4 + itemsize)
    else:
        graph = csr(nnz, rows) + csr(block.nnz_t, rows)
    features = rows * (meta.num_features * itemsize + 8 + 3)
    activations = 4 * rows * sum(widths) * itemsize
    if halo:  # [owned | halo] rows kept for the products, the sent and received blocks
        width = max(f for f, _ in aggregation_widths(widths, cfg.kind))
        buffers = (rows + 2 * block.halo + block.sent) * width * itemsize
    else:
        buffers = 2 * rows * max(widths) * itemsize
    attention = 0.0
    if uses(widths, cfg.kind, ATTENTION):
        kind, last = cfg.kind, cfg.layers - 1
        heads = sum(kind.layer_heads(layer == last) for layer in range(cfg.layers))
        gathered = sum(f for f, _ in aggregation_widths(widths, kind))
        edges = nnz
        if shape.kind in ("2d", "3d"):  # the row block's edges of a grid layer, patterns kept
            edges = (meta.num_edges + meta.num_nodes) / (shape.size / shape.dims[1])
            attention += 7 * 8 * edges * cfg.layers
        attention += itemsize * (4 * edges * heads + 2 * meta.num_nodes * gathered)
    epoch = activations + attention + buffers
    load = LOAD_BYTES_PER_NNZ * (nnz + block.nnz_t) + 2 * 8 * meta.num_nodes
    scan = scan_bytes(meta.num_edges, shape.size)
    parts = {
        "graph_blocks": graph, "features": features, "activations": activations,
        "attention": attention, "weights_adam": weight_bytes(meta, cfg, cfg.weights_per_layer),
        "comm_buffers": buffers, "heap_reuse": HEAP_REUSE * epoch,
        "temporaries": scan + max(load - (1 + HEAP_REUSE) * epoch, 0.0),
    }
    return MemoryParts({k: float(parts[k]) for k in MEMORY_PARTS})


def memory_estimate(
    meta: GraphMeta, cfg: TrainConfig, shape: GridShape, algo: str | None = None
) -> float:
    """The bytes one full-batch rank reaches at its peak: :func:`memory_parts`' total."""
    return memory_parts(meta, cfg, shape, algo).total


def rank_choices(
    meta: GraphMeta, cfg: TrainConfig, procs: int, alpha: float, beta: float,
    block_nnz: Callable[[tuple[int, ...]], SummaBlockNnz | None] | None = None,
    axis_betas: Callable[[tuple[int, ...]], dict[str, float]] | None = None,
) -> list[dict[str, Any]]:
    """Every (algorithm, grid) that trains ``cfg``'s layers, fastest modelled epoch first.

    Parameters
    ----------
    meta
        The graph's sizes; its partition (``meta.partition_offsets``) splits the vertices
        as training would.
    cfg
        Layers, hidden width and dtype.
    procs
        Number of ranks ``P``.
    alpha, beta
        Seconds per message and per byte of the alpha-beta model.
    block_nnz
        The exact sparse block nonzeros of a 2D / 3D grid (e.g.
        :class:`~hpcgnn.cost.summa.BlockNnzCounter` of the file), or ``None`` where they
        are not known; without them the nonzeros are spread uniformly, which puts the
        busiest rank's sparse traffic too low on a real graph. Each row says which in
        ``sparse_blocks`` (``"exact"``, ``"uniform"``, or ``""`` with no sparse traffic).
    axis_betas
        Seconds per byte by grid axis for a grid's dims (e.g. :meth:`hpcgnn.cost.machine.
        Machine.axis_betas`: a process row inside a node runs over its links), or ``None``:
        ``beta`` for every collective.
    """
    problem = cost_problem(meta, cfg, meta.partition_offsets)
    widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
    rows = []
    for algo in PREDICTORS:
        if algo not in cfg.kind.modes:
            continue
        for shape in admissible_shapes(algo, procs):
            exact = None
            sparse = algo in ("2d", "3d") and shape.dims[1] > 1
            if sparse and block_nnz is not None:
                exact = block_nnz(shape.dims)
            est = predict_summa(problem, shape.dims, exact) if sparse else predict(
                algo, problem, shape
            )
            betas = None if axis_betas is None else axis_betas(shape.dims)
            memory = memory_parts(meta, cfg, shape, algo)
            rows.append(
                {
                    "algo": algo,
                    "grid": str(shape),
                    "time_s": est.time(alpha, beta, betas),
                    "max_rank_bytes": sum(est.bytes_max_rank.values()),
                    "total_bytes": sum(est.bytes_total.values()),
                    "messages": est.messages,
                    "memory_per_rank_bytes": memory.total,
                    "memory_parts_bytes": memory.parts,
                    "bytes_by_category": est.bytes_total,
                    "max_rank_bytes_by_category": est.bytes_max_rank,
                    "time_by_phase_s": phase_times(est, alpha, beta, betas),
                    "sparse_blocks": ("uniform" if exact is None else "exact") if sparse else "",
                    "note": grid_note(problem, shape),
                    "paper_bytes_per_rank": None if algo not in PAPER_ALGORITHMS else (
                        cfg.itemsize * paper_words(algo, shape.dims, meta.num_nodes,
                                                   meta.num_edges + meta.num_nodes, widths)
                    ),
                }
            )
    rows.sort(key=lambda r: (r["time_s"], r["algo"], r["grid"]))
    return rows


def phase_times(
    est: Estimate, alpha: float, beta: float, betas: dict[str, float] | None = None
) -> dict[str, float]:
    """:meth:`Estimate.time` split by phase: ``beta x`` busiest-rank bytes per category.

    ``betas``: by grid axis (:meth:`Estimate.beta_by_category`). The latency ``alpha x
    messages`` is not split by category; it is the ``latency`` entry. The entries sum to
    ``est.time(alpha, beta, betas)``.
    """
    out = est.beta_by_category(beta, betas)
    out["latency"] = alpha * est.messages
    return out


def fastest_per_algo(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The first (fastest) row of each algorithm in ``rows`` (as :func:`rank_choices` sorts)."""
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        best.setdefault(row["algo"], row)
    return best


def grid_note(problem: Problem, shape: GridShape) -> str:
    """What to know about running ``shape`` ('' when nothing).

    A 1.5D replication that does not suit the grid
    (:func:`~hpcgnn.cost.block_row.replication_note`), or a 3D grid without a layer
    dimension, ``Pr x Pc x 1``: it is 2D ``Pr x Pc`` (the cost models give the same bytes
    in every category, and the runs measure what they predict).
    """
    if shape.kind == "3d":
        pr, pc, pl = shape.dims
        if pl == 1 and pr * pc > 1:
            return f"3d {shape} has no layer dimension: it moves what 2d {pr}x{pc} moves"
        return ""
    return replication_note(problem, shape)
