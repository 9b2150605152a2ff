"""Local compute kernels (CPU now; the CUDA kernels of ``cuda/`` slot in here)."""
