"""What the cost models take and return: :class:`Problem` (sizes) and :class:`Estimate`.

Each ``predict_*`` function of :mod:`hpcgnn.cost` returns, for one training epoch
(forward with dropout, backward, gradient all-reduce; no evaluation pass), the bytes
received per category *summed over all ranks*, in exactly the accounting of
:class:`hpcgnn.comm.stats.CommStats`, together with the largest per-rank volume and the
number of messages on the critical path. Training compares these predictions with what it
measured; ``hpcgnn model`` ranks algorithms and grids with them using only a file's
statistics.

Notation (CAGNET): ``n`` vertices, ``nnz`` nonzeros of ``Â`` (self loops included),
``f_0 .. f_L`` layer widths, ``P`` ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hpcgnn.kinds import GCN, Layer
from hpcgnn.layout.order import param_shapes, weight_shapes


@dataclass(frozen=True)
class Problem:
    """Sizes that determine communication volume.

    Attributes
    ----------
    n
        Number of vertices.
    nnz
        Nonzeros of ``Â = norm(A + I)`` (edges plus ``n`` self loops).
    widths
        Layer widths ``[f_0, ..., f_L]``.
    itemsize
        Bytes per value (4 for float32, 8 for float64).
    row_offsets
        Vertex block offsets when the file's partition is used; ``None`` = even split.
    kind
        The layer kind: GCN (one weight per layer), GraphSAGE (``W_self``, ``W_neigh``; its
        mean operator has no self loops, so ``nnz`` is then the edges alone) or GIN
        (``W_1``, ``W_2``: a second dense step per layer).
    bias
        A bias per layer (``--bias``): its gradient is all-reduced with the weights'.

    """

    n: int
    nnz: int
    widths: tuple[int, ...]
    itemsize: int = 4
    row_offsets: tuple[int, ...] | None = None
    kind: Layer = GCN
    bias: bool = False

    @property
    def weights_per_layer(self) -> int:
        """Weight matrices per layer (:attr:`Layer.weights_per_layer`)."""
        return self.kind.weights_per_layer

    @property
    def weight_shapes(self) -> list[tuple[int, int]]:
        """The shapes of every weight, in the model's order."""
        return weight_shapes(self.widths, self.kind)

    @property
    def param_sizes(self) -> list[int]:
        """Entries of every parameter (weights, and biases with ``bias``), the model's order.

        What the gradient all-reduces move: one per parameter, or all of them in one.
        """
        return [math.prod(shape) for shape in param_shapes(self.widths, self.kind, self.bias)]


@dataclass
class Estimate:
    """Predicted communication of one epoch.

    ``axes``: per category, its busiest rank's bytes by the grid axis that moves them
    (:mod:`hpcgnn.layout.placement`: ``row``, ``col``, ``fiber``, ``world``), for a
    clock whose links differ by axis; a category without it moves over ``world``.
    """

    bytes_total: dict[str, float] = field(default_factory=dict)  # summed over ranks
    bytes_max_rank: dict[str, float] = field(default_factory=dict)  # busiest rank
    messages: int = 0  # latency terms on the critical path
    axes: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, category: str, total: float, max_rank: float, messages: int) -> None:
        """Accumulate one communication step (over ``world``)."""
        self.bytes_total[category] = self.bytes_total.get(category, 0.0) + total
        self.bytes_max_rank[category] = self.bytes_max_rank.get(category, 0.0) + max_rank
        self.messages += messages

    @classmethod
    def from_per_rank(
        cls, per_rank: dict[str, np.ndarray] | dict[tuple[str, str], np.ndarray], messages: int,
    ) -> Estimate:
        """The estimate of bytes given per rank: ``{category: array over the grid}``.

        A key may be ``(category, axis)``: the bytes of the category that move along that
        axis of the grid. Totals are the sums, the busiest rank of a category the maximum
        of its arrays' sum, whose split by axis is kept in :attr:`axes`; categories in
        which no rank receives a byte are left out.
        """
        by_cat: dict[str, dict[str, np.ndarray]] = {}
        for key, arr in per_rank.items():
            cat, axis = key if isinstance(key, tuple) else (key, "world")
            parts = by_cat.setdefault(cat, {})
            parts[axis] = parts[axis] + arr if axis in parts else np.asarray(arr, np.float64)
        est = cls(messages=messages)
        for cat, parts in sorted(by_cat.items()):
            arr = np.sum(list(parts.values()), axis=0)
            total = float(arr.sum())
            if total > 0:
                est.bytes_total[cat] = total
                busiest = int(np.argmax(arr))
                est.bytes_max_rank[cat] = float(arr.flat[busiest])
                est.axes[cat] = {a: float(x.flat[busiest]) for a, x in sorted(parts.items())
                                 if x.flat[busiest] > 0}
        return est

    def time(self, alpha: float, beta: float, betas: dict[str, float] | None = None) -> float:
        """``alpha * messages + beta * bytes`` on the busiest rank (seconds).

        ``betas``: seconds per byte by grid axis (:meth:`beta_by_category`); ``beta`` for
        an axis it does not name.
        """
        if betas is None:
            return alpha * self.messages + beta * sum(self.bytes_max_rank.values())
        return alpha * self.messages + sum(self.beta_by_category(beta, betas).values())

    def beta_by_category(
        self, beta: float, betas: dict[str, float] | None = None
    ) -> dict[str, float]:
        """Seconds each category's busiest-rank bytes take, by the links of their axes."""
        out = {}
        for cat, nbytes in sorted(self.bytes_max_rank.items()):
            parts = self.axes.get(cat)
            if betas is None or not parts:
                out[cat] = beta * nbytes
            else:
                out[cat] = sum(betas.get(a, beta) * b for a, b in parts.items())
        return out


def allreduce_share(nbytes: float | np.ndarray, p: int) -> np.ndarray:
    """What one all-reduce of ``nbytes`` over ``p`` ranks adds on each of them.

    ``2 m (p - 1) / p`` rounded to whole bytes (half to even), computed in the order of
    :meth:`hpcgnn.comm.Comm.allreduce` and :meth:`hpcgnn.comm.stats.CommStats.record`, so
    the prediction stays exact when ``p`` does not divide ``2 m`` (uneven blocks, P = 3).
    """
    return np.round(2 * np.asarray(nbytes, dtype=np.float64) * (p - 1) / p)


def allreduce_exact(est: Estimate, category: str, m: int, p: int) -> None:
    """One all-reduce of ``m`` bytes over ``p`` ranks, as :class:`CommStats` records it."""
    if p > 1:
        per_rank = float(allreduce_share(m, p))
        est.add(category, p * per_rank, per_rank, 2 * int(np.ceil(np.log2(p))))
