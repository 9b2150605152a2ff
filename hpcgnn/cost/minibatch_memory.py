"""A ``--mode minibatch`` rank's peak memory by part, from sizes only (pure).

The sampled batches' sizes are expectations: a node-wise hop draws ``min(f, d)``
in-neighbours for each of its ``r`` rows (``d``: the mean degree), and ``k`` draws over
``n`` vertices hit ``n (1 - exp(-k / n))`` distinct ones (uniform draws; a power-law graph
repeats its hubs, so its frontiers are smaller and the estimate an upper bound). A
layer-wise (LADIES) hop samples its ``s`` vertices (plus its rows where the layer reads
them); a Cluster-GCN batch is ``n b / C`` vertices (``b`` of ``C`` clusters) and every
hop reads the same ones.

:func:`minibatch_memory_parts` adds the rank's share of the graph (the pattern of ``S``:
whole, or its process row's block), its feature rows, the bulk's samples it holds, a hop's
sampling temporaries (the chunk budget, ``hpcgnn.sampling.bulk``), one batch's fetched
inputs and activations, the full-graph evaluation of its rows, the weights and the heap
the allocator keeps; ``hpcgnn model`` prints them, ``train``'s memory check uses the total
and ``perf/bench_memory.py`` measures them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hpcgnn.cost.ranking import HEAP_REUSE

#: The parts of :func:`minibatch_memory_parts`, in the order they are printed.
MINIBATCH_PARTS = (
    "graph_pattern", "features", "samples", "sampling_temporaries", "batch_inputs",
    "activations", "evaluation", "weights_adam", "heap_reuse", "temporaries",
)
#: Bytes of an id, a row pointer and a sampled value (int64, int64, float64).
ID, PTR, VALUE = 8, 8, 8
#: Bytes of a fetched input value beyond the value itself, per training-dtype byte: the
#: received buffer of the all-to-allv, the dropped copy (and a byte of its mask).
INPUT_COPIES = 3
#: Values per activation entry alive in a sampled step (input, output, mask, gradient).
ACTIVATION_COPIES = 4
#: Bytes per nonzero of ``S`` read that reading its pattern passes through besides the
#: pattern kept: the file's 64-bit ids and SciPy's sorted copy.
LOAD_BYTES_PER_NNZ = 16
#: Bytes per nonzero of ``S`` that Cluster-GCN's clustering passes through: the training
#: graph's rows taken and filtered, and METIS's graphs (measured: 20 MiB on an SBM of
#: 50,000 vertices and 850,000 nonzeros).
CLUSTERING_BYTES_PER_NNZ = 24


@dataclass(frozen=True)
class SampleSizes:
    """What ``--mode minibatch`` samples, as the cost model needs it.

    Attributes
    ----------
    kind
        ``"node"`` (GraphSAGE), ``"layer"`` (LADIES) or ``"cluster"`` (Cluster-GCN).
    sizes
        Per hop, the seeds' hop first: the fanout (node), vertices sampled (layer), unused
        for clusters.
    batch
        Seeds per minibatch (node, layer); vertices per batch for clusters.
    bulk
        Minibatches sampled together, shared out over the ranks.
    budget
        Bytes a hop's local sampling temporaries may take (``--sample-memory`` or the
        sampler's default).
    eager
        The rank holds its whole share of a bulk (the partitioned layout) rather than one
        group of finished batches at a time (the replicated one).
    """

    kind: str
    sizes: tuple[int, ...]
    batch: float
    bulk: int
    budget: float
    eager: bool


@dataclass(frozen=True)
class BatchShape:
    """One minibatch's hops, expected: rows, columns and nonzeros, the seeds' hop first."""

    rows: tuple[float, ...]
    cols: tuple[float, ...]
    nnz: tuple[float, ...]


def distinct(draws: float, n: float) -> float:
    """Expected distinct vertices among ``draws`` uniform draws from ``n``."""
    return n * -math.expm1(-draws / n) if n > 0 else 0.0


def expected_batch(n: int, nnz: int, sample: SampleSizes) -> BatchShape:
    """The expected sizes of one minibatch's hops on a graph of ``n`` vertices, ``nnz`` edges."""
    degree = nnz / max(n, 1)
    rows: list[float] = []
    cols: list[float] = []
    nnzs: list[float] = []
    r = min(float(sample.batch), float(n))
    for size in sample.sizes:
        if sample.kind == "cluster":
            c, e = r, nnz * r / max(n, 1)
        elif sample.kind == "layer":
            c = min(float(n), size + r)
            e = r * min(degree, c)
        else:
            e = r * min(float(size), degree)
            hit = distinct(e, n)
            c = min(float(n), hit + r * (1 - hit / max(n, 1)))
        rows.append(r)
        cols.append(c)
        nnzs.append(e)
        r = c
    return BatchShape(tuple(rows), tuple(cols), tuple(nnzs))


