"""A minibatch rank's memory for a sampler's spec, and the hop's working-set budget.

Torch-free (``hpcgnn model`` prints it): :func:`minibatch_memory` turns a
:class:`~hpcgnn.sampling.spec.SamplerSpec` into the sizes of
:func:`hpcgnn.cost.minibatch_memory.minibatch_memory_parts`, the estimate
``--mode minibatch``'s memory check uses.
"""

from __future__ import annotations

from hpcgnn.config import TrainConfig
from hpcgnn.cost.minibatch_memory import SampleSizes, minibatch_memory_parts
from hpcgnn.cost.ranking import weight_bytes
from hpcgnn.io.reader import GraphMeta
from hpcgnn.io.validate import scan_bytes
from hpcgnn.layout.order import layer_sizes
from hpcgnn.sampling.spec import (
    DEFAULT_CLUSTER_SIZE,
    DEFAULT_CLUSTERS_PER_BATCH,
    LAYOUTS,
    SamplerSpec,
)

#: Most entries (frontier rows + their nonzeros of ``S``) of one local stacked hop: 2 MiB
#: per int64 temporary, so a hop's working set stays in the caches and in memory the
#: allocator reuses (see :mod:`hpcgnn.sampling.bulk`; 2^18 was faster than 2^16 and 2^20
#: at batch 64 and 1024 here).
MAX_STACK_ENTRIES = 1 << 18
#: Bytes a hop's temporaries take per stacked entry, for a memory budget (about sixteen
#: 8-byte arrays of the entries' size alive at once: ``P``'s pattern and values, the
#: selection, the draws, the sort keys and permutations of the columns' union).
BYTES_PER_ENTRY = 128
#: Share of the GPU's free memory (after the pattern of ``S`` is there) that a hop's
#: temporaries may take when ``--sample-memory`` is not given.
DEVICE_SHARE = 0.25


def default_budget(free_bytes: int | None) -> float:
    """``--sample-memory``'s default: a share of a GPU's free bytes, else the cache-sized stack.

    On the host (``free_bytes`` ``None``) it is :data:`MAX_STACK_ENTRIES` entries, the
    working set that keeps a hop in the caches; on a GPU, :data:`DEVICE_SHARE` of its free
    memory, so a bulk is one SpGEMM per hop wherever it fits.
    """
    if free_bytes is None:
        return float(MAX_STACK_ENTRIES * BYTES_PER_ENTRY)
    return DEVICE_SHARE * free_bytes


def sample_sizes(
    spec: SamplerSpec, num_nodes: int, layout: str, budget: float | None = None
) -> SampleSizes:
    """What ``spec`` samples in the cost model's terms (a cluster batch: ``n b / C`` vertices).

    ``budget``: ``--sample-memory`` in bytes (``None``: the host's default).
    """
    method = spec.method
    if method.induced:
        clusters = spec.clusters or max(1, round(num_nodes / DEFAULT_CLUSTER_SIZE))
        per_batch = spec.clusters_per_batch or DEFAULT_CLUSTERS_PER_BATCH
        kind, batch = "cluster", num_nodes * min(1.0, per_batch / clusters)
    else:
        kind, batch = ("node" if method.node_wise else "layer"), float(spec.batch_size)
    return SampleSizes(kind, spec.sizes, batch, spec.bulk,
                       default_budget(None) if budget is None else budget,
                       eager=layout != LAYOUTS[0])


def minibatch_memory(
    meta: GraphMeta, cfg: TrainConfig, spec: SamplerSpec, dims: tuple[int, int], layout: str,
    budget: float | None = None,
) -> dict[str, float]:
    """One ``--mode minibatch`` rank's peak bytes by part on a ``(P/c) x c`` grid ``dims``.

    ``layout``: ``replicated`` or ``partitioned``; ``budget``: ``--sample-memory`` in bytes.
    """
    q, c = dims
    return minibatch_memory_parts(
        meta.num_nodes, meta.num_edges + meta.num_nodes, meta.num_features,
        layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers),
        cfg.itemsize, sample_sizes(spec, meta.num_nodes, layout, budget), (q, c),
        layout == LAYOUTS[0], weight_bytes(meta, cfg, cfg.kind.weights_per_layer),
        scan_bytes(meta.num_edges, q * c),
    )
