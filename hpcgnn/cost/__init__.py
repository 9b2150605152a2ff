"""Cost models of every algorithm, pure NumPy (no torch, no MPI): bytes per category per epoch."""
