"""Communication planning, pure NumPy (no torch, no MPI): DGCL SPST and HongTu dedup sets.

Topologies (:mod:`~hpcgnn.planning.topology`), the communication relation
(:mod:`~hpcgnn.planning.relation`), staged send/recv tables
(:mod:`~hpcgnn.planning.plan`), the SPST planner (:mod:`~hpcgnn.planning.spst`),
HongTu's chunk sets and volumes (:mod:`~hpcgnn.planning.dedup`) and reorganisation
(:mod:`~hpcgnn.planning.reorganization`), DGCL's baselines Swap, Replication and DGCL-R
(:mod:`~hpcgnn.planning.baselines`), and the SPST vs p2p comparison of a graph file
behind ``hpcgnn plan`` (:mod:`~hpcgnn.planning.compare`).
"""

from hpcgnn.planning.compare import PlanComparison, compare_plans, cost_summary
from hpcgnn.planning.plan import Plan, check_plan, reverse_tables, split_substages
from hpcgnn.planning.relation import Relation, relation_from_edges, relation_from_file
from hpcgnn.planning.spst import (
    Cost,
    counts_cost,
    plan_cost,
    plan_items,
    plan_p2p,
    plan_spst,
    plan_trees,
)
from hpcgnn.planning.topology import Topology, load_topology, parse_topology, uniform_topology

__all__ = [
    "Cost",
    "Plan",
    "PlanComparison",
    "Relation",
    "Topology",
    "check_plan",
    "compare_plans",
    "cost_summary",
    "counts_cost",
    "load_topology",
    "parse_topology",
    "plan_cost",
    "plan_items",
    "plan_p2p",
    "plan_spst",
    "plan_trees",
    "relation_from_edges",
    "relation_from_file",
    "reverse_tables",
    "split_substages",
    "uniform_topology",
]
