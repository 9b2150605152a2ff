"""hpcgnn: distributed Graph Neural Network training with MPI.

Layers (each a sub-package):

- ``hpcgnn.comm``      instrumented communication layer and collective error handling
- ``hpcgnn.grid``      process grids (1D, 1.5D, 2D, 3D Cartesian communicators)
- ``hpcgnn.io``        the HDF5 graph format: schema, streaming writer, block reader, validation
- ``hpcgnn.prepare``   converters from real formats and generators into the HDF5 format
- ``hpcgnn.partition`` vertex partitioning and relabelling (block, random, METIS)
- ``hpcgnn.graph``     graph operators (GCN normalisation)
- ``hpcgnn.models``    model definitions and parameter initialisation
- ``hpcgnn.train``     training loops (serial reference, distributed algorithms)
- ``hpcgnn.cli``       the ``hpcgnn`` command
"""

__version__ = "0.1.0"
