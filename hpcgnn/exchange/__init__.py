"""Runtime neighbour exchange over MPI: halo all-to-allv, staged SPST plans, HongTu offload.

The plans and sets these executors run are computed in :mod:`hpcgnn.planning` (pure);
HongTu's reorganisation is sharded over the ranks here (:mod:`~hpcgnn.exchange.reorganize`).
"""

from hpcgnn.exchange.halo import HaloExchange, HaloSets, halo_sets
from hpcgnn.exchange.offload import OffloadExchange
from hpcgnn.exchange.staged import StagedExchange

__all__ = ["HaloExchange", "HaloSets", "OffloadExchange", "StagedExchange", "halo_sets"]
