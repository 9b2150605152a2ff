"""The instrumented communication layer and collective error handling."""

from hpcgnn.comm.collective import agree, check, collective
from hpcgnn.comm.communicator import Comm, as_array
from hpcgnn.comm.stats import CategoryStats, CommStats

__all__ = ["CategoryStats", "Comm", "CommStats", "agree", "as_array", "check", "collective"]
