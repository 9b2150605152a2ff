"""hpcgnn: distributed Graph Neural Network training with MPI.

Packages, top down (imports go one way; see ``docs/architecture.md``):

- ``hpcgnn.cli``       the ``hpcgnn`` command (argparse and printing)
- ``hpcgnn.train``     the one epoch loop, trainers, run orchestration, report, checkpoints
- ``hpcgnn.models``    models: data layout + aggregation + layers (serial, 1D/1.5D, 2D/3D,
  halo, offload, minibatch)
- ``hpcgnn.spmm``      distributed SpMM (CAGNET block rows, SUMMA / Split-3D, halo)
- ``hpcgnn.exchange``  runtime neighbour exchange (halo, staged SPST plans, HongTu loads)
- ``hpcgnn.sampling``  bulk matrix-based sampling and the sparsity-aware 1.5D SpGEMM
- ``hpcgnn.nn``        layers with injected parameters
- ``hpcgnn.cost``      cost models (pure)
- ``hpcgnn.planning``  DGCL planning and HongTu dedup sets (pure)
- ``hpcgnn.graph``, ``hpcgnn.kernels``, ``hpcgnn.io``, ``hpcgnn.prepare``,
  ``hpcgnn.partition``  graph operators, local compute, the HDF5 format, converters,
  partitioning
- ``hpcgnn.layout``    block layouts and wire formats (pure)
- ``hpcgnn.grid``, ``hpcgnn.comm``, ``hpcgnn.backend``  process grids, the counted
  communication layer, the device
- ``hpcgnn.config``, ``hpcgnn.rng``, ``hpcgnn.errors``  settings, randomness, errors

``hpcgnn.train(graph, **settings)`` runs ``hpcgnn train`` from Python and returns the trained
model and its metrics (:func:`hpcgnn.api.train`): the package ``hpcgnn.train`` is callable.
``import hpcgnn`` loads neither torch nor mpi4py; the call does.
"""

import importlib as _importlib
import types as _types
from typing import Any as _Any

__version__ = "0.1.0"


class _TrainPackage(_types.ModuleType):
    """The package ``hpcgnn.train``, which called is :func:`hpcgnn.api.train`.

    ``hpcgnn.train`` names the training package (``hpcgnn.train.run``, ...), so the function
    of the same name is the package's ``__call__`` (a module's class may be set to a
    subclass of ``ModuleType``): ``hpcgnn.train(...)`` and ``from hpcgnn import train``
    train, and every submodule is reached as before. Typed code may import
    ``hpcgnn.api.train`` instead.
    """

    def __call__(self, graph: _Any, **settings: _Any) -> _Any:
        """Train on ``graph`` (:func:`hpcgnn.api.train`; imports torch and mpi4py)."""
        from hpcgnn.api import train

        return train(graph, **settings)


# light: the package's __init__ imports nothing
_importlib.import_module("hpcgnn.train").__class__ = _TrainPackage
