"""The modes of a training run (``--mode``), one module each, and their registry.

A mode is a frozen dataclass of its options implementing :class:`~.base.Mode`, made from
Python values (``FullBatchMode(algo="1.5d")``, the ``mode=`` of :func:`hpcgnn.api.train`)
or from the command line's flags (:mod:`hpcgnn.cli.modes`); a new mode is one module and
one entry in :data:`MODES`.
"""

from hpcgnn.training.modes.base import Mode
from hpcgnn.training.modes.fullbatch import FullBatchMode
from hpcgnn.training.modes.gist import GistMode
from hpcgnn.training.modes.minibatch import MinibatchMode
from hpcgnn.training.modes.offload import OffloadMode

#: Every mode, by its ``--mode`` name (the choices, in this order; the first the default).
MODES: dict[str, type[Mode]] = {
    mode.name: mode for mode in (FullBatchMode, MinibatchMode, OffloadMode, GistMode)
}

__all__ = ["MODES", "FullBatchMode", "GistMode", "MinibatchMode", "Mode", "OffloadMode"]
