"""The process grid: Cartesian communicator, its row/column/fiber sub-communicators, device."""

from __future__ import annotations

from typing import cast

from mpi4py import MPI

from hpcgnn.backend import Device, get_device
from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.stats import CommStats
from hpcgnn.comm.wire import Wire
from hpcgnn.layout.shapes import GridShape, choose_shape


class ProcessGrid:
    """An immutable process grid, created once and passed explicitly.

    Parameters
    ----------
    comm
        The ranks of the grid (duplicated, not freed by the grid).
    shape
        Kind and dimensions; ``shape.size`` must equal ``comm``'s size.
    stats
        Counters to share; if omitted, a new :class:`CommStats` timed with the device's
        clock.
    device
        This rank's device (default: CPU, see :func:`hpcgnn.backend.get_device`; a run
        chooses it with :func:`hpcgnn.grid.device.choose_device`).

    Attributes
    ----------
    shape : GridShape
        Kind and dimensions.
    world : Comm
        All ranks of the grid (a private duplicate of the communicator given).
    cart : Comm
        The Cartesian communicator (rank order is row-major over ``shape.dims``).
    coords : tuple[int, ...]
        This rank's coordinates.
    row, col : Comm
        For 1.5D and 2D grids (``dims = (R, C)``): ``row`` holds the ranks with the same
        row coordinate (size C), ``col`` the ranks with the same column coordinate (size
        R). For 3D grids (``(Pr, Pc, Pl)``) the same, within this rank's layer.
    fiber : Comm or None
        3D only: the ranks with the same (row, column), one per layer (size Pl).
    layer : Comm or None
        3D only: the 2D grid of this rank's layer (size Pr * Pc).
    stats : CommStats
        Counters shared by all communicators of the grid.
    device : Device
        Where this rank's tensors live; every communicator of the grid carries it
        (``grid.row.device is grid.device``).
    wire : Wire
        How buffers reach MPI (direct, CUDA-aware or staged), shared by every communicator
        of the grid with its staging buffers (:meth:`Wire.detect`, once per grid).

    Notes
    -----
    A 1D grid is laid out as ``P x 1``: ``col`` is ``cart`` (all ranks) and ``row`` is a
    size-1 communicator, so code written for 1.5D runs unchanged with ``c = 1``.
    """

    def __init__(
        self,
        comm: MPI.Comm,
        shape: GridShape,
        stats: CommStats | None = None,
        device: Device | None = None,
    ) -> None:
        if comm.Get_size() != shape.size:
            raise ValueError(
                f"grid {shape} needs {shape.size} ranks, communicator has {comm.Get_size()}"
            )
        self.shape = shape
        self.device = get_device(device)
        self.wire = Wire.detect(self.device)
        self.stats = stats if stats is not None else CommStats(
            clock=self.device.clock, mark=self.device.mark
        )
        self._owned: list[Comm] = []
        world = cast(MPI.Intracomm, comm.Dup())  # a grid is built on an intracommunicator
        self.world = self._own(world, "world")
        cart = world.Create_cart(
            list(shape.dims), periods=[False] * len(shape.dims), reorder=False
        )
        self.cart = self._own(cart, "cart")
        self.coords = tuple(int(c) for c in cart.Get_coords(cart.Get_rank()))
        self.fiber: Comm | None = None
        self.layer: Comm | None = None
        nd = len(shape.dims)
        if nd == 1:
            # A 1D grid is the P x 1 case of 1.5D: one process column holding every rank.
            self.col = self.cart
            self.row = self._own(cart.Split(cart.Get_rank(), 0), "row")
        elif nd == 2:
            self.row = self._own(cart.Sub([False, True]), "row")
            self.col = self._own(cart.Sub([True, False]), "col")
        else:
            self.row = self._own(cart.Sub([False, True, False]), "row")
            self.col = self._own(cart.Sub([True, False, False]), "col")
            self.fiber = self._own(cart.Sub([False, False, True]), "fiber")
            self.layer = self._own(cart.Sub([True, True, False]), "layer")

    @classmethod
    def create(
        cls,
        comm: MPI.Comm,
        kind: str,
        grid: str | tuple[int, ...] | None = None,
        replication: int | None = None,
        stats: CommStats | None = None,
        device: Device | None = None,
    ) -> ProcessGrid:
        """Choose (or validate) a shape for ``comm``'s size and build the grid.

        Every rank computes the same shape from the same arguments, so a bad shape raises
        the same :class:`~hpcgnn.errors.GridError` on every rank without communication.
        """
        shape = choose_shape(kind, comm.Get_size(), grid, replication)
        return cls(comm, shape, stats, device)

    def _own(self, mpi_comm: MPI.Comm, name: str) -> Comm:
        c = Comm(mpi_comm, self.stats, name, owned=True, device=self.device, wire=self.wire)
        self._owned.append(c)
        return c

    @property
    def rank(self) -> int:
        """Rank in ``world``."""
        return self.world.rank

    @property
    def size(self) -> int:
        """Number of ranks."""
        return self.world.size

    @property
    def kind(self) -> str:
        """``"1d"``, ``"1.5d"``, ``"2d"`` or ``"3d"``."""
        return self.shape.kind

    @property
    def dims(self) -> tuple[int, ...]:
        """Size of each grid dimension."""
        return self.shape.dims

    def free(self) -> None:
        """Free every communicator the grid created."""
        for c in reversed(self._owned):
            c.free()
        self._owned.clear()

    def __enter__(self) -> ProcessGrid:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __repr__(self) -> str:
        return f"ProcessGrid({self.kind} {self.shape}, rank {self.rank} at {self.coords})"
