"""PyG's ``NeighborSampler`` with its sampling kernel written in plain torch.

PyG's :class:`~torch_geometric.loader.NeighborLoader` samples with
``torch.ops.pyg.neighbor_sample`` (pyg-lib) or ``torch.ops.torch_sparse.neighbor_sample``
and raises ``ImportError`` when neither is installed (the case with torch 2.13: no pyg-lib
wheel, and torch-sparse does not build against it). :class:`TorchNeighborSampler` keeps
everything of PyG's sampler and loader (CSC conversion and edge permutation, batching,
shuffling, ``filter_data``, ``batch.n_id``, ``batch.batch_size``, ``batch.e_id``) and
replaces only that kernel, with the same semantics as the homogeneous, directional,
without-replacement case:

- hop ``i`` visits the vertices first reached in hop ``i - 1`` (the seeds in hop 0), in
  order, and draws ``num_neighbors[i]`` of each one's in-edges (CSC column) uniformly
  without replacement, or all of them when it has that many or fewer (``-1``: all);
- a source vertex not seen yet gets the next local id (first reached, first numbered), so
  the seeds are local ids ``0 .. batch_size - 1`` and ``node`` lists the subgraph's vertices;
- every drawn edge is kept as ``(row, col) = (local source, local target)`` with its CSC
  position in ``edge`` (PyG maps it to ``e_id`` through the sampler's permutation);
  ``num_sampled_nodes`` / ``num_sampled_edges`` per hop as pyg-lib returns them.

Use it as ``NeighborLoader(data, num_neighbors, ..., neighbor_sampler=TorchNeighborSampler(
data, num_neighbors))``. Random draws come from torch's default generator, so
``torch.manual_seed`` fixes the loader's shuffle and the samples together.
"""

from __future__ import annotations

import warnings

import torch
from torch_geometric.data import Data
from torch_geometric.sampler import NeighborSampler, SamplerOutput
from torch_geometric.sampler.base import SubgraphType


def sample_hop(
    colptr: torch.Tensor, row: torch.Tensor, targets: torch.Tensor, fanout: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw up to ``fanout`` in-edges of each target uniformly without replacement.

    Parameters
    ----------
    colptr, row
        The graph in CSC form (in-edges of ``v`` are ``row[colptr[v]:colptr[v+1]]``).
    targets
        Global ids of the vertices whose in-neighbours are drawn.
    fanout
        Edges per target; a target with at most ``fanout`` in-edges (or ``fanout < 0``)
        keeps them all.

    Returns
    -------
    position, edge
        For every drawn edge, the index of its target in ``targets`` (ascending) and its
        CSC position.
    """
    start = colptr[targets]
    deg = colptr[targets + 1] - start
    total = int(deg.sum())
    if total == 0:
        empty = torch.zeros(0, dtype=torch.long)
        return empty, empty
    seg = torch.repeat_interleave(torch.arange(len(targets)), deg)
    first = torch.cumsum(deg, 0) - deg
    if fanout < 0 or int(deg.max()) <= fanout:
        return seg, start[seg] + torch.arange(total) - first[seg]
    # A random order inside each target's segment (the segment index keeps them apart);
    # the first min(deg, fanout) of each segment are a uniform draw without replacement.
    order = torch.argsort(seg.double() + torch.rand(total, dtype=torch.float64))
    rank = torch.arange(total) - first[seg]
    keep = rank < torch.clamp(deg, max=fanout)[seg]
    pick = order[keep]
    return seg[pick], start[seg[pick]] + pick - first[seg[pick]]


class TorchNeighborSampler(NeighborSampler):
    """PyG's :class:`~torch_geometric.sampler.NeighborSampler`, homogeneous sampling in torch.

    Parameters
    ----------
    data
        The graph (:class:`~torch_geometric.data.Data` with ``edge_index``, source first).
    num_neighbors
        Fan-out per hop, the seeds' hop first.

    Notes
    -----
    Supports what :class:`~torch_geometric.loader.NeighborLoader` does by default:
    directional subgraphs, no replacement, no temporal or weighted sampling, not disjoint.
    """

    def __init__(self, data: Data, num_neighbors: list[int], **kwargs: object) -> None:
        with warnings.catch_warnings():  # "without pyg-lib is deprecated": this is the kernel
            warnings.simplefilter("ignore")
            super().__init__(data, num_neighbors, **kwargs)
        unsupported = {
            "replace": self.replace, "disjoint": self.disjoint,
            "time_attr": self.node_time is not None or self.edge_time is not None,
            "weight_attr": self.edge_weight is not None,
            "subgraph_type": self.subgraph_type != SubgraphType.directional,
            "heterogeneous": self.is_hetero,
        }
        bad = [k for k, v in unsupported.items() if v]
        if bad:
            raise NotImplementedError(f"TorchNeighborSampler does not support {', '.join(bad)}")
        self._local = torch.full((self.num_nodes,), -1, dtype=torch.long)

    def _sample(
        self, seed: torch.Tensor, seed_time: torch.Tensor | None = None, **kwargs: object
    ) -> SamplerOutput:
        """Sample the directional subgraph of ``seed`` (the seeds are its first vertices)."""
        local = self._local
        nodes = [seed.to(torch.long)]
        local[nodes[0]] = torch.arange(len(seed))
        count = len(seed)
        lo, hi = 0, count
        rows, cols, edges = [], [], []
        num_nodes, num_edges = [count], []
        try:
            for fanout in self.num_neighbors.get_mapped_values():
                frontier = torch.cat(nodes)[lo:hi] if len(nodes) > 1 else nodes[0][lo:hi]
                pos, edge = sample_hop(self.colptr, self.row, frontier, int(fanout))
                src = self.row[edge]
                fresh = src[local[src] < 0]
                added = 0
                if len(fresh):
                    uniq, inverse = torch.unique(fresh, return_inverse=True)
                    first = torch.full((len(uniq),), len(fresh), dtype=torch.long)
                    first.scatter_reduce_(0, inverse, torch.arange(len(fresh)), "amin")
                    uniq = uniq[torch.argsort(first)]  # first reached, first numbered
                    local[uniq] = torch.arange(count, count + len(uniq))
                    nodes.append(uniq)
                    added = len(uniq)
                rows.append(local[src])
                cols.append(pos + lo)
                edges.append(edge)
                lo, hi = count, count + added
                count = hi
                num_nodes.append(hi - lo)
                num_edges.append(len(edge))
            node = torch.cat(nodes)
        finally:
            local[torch.cat(nodes)] = -1
        return SamplerOutput(
            node=node, row=torch.cat(rows), col=torch.cat(cols), edge=torch.cat(edges),
            batch=None, num_sampled_nodes=num_nodes, num_sampled_edges=num_edges,
        )
