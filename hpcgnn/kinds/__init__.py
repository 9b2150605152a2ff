"""The layer kinds of ``--model``, one module each, and their registry.

A new kind is one module defining a :class:`LayerKind` and one entry in :data:`KINDS`.
Pure: imports only :mod:`hpcgnn.errors`.
"""

from hpcgnn.errors import ConfigError
from hpcgnn.kinds.base import LayerKind
from hpcgnn.kinds.gat import GAT
from hpcgnn.kinds.gcn import GCN
from hpcgnn.kinds.gin import GIN
from hpcgnn.kinds.sage import SAGE

#: Every layer kind, by name (the ``--model`` choices, in this order).
KINDS: dict[str, LayerKind] = {kind.name: kind for kind in (GCN, SAGE, GIN, GAT)}


def layer_kind(name: str) -> LayerKind:
    """The kind named ``name``.

    Raises
    ------
    ConfigError
        For an unknown name (one line on every rank alike).
    """
    kind = KINDS.get(name)
    if kind is None:
        raise ConfigError(f"--model must be one of {', '.join(KINDS)}, got {name}")
    return kind


__all__ = ["GAT", "GCN", "GIN", "KINDS", "SAGE", "LayerKind", "layer_kind"]
