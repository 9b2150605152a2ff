"""The modes of ``hpcgnn train`` (``--mode``), one module each, and their registry.

A mode is a frozen dataclass of its options implementing :class:`~.base.Mode`; a new
mode is one module and one entry in :data:`MODES`.
"""

import argparse

from hpcgnn.training.modes.base import Mode
from hpcgnn.training.modes.fullbatch import FullBatchMode
from hpcgnn.training.modes.gist import GistMode
from hpcgnn.training.modes.minibatch import MinibatchMode
from hpcgnn.training.modes.offload import OffloadMode

#: Every mode, by its ``--mode`` name (the choices, in this order; the first the default).
MODES: dict[str, type[Mode]] = {
    mode.name: mode for mode in (FullBatchMode, MinibatchMode, OffloadMode, GistMode)
}


def mode_from_args(args: argparse.Namespace, ranks: int) -> Mode:
    """The mode ``args.mode`` names, with its options from ``args`` (a job of ``ranks``)."""
    return MODES[args.mode].from_args(args, ranks)


__all__ = ["MODES", "FullBatchMode", "GistMode", "MinibatchMode", "Mode", "OffloadMode",
           "mode_from_args"]
