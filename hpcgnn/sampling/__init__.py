"""Matrix-based bulk minibatch sampling (GraphSAGE node-wise, LADIES layer-wise, Cluster-GCN).

Layers, bottom up: :mod:`~hpcgnn.sampling.shuffle` (the epoch's shuffle and batches),
:mod:`~hpcgnn.sampling.its` (inverse transform sampling without replacement per row),
:mod:`~hpcgnn.sampling.rows` (rows of the sampling matrix ``S`` by vertex id),
:mod:`~hpcgnn.sampling.matrices` (selection matrices and SpGEMM),
:mod:`~hpcgnn.sampling.sage` and :mod:`~hpcgnn.sampling.ladies` (one hop of a stack of
batches as SpGEMMs), :mod:`~hpcgnn.sampling.clusters` (Cluster-GCN's clusters and
induced subgraphs), :mod:`~hpcgnn.sampling.bulk` (the hop loop and the replicated /
partitioned layouts), :mod:`~hpcgnn.sampling.spgemm_1p5d` (sparsity-aware 1.5D SpGEMM),
:mod:`~hpcgnn.sampling.fetch` (feature fetching),
:mod:`~hpcgnn.sampling.sample_file` (the ``hpcgnn sample`` output) and
:mod:`~hpcgnn.sampling.epoch_file` (sampling an epoch into that file). See
``docs/sampling.md``.

The package re-exports nothing: importing a torch-free submodule (``rows``, ``spec``:
what the CLI parsers need) must not load torch and MPI through ``bulk``.
"""
