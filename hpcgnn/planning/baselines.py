"""DGCL's evaluation baselines, Swap, Replication and DGCL-R, on the stage cost model.

The DGCL paper (section 7, "Baselines and evaluation methodology", and Table 5) compares
its planned exchange (SPST) with peer-to-peer messages and three other schemes:

* **Swap** (after NeuGraph): after each layer every GPU dumps its vertex embeddings to
  host memory, and every GPU loads the remote embeddings it needs from there.
* **Replication** (after Medusa, section 3): every GPU stores the remote vertices it
  needs, so there is no embedding exchange in an epoch; the price is set-up (the
  replicated rows are shipped once) and memory (and, for deeper models, recomputation).
* **DGCL-R**: replication to eliminate inter-machine communication, DGCL (SPST) to plan
  the communication among the GPUs of one machine.

Each is costed with :func:`~hpcgnn.planning.spst.counts_cost`, the model SPST and p2p
are costed with, for the exchange of one GNN layer (``hpcgnn plan``'s relation): bytes
are rank-to-rank transfers (a forwarded row counts at every hop) times the row size.
Pure NumPy: no torch, no MPI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hpcgnn.planning.plan import Plan
from hpcgnn.planning.relation import Relation, relation_from_pairs
from hpcgnn.planning.spst import counts_cost, plan_cost, plan_p2p, plan_spst
from hpcgnn.planning.topology import Topology, parse_topology

#: Bandwidth of each GPU's link to host memory for Swap, per direction (GB/s), when the
#: caller gives none: about what a PCIe 3.0 x16 link attains (the DGX-1 file's PCIe switch).
DEFAULT_HOST_GBPS = 12.0


@dataclass(frozen=True)
class MethodCost:
    """Modelled bytes and time of one exchange method.

    Attributes
    ----------
    method : str
        ``"p2p"``, ``"SPST"``, ``"Swap"``, ``"Replication"`` or ``"DGCL-R"``.
    exchange_bytes : float
        Bytes moved by the exchange of one layer, every epoch (0 for Replication).
    exchange_s : float
        Its modelled time (seconds).
    setup_bytes : float
        Bytes moved once, before training, to replicate rows (0 without replication).
    setup_s : float
        Modelled time of that set-up, as one direct exchange (seconds).
    replicated_rows : int
        Rows that ranks hold beyond their own (memory), summed over ranks.
    stages : int
        Stages of the per-epoch exchange (0: none).
    """

    method: str
    exchange_bytes: float
    exchange_s: float
    setup_bytes: float = 0.0
    setup_s: float = 0.0
    replicated_rows: int = 0
    stages: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (``hpcgnn plan --out``'s ``baselines`` entries)."""
        return {
            "method": self.method, "exchange_bytes": self.exchange_bytes,
            "exchange_s": self.exchange_s, "setup_bytes": self.setup_bytes,
            "setup_s": self.setup_s, "replicated_rows": self.replicated_rows,
            "stages": self.stages,
        }


def transfers(plan: Plan) -> int:
    """Rank-to-rank row transfers of a plan (a forwarded row counts at every hop)."""
    return sum(plan.counts().values())


def plan_method(
    method: str, topo: Topology, plan: Plan, bytes_per_vertex: float
) -> MethodCost:
    """The per-epoch cost of an exchange plan (p2p, SPST) as a :class:`MethodCost`."""
    return MethodCost(
        method, transfers(plan) * bytes_per_vertex,
        plan_cost(topo, plan, bytes_per_vertex).time_s, stages=plan.num_stages,
    )


def split_by_node(topo: Topology, relation: Relation) -> tuple[Relation, Relation]:
    """The relation's pairs within a topology node and across nodes.

    Returns
    -------
    (Relation, Relation)
        ``(intra, inter)``: the ``(u, r)`` pairs whose rank ``r`` is on the node of
        ``s_u``, and the others.
    """
    node = np.asarray(topo.node_of, dtype=np.int64)
    v = relation.pair_vertices()
    r = relation.dest_ranks
    same = node[relation.source[v]] == node[r]
    n = len(relation.source)
    return (relation_from_pairs(relation.offsets, v[same], r[same], n),
            relation_from_pairs(relation.offsets, v[~same], r[~same], n))


