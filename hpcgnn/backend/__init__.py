"""Devices: where tensors live and the one clock (CPU now; CUDA slots in here).

Imports only NumPy, torch and :mod:`hpcgnn.errors` (never ``mpi4py``), so every layer may
use it.
"""

from hpcgnn.backend.device import KINDS, Device, cpu, get_device

__all__ = ["KINDS", "Device", "cpu", "get_device"]
