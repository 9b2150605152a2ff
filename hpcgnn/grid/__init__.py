"""Process grids: 1D, 1.5D, 2D and 3D Cartesian communicators (shapes: layout.shapes)."""

from hpcgnn.grid.device import choose_device
from hpcgnn.grid.process_grid import ProcessGrid

__all__ = ["ProcessGrid", "choose_device"]