def replication(topo: Topology, relation: Relation, bytes_per_vertex: float) -> MethodCost:
    """Replication (DGCL section 3, after Medusa): every rank holds the rows it needs.

    No exchange per epoch. Set-up: every ``(u, r)`` pair's row is shipped once from
    ``s_u`` to ``r`` (the direct plan, costed on ``topo``); memory: one replicated row
    per pair. One layer: a model of ``L`` layers replicates the ``L``-hop neighbourhood.
    """
    setup = plan_p2p(topo, relation)
    pairs = transfers(setup)
    return MethodCost(
        "Replication", 0.0, 0.0, pairs * bytes_per_vertex,
        plan_cost(topo, setup, bytes_per_vertex).time_s, pairs, 0,
    )


def dgcl_r(
    topo: Topology,
    relation: Relation,
    bytes_per_vertex: float,
    *,
    seed: int = 0,
    chunks: int | None = 64,
    max_stages: int | None = None,
) -> MethodCost:
    """DGCL-R (DGCL Table 5): replicate across machines, SPST within a machine.

    A machine is a topology node. Pairs ``(u, r)`` with ``r`` on another node than
    ``s_u`` are replicated (set-up as :func:`replication`); the others are planned with
    :func:`~hpcgnn.planning.spst.plan_spst` on ``topo`` (``seed``, ``chunks``,
    ``max_stages`` as there) and exchanged every epoch.
    """
    intra, inter = split_by_node(topo, relation)
    plan = plan_spst(topo, intra, seed=seed, chunks=chunks, max_stages=max_stages,
                     bytes_per_vertex=bytes_per_vertex)
    rep = replication(topo, inter, bytes_per_vertex)
    per_epoch = plan_method("DGCL-R", topo, plan, bytes_per_vertex)
    return MethodCost(
        "DGCL-R", per_epoch.exchange_bytes, per_epoch.exchange_s, rep.setup_bytes,
        rep.setup_s, rep.replicated_rows, per_epoch.stages,
    )


def host_topology(topo: Topology, host_gbps: float = DEFAULT_HOST_GBPS) -> Topology:
    """``topo``'s ranks around one host memory (Swap's topology).

    Rank ``K`` (``topo.num_ranks``) is the host; rank ``r`` is linked to it at
    ``host_gbps`` per direction (its PCIe link), with ``topo``'s stage latency; there are
    no other links and no endpoint costs.
    """
    k = topo.num_ranks
    return parse_topology({
        "name": f"{topo.name}+host", "ranks": k + 1,
        "links": [{"a": r, "b": k, "bandwidth_gbps": host_gbps, "kind": "host"}
                  for r in range(k)],
        "stage_alpha_us": topo.stage_alpha_s * 1e6,
    }, f"{topo.name}+host")


def swap(
    topo: Topology,
    relation: Relation,
    bytes_per_vertex: float,
    host_gbps: float = DEFAULT_HOST_GBPS,
) -> MethodCost:
    """Swap (DGCL section 7, after NeuGraph): embeddings exchanged through host memory.

    Stage 1: every rank dumps all its rows to the host; stage 2: every rank loads the
    remote rows it needs (``sum_u [r in D_u]``). Costed on :func:`host_topology` (each
    rank's own host link at ``host_gbps``); NeuGraph's chain transfer is not modelled.
    """
    k = topo.num_ranks
    owned = np.diff(relation.offsets)
    needed = relation.pair_counts().sum(axis=0)
    counts = {(1, r, k): int(owned[r]) for r in range(k) if owned[r]}
    counts.update({(2, k, r): int(needed[r]) for r in range(k) if needed[r]})
    cost = counts_cost(host_topology(topo, host_gbps), counts, bytes_per_vertex)
    return MethodCost("Swap", sum(counts.values()) * bytes_per_vertex, cost.time_s,
                      stages=max((s for s, _, _ in counts), default=0))