def minibatch_memory_parts(
    n: int, nnz: int, features: int, widths: Sequence[int], itemsize: int,
    sample: SampleSizes, dims: tuple[int, int], replicated: bool, weights: float,
    scan: float = 0.0,
) -> dict[str, float]:
    """The bytes one ``--mode minibatch`` rank reaches at its peak, by part.

    Parameters
    ----------
    n, nnz
        Vertices and stored edges of ``S`` (self loops included where it has them).
    features
        Input features per vertex.
    widths
        The layers' widths, input first.
    itemsize
        Bytes of a training value.
    sample
        What is sampled (:class:`SampleSizes`).
    dims
        The ``(P/c, c)`` grid.
    replicated
        Every rank holds the whole pattern of ``S`` (else its process row's block).
    weights
        The weights' bytes with their copies (``ranking.weight_bytes``).
    scan
        Bytes the graph check's block takes on the rank (``hpcgnn.io.validate``).

    Returns
    -------
    dict
        Bytes by part, every part of :data:`MINIBATCH_PARTS`:

        - ``graph_pattern``: the pattern of ``S`` the rank samples from (int64 row
          pointer and column ids), whole or its block row, and its block row again as the
          rows it owns;
        - ``features``: its process row's feature rows, labels and masks;
        - ``samples``: the sampled hops it holds (ids of rows and columns, the CSR with
          float64 values): one group of batches at a time when replicated, its whole
          share of the bulk when partitioned;
        - ``sampling_temporaries``: a hop's working set, the budget or the stack's
          ``128`` bytes per entry (frontier rows and their nonzeros) when smaller;
        - ``batch_inputs``: one batch's fetched input rows with their received buffer and
          dropped copy;
        - ``activations``: every hop's rows at the layer widths (input, output, mask,
          gradient);
        - ``evaluation``: the full-graph evaluation of its rows (the operator block and
          two layer widths of activations, a received block);
        - ``weights_adam``: ``weights``;
        - ``heap_reuse``: ``ranking.HEAP_REUSE`` of the step's temporaries (the heap the
          allocator keeps beyond them, as the full-batch estimate counts it);
        - ``temporaries``: the graph check's block (``scan``), whose freed memory the
          step's larger blocks do not fit in, and what reading the pattern
          (:data:`LOAD_BYTES_PER_NNZ`) and Cluster-GCN's clustering
          (:data:`CLUSTERING_BYTES_PER_NNZ`) pass through beyond the step's working set,
          which later reuses their memory.
    """
    q, c = dims
    ranks = q * c
    block_rows, block_nnz = n / q, nnz / q
    pattern = (n if replicated else block_rows) * PTR + (nnz if replicated else block_nnz) * ID
    pattern += block_rows * (PTR + ID) + block_nnz * ID if replicated else 0.0
    batch = expected_batch(n, nnz, sample)
    hop_bytes = sum(ID * (r + col) + PTR * (r + 1) + (ID + VALUE) * e
                    for r, col, e in zip(batch.rows, batch.cols, batch.nnz, strict=True))
    share = math.ceil(sample.bulk / ranks)
    held = share if sample.eager else 1
    entries = max(r * (1 + nnz / max(n, 1)) for r in batch.rows) * share
    temporaries = min(sample.budget, 128 * entries)
    inputs = batch.cols[-1] * features * (itemsize * INPUT_COPIES + 1)
    layer_rows = (*reversed(batch.rows), batch.rows[0])
    activations = ACTIVATION_COPIES * itemsize * sum(
        rows * width for rows, width in zip(layer_rows, widths, strict=False)
    )
    evaluation = block_nnz * (ID + itemsize) + block_rows * (
        3 * max(widths[1:], default=0) * itemsize
    )
    step = inputs + activations + hop_bytes
    working = held * hop_bytes + temporaries + step + evaluation + HEAP_REUSE * step
    read = (nnz if replicated else block_nnz) * LOAD_BYTES_PER_NNZ
    read += CLUSTERING_BYTES_PER_NNZ * nnz if sample.kind == "cluster" else 0.0
    parts = {
        "graph_pattern": pattern,
        "features": block_rows * (features * itemsize + 8 + 3),
        "samples": held * hop_bytes,
        "sampling_temporaries": temporaries,
        "batch_inputs": inputs,
        "activations": activations,
        "evaluation": evaluation,
        "weights_adam": weights,
        "heap_reuse": HEAP_REUSE * step,
        "temporaries": scan + max(read - working, 0.0),
    }
    return {k: float(parts[k]) for k in MINIBATCH_PARTS}
