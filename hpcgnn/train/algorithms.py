"""Names of the full-batch algorithms (kept free of heavy imports for the command line)."""

#: Distributed SpMM algorithms of ``hpcgnn train --mode fullbatch``.
ALGORITHMS = ("1d", "1.5d", "2d", "3d")
