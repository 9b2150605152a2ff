"""hpcgnn: distributed Graph Neural Network training with MPI.

Packages, top down (imports go one way; see ``docs/architecture.md``):

- ``hpcgnn.cli``       the ``hpcgnn`` command (argparse and printing)
- ``hpcgnn.training``  the one epoch loop, trainers, run orchestration, report, checkpoints
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

``hpcgnn.train(graph, mode=..., ...)`` trains from Python, its settings typed objects, and
returns the trained model and its metrics (:func:`hpcgnn.api.train`, where the mode classes
are too; the training package itself is ``hpcgnn.training``).
``import hpcgnn`` loads neither torch nor mpi4py; the call does.
"""

import typing as _typing
from typing import Any as _Any

__version__ = "0.1.0"

if _typing.TYPE_CHECKING:  # the typed signature, for checkers
    from hpcgnn.api import train
else:

    def train(graph: _Any, /, **settings: _Any) -> _Any:
        """Train on ``graph``: :func:`hpcgnn.api.train`, imported on the first call.

        ``import hpcgnn`` stays light (no torch, no mpi4py); the call imports both. Typed
        code may import :func:`hpcgnn.api.train` itself.
        """
        from hpcgnn.api import train as typed_train

        return typed_train(graph, **settings)
