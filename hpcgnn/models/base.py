"""What every full-batch model shares: reading its rows, the GCN forward, gradient sums.

A full-batch model is a data layout (which rows and columns this rank holds) plus one
aggregation per layer (:class:`hpcgnn.nn.gcn.LayerOps`) plus the weights it is given;
:class:`GCNModel` runs the one GCN of :mod:`hpcgnn.nn.gcn` on them. Subclasses set the
attributes in :meth:`GCNModel.__init__`'s docstring and may override
:meth:`GCNModel.predict_cost` and :meth:`GCNModel.exchange_report`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from hpcgnn.comm.communicator import Comm
from hpcgnn.comm.stats import CommStats
from hpcgnn.config import TrainConfig
from hpcgnn.cost.estimate import Estimate, Problem
from hpcgnn.cost.ranking import cost_problem
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.memory import GraphSource
from hpcgnn.io.reader import GraphMeta
from hpcgnn.kernels.sparse_input import SparseFeatures
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.subnets import Subnet, subnet_heads
from hpcgnn.models.share import RowShare, load_rows
from hpcgnn.nn.gcn import LayerOps, block_dropout, run_layers, select_columns
from hpcgnn.nn.init import init_weights
from hpcgnn.rng import Columns

ALLREDUCE = "allreduce"


def allreduce_gradients(
    comm: Comm, weights: Sequence[torch.Tensor], fused: bool, divide_by: int = 1
) -> None:
    """Sum the weight gradients over ``comm`` (missing gradients count as zero).

    ``fused``: one all-reduce of all gradients concatenated (then divided by
    ``divide_by``); otherwise one all-reduce per weight.
    """
    grads = []
    for w in weights:
        if w.grad is None:
            w.grad = torch.zeros_like(w)
        grads.append(w.grad)
    if not fused:
        for g in grads:
            comm.allreduce(g, ALLREDUCE)
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    comm.allreduce(flat, ALLREDUCE)
    if divide_by != 1:
        flat /= divide_by
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


class GCNModel:
    """A full-batch GCN on one data layout.

    Attributes set by subclasses: ``grid``, ``cfg``, ``meta``, ``comm`` (the ranks whose
    rows together are every vertex once: loss and accuracy counts are summed over it),
    ``stats`` (where local GEMMs are timed, or ``None``), ``rows`` (this rank's global
    rows), ``row_ids`` (the global ids of the rows it scores, the logits' rows),
    ``offsets`` (the block offsets the cost model needs), ``x``, ``y``, ``masks``
    (this rank's features and the labels and masks of the rows it scores), ``widths``,
    ``weights`` and ``layers`` (one :class:`~hpcgnn.nn.gcn.LayerOps` per layer).
    """

    grid: ProcessGrid | None
    cfg: TrainConfig
    meta: GraphMeta
    comm: Comm
    stats: CommStats | None
    rows: tuple[int, int]
    row_ids: np.ndarray
    offsets: np.ndarray | None
    x: torch.Tensor | SparseFeatures
    y: torch.Tensor
    masks: dict[str, torch.Tensor]
    widths: list[int]
    weights: list[torch.Tensor]
    layers: list[LayerOps]
    #: All-reduce all weight gradients in one message (else one per weight).
    fused_gradients: bool = False
    #: The GIST sub-network this model is (its global column ids), else ``None``.
    subnet: Subnet | None = None

    def _init_weights(self, weights: list[torch.Tensor] | None) -> None:
        """Set ``widths`` and ``weights``: the ones given, else Glorot from ``cfg.seed``.

        A kind with a self weight (GraphSAGE): two per layer, ``W_self`` and ``W_neigh``;
        with ``cfg.bias`` each layer's bias (zeros) after its last weight.
        """
        meta, cfg = self.meta, self.cfg
        self.widths = layer_sizes(meta.num_features, cfg.hidden, meta.num_classes, cfg.layers)
        self.weights = (
            weights if weights is not None
            else init_weights(self.widths, cfg.seed, cfg.numpy_dtype, cfg.kind, self.comm.device,
                              cfg.bias)
        )

    def dropout_columns(self) -> Callable[[int], Columns] | None:
        """This rank's columns of a layer input of width ``f`` (``None``: all)."""
        return None

    def _dropout_view(self) -> tuple[list[int], Callable[[int], Columns] | None]:
        """Stream widths and ``columns(layer)`` of the dropout masks.

        A GIST sub-network draws the global model's masks at its global column ids, so
        GIST with one sub-network is ordinary training.
        """
        cols = self.dropout_columns()
        if self.subnet is None:
            if cols is None:
                return self.widths, None
            return self.widths, lambda layer: cols(self.widths[layer])
        ids = self.subnet.ids
        return list(self.subnet.widths), lambda layer: select_columns(
            ids[layer], None if cols is None else cols(self.widths[layer])
        )

    def logits(self, epoch: int | None) -> torch.Tensor:
        """Logits of the rows this rank scores; ``epoch=None`` evaluates without dropout."""
        keep = None
        if epoch is not None:
            keep = block_dropout(
                self.cfg.seed, self.cfg.dropout, epoch, self.rows, *self._dropout_view(),
                device=self.comm.device,
            )
        return run_layers(
            self.x, self.weights, self.layers, self.cfg.dropout, keep, self.stats, self.cfg.kind,
            self.cfg.attention_p,  # a sub-GAT draws the global model's heads' decisions
            subnet_heads(self.subnet, self.cfg.kind, self.cfg.hidden, self.cfg.heads),
            self.cfg.bias,
        )

    def reduce_gradients(self) -> None:
        """Sum the partial weight (and bias) gradients over the ranks that hold them.

        ``comm``'s ranks hold every row once, so each bias's gradient, summed over a
        rank's rows, adds up over them to the whole sum (replicas of a row are not in it).
        """
        allreduce_gradients(self.comm, self.weights, self.fused_gradients)

    def problem(self) -> Problem:
        """The cost model's view of this model."""
        return cost_problem(self.meta, self.cfg, self.offsets)

    def predict_cost(self) -> Estimate | None:
        """Predicted communication of one training epoch (collective); ``None``: no model."""
        return None

    def exchange_report(
        self, measured: dict[str, float], predicted: dict[str, float],
        tier_gbps: dict[str, float] | None,
    ) -> dict[str, Any] | None:
        """The metrics' ``exchange`` section of partitioned models (collective), else ``None``."""
        return None


M = TypeVar("M", bound="RowBlockModel")


class RowBlockModel(GCNModel):
    """A model whose ranks own contiguous vertex rows (1D, 1.5D, halo, offload).

    Process row ``i`` owns block row ``i``: the file's partition when it fits (see
    :func:`~hpcgnn.layout.blocks.vertex_offsets`), else an even split; a model that
    ``follows_partition`` refuses a partition that does not fit
    (:func:`~hpcgnn.models.share.require_partition`). Built from this rank's
    :class:`~hpcgnn.models.share.RowShare`; :meth:`read` loads it.
    """

    #: Whether the model's communication is built on the vertex partition (halo, offload).
    follows_partition: bool = False
    #: Whether the vertex data (features, labels, masks) stays in host memory (offload:
    #: HongTu's host tier; the device holds one chunk at a time).
    host_resident: bool = False
    #: Whether the model reads the rows of ``Â`` (the backward's operator) too.
    needs_a: bool = True

    def __init__(
        self, share: RowShare, grid: ProcessGrid, cfg: TrainConfig,
        weights: list[torch.Tensor] | None = None,
    ) -> None:
        """Take this rank's block row (``comm`` is the process column) and the weights.

        ``weights``: ``W^1 .. W^L`` to train (default: Glorot from ``cfg.seed``).
        Subclasses set ``layers``.
        """
        self.grid, self.cfg = grid, cfg
        self.comm = grid.col
        self.stats = self.comm.stats
        self.meta, self.offsets, self.rows = share.meta, share.offsets, share.rows
        self.row_ids = np.arange(*share.rows)
        self.x, self.y, self.masks = share.x, share.y, share.masks
        self._init_weights(weights)

    @classmethod
    def read(
        cls: type[M], source: GraphSource, grid: ProcessGrid, cfg: TrainConfig, *args: Any,
        **kwargs: Any,
    ) -> M:
        """The model of ``source`` (a graph file or a graph in memory) on ``grid``.

        Reads this rank's block row (:func:`~hpcgnn.models.share.load_rows`, collective)
        and passes ``args`` and ``kwargs`` to the constructor.
        """
        share = load_rows(
            source, grid, cfg, with_a=cls.needs_a, follows_partition=cls.follows_partition,
            host_resident=cls.host_resident,
        )
        return cls(share, grid, cfg, *args, **kwargs)
