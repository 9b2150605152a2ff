"""Names of the full-batch algorithms (kept free of heavy imports for the command line)."""

#: Distributed SpMM algorithms of ``hpcgnn train --mode fullbatch``.
ALGORITHMS = ("1d", "1.5d", "2d", "3d", "halo")

#: The process-grid kind each algorithm (and ``--mode offload``) runs on.
GRID_KIND = {"1d": "1d", "1.5d": "1.5d", "2d": "2d", "3d": "3d", "halo": "1d", "offload": "1d"}
