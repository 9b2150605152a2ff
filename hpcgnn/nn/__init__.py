"""Neural-network layers with injected parameters, and the layer interface.

:class:`Layer` (:mod:`hpcgnn.kinds.base`) is what every mode runs: subclass it to write a
layer of your own on the graph primitives (:class:`Primitives`; ``docs/layers.md``); that
needs no torch. The Python API on one process: :class:`Graph` (a graph file read whole)
and :class:`GCN` (the layers as a ``torch.nn.Module``), see :mod:`hpcgnn.nn.module`,
loaded when first named.
"""

from typing import TYPE_CHECKING, Any

from hpcgnn.kinds.base import Layer, Operator, Primitives, Weight

if TYPE_CHECKING:
    from hpcgnn.nn.module import GCN, Graph

__all__ = ["GCN", "Graph", "Layer", "Operator", "Primitives", "Weight"]


def __getattr__(name: str) -> Any:
    """``GCN`` and ``Graph`` from :mod:`hpcgnn.nn.module` (which loads torch) when named."""
    if name in ("GCN", "Graph"):
        from hpcgnn.nn import module

        return getattr(module, name)
    raise AttributeError(f"module 'hpcgnn.nn' has no attribute {name!r}")
