"""HongTu's reorganisation over MPI: vertex-range shards of the membership, summed scores.

The MPI driver of :func:`hpcgnn.planning.reorganization.reorganize_sharded` (the pure
per-rank steps and their memory and message counts are described there).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hpcgnn.comm.collective import collective
from hpcgnn.comm.communicator import Comm
from hpcgnn.exchange.halo import request_rows
from hpcgnn.exchange.offload import SETUP
from hpcgnn.planning.reorganization import (
    MembershipShard,
    Reorganization,
    membership_keys,
    reorganize_sharded,
)


def reorganize_distributed(
    comm: Comm, sets: Sequence[np.ndarray], offsets: np.ndarray, category: str = SETUP,
    gbps: dict[str, float] | None = None, dedup: str = "full",
) -> tuple[np.ndarray, Reorganization]:
    """HongTu Algorithm 4 of every rank's chunk sets, no rank holding more than its shard.

    Rank ``i`` passes its part's chunk neighbour sets ``sets[k] = N_ik`` (sorted global
    ids, the same number ``n`` of chunks on every rank). Each rank sends the membership
    keys of its sets (``v n + k`` for ``v`` in ``N_ik``) to the owner of ``v`` under
    ``offsets`` (one all-to-allv), so rank ``r`` keeps the membership lists of the
    vertices ``[offsets[r], offsets[r+1])`` only: ``O(V_ori / P)`` memory for balanced
    ranges, never another rank's sets or anything of size ``|V|``. The greedy's overlap
    scores are then summed with one all-reduce of ``8 n^2`` bytes per part after the first
    and one of ``16 n^2 + 8`` bytes at the end, and every rank takes the same choices.

    Returns, on every rank, the same ``(schedule, reorganization)`` as the serial
    :func:`~hpcgnn.planning.reorganization.choose_schedule` of all ranks' sets (kept when
    it does not raise ``C`` at ``dedup`` and the tier bandwidths ``gbps``).
    Collective. Traffic: ``category`` (8 bytes per key received from another rank, and
    the all-reduces), plus the key counts in ``control``.
    """
    n = len(sets)
    lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
    with collective(comm):
        keys = membership_keys(sets)
    _, got, counts = request_rows(comm, keys, np.asarray(offsets, dtype=np.int64) * n, category)
    del keys
    with collective(comm):
        shard = MembershipShard.from_keys(got, counts, n, lo, hi - lo)
    del got
    return reorganize_sharded(shard, lambda scores: comm.allreduce(scores, category), gbps,
                              dedup)
