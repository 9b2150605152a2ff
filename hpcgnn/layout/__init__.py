"""Data layouts, pure NumPy (no torch, no MPI): block offsets, SUMMA blocks, wire formats."""
