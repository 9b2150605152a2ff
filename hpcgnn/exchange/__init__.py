"""Communication planning for the embedding exchange (DGCL): topologies, relation, SPST."""

from hpcgnn.exchange.plan import Plan, check_plan, reverse_tables, split_substages
from hpcgnn.exchange.relation import Relation, relation_from_edges, relation_from_file
from hpcgnn.exchange.spst import (
    Cost,
    counts_cost,
    plan_cost,
    plan_items,
    plan_p2p,
    plan_spst,
    plan_trees,
)
from hpcgnn.exchange.staged import StagedExchange
from hpcgnn.exchange.topology import Topology, load_topology, parse_topology, uniform_topology

__all__ = [
    "Cost",
    "Plan",
    "Relation",
    "StagedExchange",
    "Topology",
    "check_plan",
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
