"""Converters and generators that write the HDF5 graph format (``hpcgnn prepare``).

- :func:`generate_synthetic` -- seeded SBM (accuracy) and RMAT (scale) graphs
- :func:`convert_planetoid` -- Cora, CiteSeer, PubMed with the standard split
- :func:`convert_ogb` -- OGB node-property datasets from their raw CSV layout
- :func:`convert_edgelist` -- SNAP-style edge lists with optional ``.npy`` arrays
- :func:`convert_pyg` -- a PyG graph saved with ``torch.save`` (read weights-only)
- :func:`convert_benchmark_npz` -- the benchmark ``.npz`` layout (Shchur et al., nettack)

Each streams its input through :class:`~hpcgnn.io.EdgeSorter` and
:class:`~hpcgnn.io.GraphFileWriter` and returns a :class:`PrepareSummary`; the last two
read a graph whole into a :class:`~hpcgnn.io.memory.MemoryGraph` first and write it with
:func:`~hpcgnn.prepare.output.write_memory_graph`.
"""

from hpcgnn.prepare.benchmark_npz import convert_benchmark_npz
from hpcgnn.prepare.edgelist import convert_edgelist
from hpcgnn.prepare.ogb import convert_ogb
from hpcgnn.prepare.planetoid import convert_planetoid
from hpcgnn.prepare.pyg import convert_pyg
from hpcgnn.prepare.summary import PrepareSummary
from hpcgnn.prepare.synthetic import SyntheticSpec
from hpcgnn.prepare.synthetic import generate as generate_synthetic

__all__ = [
    "PrepareSummary",
    "SyntheticSpec",
    "convert_benchmark_npz",
    "convert_edgelist",
    "convert_ogb",
    "convert_planetoid",
    "convert_pyg",
    "generate_synthetic",
]
