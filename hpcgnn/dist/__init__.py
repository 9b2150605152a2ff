"""Distributed matrices and the distributed SpMM algorithms (1D, 1.5D, 2D, 3D)."""
