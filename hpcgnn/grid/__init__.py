"""Process grids: 1D, 1.5D, 2D and 3D Cartesian communicators."""

from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.grid.shapes import KINDS, GridShape, admissible_shapes, choose_shape, parse_grid

__all__ = ["KINDS", "GridShape", "ProcessGrid", "admissible_shapes", "choose_shape", "parse_grid"]
