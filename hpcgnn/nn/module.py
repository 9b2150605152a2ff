"""The Python API on one process: a graph in memory and the GCN as a ``torch.nn.Module``.

For a script that trains on one process, as with PyG::

    import torch
    from hpcgnn.nn import GCN, Graph

    g = Graph.read("inputs/cora.h5")
    model = GCN(g.num_features, 16, g.num_classes)
    opt = model.optimizer(lr=0.01, weight_decay=5e-4)  # decay on the first layer
    for epoch in range(200):
        model.train()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(g)[g.train_mask], g.y[g.train_mask])
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(g).argmax(1)

:class:`GCN` is the layer definition every mode of ``hpcgnn train`` uses
(:func:`hpcgnn.nn.gcn.run_layers`), with the same Glorot weights from ``seed`` and the
same counter-based dropout masks (keyed by the number of training forwards so far), so
``N`` steps of the loop above train the model ``hpcgnn train --epochs N`` trains on one
rank. ``model="sage"`` gives GraphSAGE-mean layers, ``model="gin"`` GIN layers (with
``Graph.read(..., model="gin", gin_eps=...)``), ``model="gat"`` GAT layers (with
``Graph.read(..., model="gat")`` and ``GCN(..., heads=K)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hpcgnn.backend import cpu
from hpcgnn.config import TrainConfig
from hpcgnn.graph.normalize import load_normalized
from hpcgnn.io.memory import GraphSource, open_graph, read_feature_block
from hpcgnn.kernels.attention import edge_pattern
from hpcgnn.kernels.sparse_input import held_features, nonzeros
from hpcgnn.kernels.spmm import to_torch_csr
from hpcgnn.kinds import GCN as GCN_KIND
from hpcgnn.kinds import Layer
from hpcgnn.layout.order import layer_sizes
from hpcgnn.nn.gat import LocalNeighbourhood
from hpcgnn.nn.gcn import Input, LayerOps, LocalAggregation, block_dropout, run_layers
from hpcgnn.nn.init import init_weights
from hpcgnn.nn.optim import make_optimizer


@dataclass(frozen=True)
class Graph:
    """A whole graph on one process: the layers' operator and the vertex data.

    Attributes
    ----------
    aggregation
        ``Â^T H`` and its adjoint (GCN's normalised ``A + I``, or GraphSAGE's mean).
    neighbourhood
        GAT's edges (the pattern of ``A^T + I``), read for ``model="gat"``; else ``None``.
    x
        Features: dense, or CSR (:class:`~hpcgnn.kernels.sparse_input.SparseFeatures`)
        when they are mostly zero.
    y
        Labels (``-1``: unlabelled).
    train_mask, val_mask, test_mask
        Boolean masks of the split.
    """

    aggregation: LocalAggregation
    x: Input
    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    neighbourhood: LocalNeighbourhood | None = None

    @classmethod
    def read(
        cls, source: GraphSource, model: str | Layer = GCN_KIND.name,
        dtype: str = "float32", sparse_features: str = "auto", gin_eps: float = 0.0,
    ) -> Graph:
        """Read a graph file (or a :class:`~hpcgnn.io.memory.MemoryGraph`) whole.

        ``model``: the layer whose operator to build (``gcn``, ``sage``, ``gin``, whose sum
        operator carries ``1 + gin_eps`` on its diagonal, ``gat``, whose edges are the
        pattern of ``A^T + I``, or a :class:`~hpcgnn.kinds.Layer` object);
        ``sparse_features``: ``auto`` (CSR under 10% nonzero), ``on`` or ``off``, as the
        flag of ``hpcgnn train``.
        """
        cfg = TrainConfig(dtype=dtype, sparse_features=sparse_features, gin_eps=gin_eps,
                          **model_settings(model))
        with open_graph(source) as gf:
            n = gf.meta.num_nodes
            norm_t, norm = load_normalized(gf, cfg.numpy_dtype, kind=cfg.kind)
            x = read_feature_block(gf, 0, n, cfg.numpy_dtype)
            y = gf.read_labels(0, n)
            masks = [gf.read_mask(m, 0, n) for m in ("train", "val", "test")]
        assert norm is not None
        sparse = cfg.sparse_input(nonzeros(x), x.shape[0] * x.shape[1])
        features = held_features(x, sparse, cpu())
        dt = cfg.torch_dtype
        ids = np.arange(n)
        nbh = LocalNeighbourhood(edge_pattern(norm_t, ids, ids, "cpu", dt)) if (
            cfg.kind.attention) else None
        return cls(
            aggregation=LocalAggregation(to_torch_csr(norm_t, dt), to_torch_csr(norm, dt)),
            x=features, y=torch.from_numpy(y if y.ndim == 2 else np.asarray(y, dtype=np.int64)),
            train_mask=torch.from_numpy(masks[0]), val_mask=torch.from_numpy(masks[1]),
            test_mask=torch.from_numpy(masks[2]), neighbourhood=nbh,
        )

    @property
    def num_nodes(self) -> int:
        """Vertices."""
        return int(self.y.shape[0])

    @property
    def num_features(self) -> int:
        """Input features per vertex."""
        return int(self.x.shape[1])

    @property
    def num_classes(self) -> int:
        """Classes (the largest label plus one; multi-label: the label matrix's columns)."""
        return int(self.y.shape[1]) if self.y.ndim == 2 else int(self.y.max()) + 1


def model_settings(model: str | Layer) -> dict[str, Any]:
    """:class:`~hpcgnn.config.TrainConfig`'s ``model`` (and ``layer``) of a name or a layer."""
    if isinstance(model, Layer):
        return {"model": str(model), "layer": model}
    return {"model": model}


class GCN(torch.nn.Module):
    """GCN (GraphSAGE-mean, GIN, GAT) layers on a whole :class:`Graph`: every vertex's logits.

    Parameters
    ----------
    in_features, hidden, classes
        Widths of the input, the hidden layers and the output.
    layers
        Number of layers (``>= 1``).
    dropout
        Drop probability of every layer's input while training.
    model
        ``gcn``, ``sage``, ``gin`` or ``gat``.
    seed
        Seed of the Glorot weights and of the dropout masks.
    dtype
        ``float32`` or ``float64``.
    heads, output_heads, attention_dropout
        GAT's heads of the hidden layers (concatenated: ``hidden`` is their total width)
        and of the last (averaged), and the coefficients' drop probability (``None``:
        ``dropout``'s), as ``hpcgnn train``'s flags.
    bias
        A bias per layer (zeros at first), each after its layer's last weight in
        :attr:`weights`, as ``hpcgnn train --bias``.
    """

    def __init__(
        self, in_features: int, hidden: int, classes: int, layers: int = 2, dropout: float = 0.5,
        model: str | Layer = GCN_KIND.name, seed: int = 0, dtype: str = "float32",
        heads: int = 1, output_heads: int = 1, attention_dropout: float | None = None,
        bias: bool = False,
    ) -> None:
        super().__init__()
        self.cfg = TrainConfig(layers=layers, hidden=hidden, dropout=dropout, seed=seed,
                               dtype=dtype, heads=heads, output_heads=output_heads,
                               attention_dropout=attention_dropout, bias=bias,
                               **model_settings(model))
        self.kind = self.cfg.kind
        self.widths = layer_sizes(in_features, hidden, classes, layers)
        self.weights = torch.nn.ParameterList(
            torch.nn.Parameter(w.detach()) for w in
            init_weights(self.widths, seed, self.cfg.numpy_dtype, self.kind, bias=bias)
        )
        #: Training forwards so far: the dropout masks of the next are this step's.
        self.steps = 0

    def forward(self, graph: Graph, x: Input | None = None) -> torch.Tensor:
        """The logits of every vertex of ``graph`` (features ``x``, default ``graph.x``).

        In training mode each call draws the next step's dropout masks.
        """
        x = graph.x if x is None else x
        p = self.cfg.dropout
        keep = None
        if self.training:
            keep = block_dropout(self.cfg.seed, p, self.steps, (0, graph.num_nodes), self.widths)
            self.steps += 1
        if self.kind.attention and graph.neighbourhood is None:
            raise ValueError("a GAT reads the graph's edges: Graph.read(..., model='gat')")
        ops = [LayerOps(graph.aggregation, neighbourhood=graph.neighbourhood)] * self.cfg.layers
        return run_layers(x, list(self.weights), ops, p, keep, kind=self.kind,
                          attention_p=self.cfg.attention_p, bias=self.cfg.bias)

    def optimizer(self, lr: float = 0.01, weight_decay: float = 5e-4,
                  weight_decay_layers: str = "first") -> torch.optim.Adam:
        """Adam over the weights, the decay on the first layer's (or ``all``), as the CLI's."""
        cfg = TrainConfig(lr=lr, weight_decay=weight_decay,
                          weight_decay_layers=weight_decay_layers)
        return make_optimizer(list(self.weights), cfg,
                              self.kind.weight_slices(self.cfg.layers, self.cfg.bias)[0].stop)
