"""The layers of ``--model``, one module each, and their registry.

A layer is a :class:`Layer` (:mod:`hpcgnn.kinds.base`): its weights, its operator and its
forward on graph primitives. A new built-in layer is one module and one entry in
:data:`KINDS`; a researcher's own is a subclass outside the package. Pure: imports only
:mod:`hpcgnn.errors`.
"""

from hpcgnn.errors import ConfigError
from hpcgnn.kinds.base import (
    ORDERED_MODES,
    PRODUCT_ORDERS,
    Layer,
    Operator,
    Primitives,
    Weight,
    split_bias,
)
from hpcgnn.kinds.gat import GAT, GATLayer
from hpcgnn.kinds.gcn import GCN, GCNLayer
from hpcgnn.kinds.gin import GIN, GINLayer
from hpcgnn.kinds.sage import SAGE, SAGELayer

#: Every built-in layer, by name (the ``--model`` choices, in this order), with its
#: default settings.
KINDS: dict[str, Layer] = {kind.name: kind for kind in (GCN, SAGE, GIN, GAT)}


def layer_kind(name: str) -> Layer:
    """The built-in layer named ``name``.

    Raises
    ------
    ConfigError
        For an unknown name (one line on every rank alike).
    """
    kind = KINDS.get(name)
    if kind is None:
        raise ConfigError(f"--model must be one of {', '.join(KINDS)}, got {name}")
    return kind


def named(layer: Layer, spec: str | None = None) -> Layer:
    """``layer`` with its ``--model`` name: ``spec``, else ``MODULE:CLASS`` of its class.

    A built-in keeps its name; a researcher's own layer is named after where it lives (the
    metrics' ``config.model``, what a checkpoint must match).
    """
    if layer.name and layer.name in KINDS and type(layer) is type(KINDS[layer.name]):
        return layer  # a built-in
    cls = type(layer)
    return layer.replace(name=spec or f"{cls.__module__}:{cls.__qualname__}")


__all__ = [
    "GAT", "GCN", "GIN", "KINDS", "ORDERED_MODES", "PRODUCT_ORDERS", "SAGE", "GATLayer",
    "GCNLayer", "GINLayer", "Layer", "Operator", "Primitives", "SAGELayer", "Weight",
    "layer_kind", "named", "split_bias",
]
