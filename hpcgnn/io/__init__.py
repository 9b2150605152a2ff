"""HDF5 graph files: format constants, streaming writer, block reader and validation."""

from hpcgnn.io.edges import EdgeSorter
from hpcgnn.io.reader import GraphFile, GraphMeta
from hpcgnn.io.writer import GraphFileWriter

__all__ = ["EdgeSorter", "GraphFile", "GraphFileWriter", "GraphMeta"]
