"""Local compute kernels: the one place that dispatches CPU vs CUDA.

One module per kernel family; each holds the CPU reference (what the CPU path runs) and
the dispatch to the CUDA kernel of ``cuda/`` with the same contract, chosen by where the
data lives: :mod:`~hpcgnn.kernels.rows` (gather-pack, scatter-add unpack),
:mod:`~hpcgnn.kernels.dropout` (dropout masks), :mod:`~hpcgnn.kernels.sampling` (ITS
rounds), :mod:`~hpcgnn.kernels.csr` (CSR row extraction), plus the local products
:mod:`~hpcgnn.kernels.spmm` and :mod:`~hpcgnn.kernels.gemm`.
:mod:`~hpcgnn.kernels.cuda_modules` loads the sources (CuPy ``RawModule``),
:mod:`~hpcgnn.kernels.prepare` compiles them before a run's first timed phase,
:mod:`~hpcgnn.kernels.host_build` builds the same sources for the host (tests and the
emulated GPU), and :mod:`~hpcgnn.kernels.nvrtc_check` compiles them through CuPy's NVRTC
path without a GPU (``make nvrtc``).
"""
