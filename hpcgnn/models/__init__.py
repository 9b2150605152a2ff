"""Models: a data layout + an aggregation + the layers of :mod:`hpcgnn.nn`."""
