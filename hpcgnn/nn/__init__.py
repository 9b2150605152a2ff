"""Neural-network layers with injected parameters: the one GCN layer every model uses.

The Python API on one process: :class:`Graph` (a graph file read whole) and :class:`GCN`
(the layers as a ``torch.nn.Module``), see :mod:`hpcgnn.nn.module`.
"""

from hpcgnn.nn.module import GCN, Graph

__all__ = ["GCN", "Graph"]
