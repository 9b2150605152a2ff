"""Distributed SpMM: CAGNET 1D/1.5D block rows, 2D/3D SUMMA, halo aggregation."""
