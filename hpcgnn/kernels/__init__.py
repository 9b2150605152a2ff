"""Local compute kernels: the one place that dispatches CPU vs CUDA.

CPU now (torch); the CUDA kernels of ``cuda/`` (CuPy ``RawModule``) slot in here.
"""
