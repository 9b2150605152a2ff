"""GraphConv (Morris et al., AAAI 2019) with per-edge weights stored in the graph file.

Each layer sums its in-neighbours' rows weighted by the edges' weights and adds a root
term of its own rows, each with its own weight matrix::

    H' = H W_root + A_w^T H W

as PyG's ``GraphConv`` with ``aggr="add"`` and ``edge_weight`` (without bias). The edge
weights are the graph file's (``hpcgnn prepare edgelist`` reads them from a third column;
a file without weights counts every edge 1). Train it with::

    PYTHONPATH=examples/layers mpiexec -n 4 hpcgnn train G.h5 --model graphconv:GraphConv

The layer is GraphSAGE's shape on another operator: ``g.propagate`` with a self weight runs
the aggregation in the narrower order and the root term on this rank's own rows.
"""

from hpcgnn.nn import Layer, Operator, Weight


class GraphConv(Layer):
    """``H W_root + A_w^T H W``, ReLU on hidden layers."""

    title = "GraphConv (H W_root + A_w^T H W)"
    operator = Operator("weighted")

    def weights(self, f_in, f_out, layer, last):
        """``W_root`` (the seed's stream) and ``W`` (``seed + 1``'s), both ``f_in x f_out``."""
        return [Weight((f_in, f_out)), Weight((f_in, f_out), stream=1)]

    def forward(self, g, h, w):
        """The weighted sum through ``W``, plus the root term through ``W_root``."""
        z = g.propagate(h, w[1], self_weight=w[0])
        return z if g.last else z.relu()
