"""Communication planning for the embedding exchange (DGCL): topologies, relation, SPST."""

from hpcgnn.exchange.plan import Plan, check_plan, reverse_tables, split_substages
from hpcgnn.exchange.relation import Relation, relation_from_edges, relation_from_file
from hpcgnn.exchange.spst import Cost, plan_cost, plan_p2p, plan_spst
from hpcgnn.exchange.topology import Topology, load_topology, parse_topology

__all__ = [
    "Cost",
    "Plan",
    "Relation",
    "Topology",
    "check_plan",
    "load_topology",
    "parse_topology",
    "plan_cost",
    "plan_p2p",
    "plan_spst",
    "relation_from_edges",
    "relation_from_file",
    "reverse_tables",
    "split_substages",
]
