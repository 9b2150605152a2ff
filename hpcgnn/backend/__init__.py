"""Devices: where tensors live and the one clock (CPU, or one GPU per rank).

Imports only NumPy, torch and :mod:`hpcgnn.errors` (never ``mpi4py``), so every layer may
use it.
"""

from hpcgnn.backend.device import (
    DEVICE_ENV,
    KINDS,
    Device,
    EventClock,
    Mark,
    cpu,
    cuda_unavailable,
    default_kind,
    get_device,
)

__all__ = [
    "DEVICE_ENV", "KINDS", "Device", "EventClock", "Mark", "cpu", "cuda_unavailable",
    "default_kind", "get_device",
]
