"""Plan a graph's embedding exchange with SPST and compare it with direct p2p.

The library side of ``hpcgnn plan``: read the graph's communication relation for a row
block split, plan it on a topology with DGCL's SPST and with direct point-to-point
messages, and model both with the same cost model. Pure NumPy (no torch, no MPI): a
comparison for a large topology can be computed on a laptop.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpcgnn.errors import ConfigError
from hpcgnn.io.reader import GraphFile
from hpcgnn.layout.blocks import even_offsets
from hpcgnn.planning.baselines import (
    DEFAULT_HOST_GBPS,
    MethodCost,
    dgcl_r,
    plan_method,
    replication,
    swap,
)
from hpcgnn.planning.methods import method_vertices, pair_method
from hpcgnn.planning.plan import Plan
from hpcgnn.planning.relation import Relation, relation_from_file
from hpcgnn.planning.spst import Cost, plan_cost, plan_p2p, plan_spst
from hpcgnn.planning.topology import Topology, load_topology

FILE_PARTITION = "file partition"
EVEN_BLOCKS = "even blocks"


def cost_summary(topo: Topology, cost: Cost, plan: Plan) -> dict[str, Any]:
    """JSON-ready summary of one plan's modelled cost.

    Parameters
    ----------
    topo : Topology
        The topology the plan was made and costed on.
    cost : Cost
        ``plan_cost(topo, plan, bytes_per_vertex)``.
    plan : Plan
        The plan.

    Returns
    -------
    dict
        ``time_s``, ``num_stages``, ``vertex_transfers``, ``stages`` (per stage: ``stage``
        (1-based), ``time_s``, the busy ``links`` with their ``vertices`` and ``time_s``,
        and ``shared_vertices`` per shared resource), ``tables`` (``stage``, ``src``,
        ``dst``, ``count`` and the pair's ``method`` of every send table,
        :func:`~hpcgnn.planning.methods.pair_method`) and ``method_vertices`` (the
        vertices each method carries, :func:`~hpcgnn.planning.methods.method_vertices`).
    """
    stages = []
    for k in range(len(cost.stage_times)):
        links = [
            {
                "src": topo.links[li].src,
                "dst": topo.links[li].dst,
                "kind": topo.links[li].kind,
                "vertices": int(cost.link_counts[k, li]),
                "time_s": float(cost.link_times[k, li]),
            }
            for li in range(len(topo.links))
            if cost.link_counts[k, li]
        ]
        shared = {
            topo.resource_names[r]: int(cost.resource_counts[k, r])
            for r in range(len(topo.links), len(topo.resource_names))
            if cost.resource_counts[k, r]
        }
        stages.append(
            {"stage": k + 1, "time_s": float(cost.stage_times[k]), "links": links,
             "shared_vertices": shared}
        )
    return {
        "time_s": cost.time_s,
        "num_stages": plan.num_stages,
        "vertex_transfers": int(cost.link_counts.sum()),
        "stages": stages,
        "tables": [
            {"stage": k, "src": s, "dst": d, "count": c, "method": pair_method(topo, s, d)}
            for (k, s, d), c in plan.counts().items()
        ],
        "method_vertices": method_vertices(topo, plan.counts()),
    }


@dataclass(frozen=True)
class PlanComparison:
    """The SPST plan and the direct p2p exchange of one graph split, with their costs.

    Attributes
    ----------
    graph : str
        The graph file, as given.
    name : str
        The graph's name (its file name when the file has none).
    num_nodes : int
        Vertices of the graph.
    topology : Topology
        The topology planned on (``topology.num_ranks == parts``).
    split : str
        ``"file partition"`` (the file's partition has exactly ``parts`` parts) or
        ``"even blocks"``.
    offsets : numpy.ndarray
        Row block offsets of the split (``parts + 1`` entries).
    feature_dim : int
        Embedding width (float32).
    seed, chunks : int
        Planner seed and chunks per group (0: every vertex alone), as given.
    relation : Relation
        Source rank and destination set of every vertex.
    p2p, spst : Plan
        The direct and the planned exchange.
    p2p_cost, spst_cost : Cost
        Their modelled costs at ``bytes_per_vertex``.
    relation_time_s, planning_time_s : float
        Seconds spent reading the relation and planning SPST.
    max_stages : int or None
        Deepest stage the planner was allowed, as given (``None``: ``parts - 1``).
    """

    graph: str
    name: str
    num_nodes: int
    topology: Topology
    split: str
    offsets: np.ndarray
    feature_dim: int
    seed: int
    chunks: int
    relation: Relation
    p2p: Plan
    spst: Plan
    p2p_cost: Cost
    spst_cost: Cost
    relation_time_s: float
    planning_time_s: float
    max_stages: int | None = None

    @property
    def parts(self) -> int:
        """Number of parts (= topology ranks)."""
        return self.relation.parts

    @property
    def bytes_per_vertex(self) -> int:
        """Bytes of one embedding (float32)."""
        return 4 * self.feature_dim

    @property
    def reduction(self) -> float:
        """Relative modelled time saved by the plan over p2p (0 when p2p costs nothing)."""
        p2p = self.p2p_cost.time_s
        return 1.0 - self.spst_cost.time_s / p2p if p2p > 0 else 0.0

    @property
    def boundary_vertices(self) -> int:
        """Vertices needed by at least one rank other than their owner."""
        return int((self.relation.num_dests != 0).sum())

    @property
    def pairs(self) -> int:
        """Number of (vertex, destination rank) pairs to deliver."""
        return int(self.relation.pair_counts().sum())

    def as_dict(self) -> dict[str, Any]:
        """The JSON document of ``hpcgnn plan --out`` (without ``tables_file``)."""
        return {
            "graph": self.graph,
            "topology": self.topology.name,
            "parts": self.parts,
            "split": self.split,
            "offsets": self.offsets.tolist(),
            "feature_dim": self.feature_dim,
            "bytes_per_vertex": self.bytes_per_vertex,
            "seed": self.seed,
            "chunks": self.chunks,
            "relation_pairs": self.relation.pair_counts().tolist(),
            "p2p": cost_summary(self.topology, self.p2p_cost, self.p2p),
            "planned": cost_summary(self.topology, self.spst_cost, self.spst),
            "reduction": self.reduction,
            "relation_time_s": self.relation_time_s,
            "planning_time_s": self.planning_time_s,
        }

    def baselines(self, host_gbps: float = DEFAULT_HOST_GBPS) -> list[MethodCost]:
        """p2p, SPST and DGCL's baselines Swap, Replication and DGCL-R on this split.

        Costed on :attr:`topology` at :attr:`bytes_per_vertex` (Swap on the topology's
        ranks around one host memory, ``host_gbps`` per rank; DGCL-R planned with this
        comparison's seed and chunks). See :mod:`hpcgnn.planning.baselines`.
        """
        topo, rel, bpv = self.topology, self.relation, self.bytes_per_vertex
        return [
            plan_method("p2p", topo, self.p2p, bpv),
            plan_method("SPST", topo, self.spst, bpv),
            swap(topo, rel, bpv, host_gbps),
            replication(topo, rel, bpv),
            dgcl_r(topo, rel, bpv, seed=self.seed, chunks=self.chunks or None,
                   max_stages=self.max_stages),
        ]

    def write_tables(self, path: str | os.PathLike) -> None:
        """Write the SPST send/recv id tables to a compressed ``.npz``.

        One array per table, named ``s<stage>_<src>_<dst>``.
        """
        tables = {f"s{k}_{s}_{d}": ids for (k, s, d), ids in self.spst.tables().items()}
        # numpy's stubs: a ``**`` of arrays might name ``allow_pickle``
        np.savez_compressed(path, **tables)  # type: ignore[arg-type]


def compare_plans(
    graph: str | os.PathLike,
    topology: Topology | str | os.PathLike,
    parts: int,
    *,
    feature_dim: int = 128,
    seed: int = 0,
    chunks: int = 64,
    max_stages: int | None = None,
) -> PlanComparison:
    """Plan the embedding exchange of ``graph`` split into ``parts`` row blocks.

    The split is the file's partition when it has exactly ``parts`` parts, else an even
    block split.

    Parameters
    ----------
    graph : str or os.PathLike
        Graph file written by ``hpcgnn prepare`` / ``hpcgnn partition``.
    topology : Topology, str or os.PathLike
        The topology, or its JSON file (see ``docs/planning.md``).
    parts : int
        Number of parts; must equal the topology's number of ranks.
    feature_dim : int, optional
        Embedding width (float32); with latency in the topology it weighs bandwidth
        against latency, so the plan depends on it.
    seed : int, optional
        Seed of the planner's vertex order.
    chunks : int, optional
        Chunks per (source, destinations) group; 0 plans every vertex alone.
    max_stages : int, optional
        Deepest stage (default: number of ranks - 1).

    Returns
    -------
    PlanComparison

    Raises
    ------
    ConfigError
        On a bad argument or ``parts`` not matching the topology.
    InputError
        On a bad topology or graph file.
    """
    if parts < 1:
        raise ConfigError(f"--parts must be >= 1, got {parts}")
    if feature_dim < 1:
        raise ConfigError(f"--feature-dim must be >= 1, got {feature_dim}")
    if chunks < 0:
        raise ConfigError(f"--chunks must be >= 0, got {chunks}")
    topo = topology if isinstance(topology, Topology) else load_topology(topology, parts)
    if topo.num_ranks != parts:
        raise ConfigError(
            f"--parts {parts} does not match topology '{topo.name}' with "
            f"{topo.num_ranks} ranks"
        )
    t0 = time.perf_counter()
    with GraphFile(graph) as gf:
        meta = gf.meta
        po = meta.partition_offsets
        if po is not None and len(po) - 1 == parts:
            offsets, split = np.asarray(po, dtype=np.int64), FILE_PARTITION
        else:
            offsets, split = even_offsets(meta.num_nodes, parts), EVEN_BLOCKS
        rel = relation_from_file(gf, offsets)
    t_rel = time.perf_counter() - t0
    bpv = 4 * feature_dim
    p2p = plan_p2p(topo, rel)
    t0 = time.perf_counter()
    spst = plan_spst(
        topo, rel, seed=seed, chunks=chunks or None, max_stages=max_stages,
        bytes_per_vertex=bpv,
    )
    t_plan = time.perf_counter() - t0
    return PlanComparison(
        graph=str(graph),
        name=meta.name or str(graph),
        num_nodes=meta.num_nodes,
        topology=topo,
        split=split,
        offsets=offsets,
        feature_dim=feature_dim,
        seed=seed,
        chunks=chunks,
        relation=rel,
        p2p=p2p,
        spst=spst,
        p2p_cost=plan_cost(topo, p2p, bpv),
        spst_cost=plan_cost(topo, spst, bpv),
        relation_time_s=t_rel,
        planning_time_s=t_plan,
        max_stages=max_stages,
    )

