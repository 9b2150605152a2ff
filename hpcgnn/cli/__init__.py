"""The ``hpcgnn`` command line."""
