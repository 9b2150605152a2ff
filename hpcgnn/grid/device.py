"""The device of each rank of a run: same kind everywhere, GPU by node-local rank."""

from __future__ import annotations

from collections.abc import Callable

from mpi4py import MPI

from hpcgnn.backend import Device, cpu, default_kind, get_device
from hpcgnn.comm.collective import check, collective
from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.node import node_rank
from hpcgnn.comm.wire import Wire, cuda_aware_setting
from hpcgnn.errors import ConfigError


def choose_device(
    comm: MPI.Comm, kind: str | None = None, prepare: Callable[[Device], None] | None = None,
) -> Device:
    """This rank's device for a run on ``comm`` (collective).

    Parameters
    ----------
    comm
        The run's ranks.
    kind
        ``"cpu"``, ``"cuda"``, or ``None`` for :func:`hpcgnn.backend.default_kind`
        (``$HPCGNN_DEVICE``, else cuda where a GPU and CuPy are visible, else cpu).
    prepare
        Run on the chosen device inside the collective check, e.g.
        :func:`hpcgnn.kernels.prepare.prepare_kernels` (compile the kernels before the
        first timed phase; a rank that cannot is an error on every rank).

    Returns
    -------
    Device
        cuda: GPU ``node-local rank % visible GPUs`` (``MPI.COMM_TYPE_SHARED`` split;
        ``CUDA_VISIBLE_DEVICES`` honoured), so several ranks may share one GPU.

    Raises
    ------
    ConfigError
        On every rank, with the lowest failing rank's line, if any rank cannot have the
        device (no GPU visible, no CuPy, a bad ``$HPCGNN_DEVICE`` or
        ``$HPCGNN_CUDA_AWARE_MPI``), or if the ranks resolved different kinds.
    """
    world = Comm(comm.Dup(), name="device", owned=True, wire=Wire(cpu()))  # host buffers only
    try:
        local, _ = node_rank(comm)
        device = None
        with collective(world):
            cuda_aware_setting()  # a bad value is one line on every rank, before any grid
            device = get_device(kind or default_kind(), local_rank=local)
            if prepare is not None:
                prepare(device)
        kinds = world.allgather_obj(device.kind)
        check(
            world, len(set(kinds)) == 1,
            "--device: the ranks found different devices ("
            + ", ".join(f"{k} on {kinds.count(k)} ranks" for k in sorted(set(kinds)))
            + "); pass --device cpu or --device cuda",
            ConfigError,
        )
        return device
    finally:
        world.free()
