"""Matrix-based bulk minibatch sampling (GraphSAGE node-wise, LADIES layer-wise).

Layers, bottom up: :mod:`~hpcgnn.sampling.shuffle` (counter-based random numbers),
:mod:`~hpcgnn.sampling.its` (inverse transform sampling without replacement per row),
:mod:`~hpcgnn.sampling.rows` (rows of the sampling matrix ``S`` by vertex id),
:mod:`~hpcgnn.sampling.matrices` (selection matrices and SpGEMM),
:mod:`~hpcgnn.sampling.sage` and :mod:`~hpcgnn.sampling.ladies` (one hop of a stack of
batches as SpGEMMs), :mod:`~hpcgnn.sampling.bulk` (the hop loop and the replicated /
partitioned layouts), :mod:`~hpcgnn.sampling.spgemm_1p5d` (sparsity-aware 1.5D SpGEMM),
:mod:`~hpcgnn.sampling.fetch` (feature fetching) and
:mod:`~hpcgnn.sampling.sample_file` (the ``hpcgnn sample`` output). See
``docs/sampling.md``.
"""

from hpcgnn.sampling.bulk import BulkSampler, read_train_ids, sample_epoch_serial, sample_stack
from hpcgnn.sampling.rows import SAMPLERS, RowStore, read_pattern
from hpcgnn.sampling.sampled import SampledBatch, SampledHop
from hpcgnn.sampling.spec import LAYOUTS, SamplerSpec, check_training_set, make_spec

__all__ = [
    "LAYOUTS",
    "SAMPLERS",
    "BulkSampler",
    "RowStore",
    "SampledBatch",
    "SampledHop",
    "SamplerSpec",
    "check_training_set",
    "make_spec",
    "read_pattern",
    "read_train_ids",
    "sample_epoch_serial",
    "sample_stack",
]
