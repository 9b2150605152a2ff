"""Parameter initialisation, identical on every rank for a given seed."""

from __future__ import annotations

import numpy as np
import torch

from hpcgnn.backend import Device, get_device
from hpcgnn.kinds import GCN, Layer


def glorot_rows(
    sizes: list[int], seed: int, layer: int, lo: int, hi: int, dtype: np.dtype | type = np.float32
) -> np.ndarray:
    """Rows ``[lo, hi)`` of the Glorot-uniform ``W^{layer+1}`` (0-based ``layer``).

    The weights are drawn in layer order, row by row, from one PCG64 stream seeded by
    ``seed`` (one 64-bit draw per entry); the stream is advanced to the first entry of the
    block, so a rank can draw its rows of a huge weight without the others'.
    """
    return glorot_shape_rows(list(zip(sizes[:-1], sizes[1:], strict=True)), seed, layer, lo,
                             hi, dtype)


def glorot_shape_rows(
    shapes: list[tuple[int, int]], seed: int, index: int, lo: int, hi: int,
    dtype: np.dtype | type = np.float32,
) -> np.ndarray:
    """Rows ``[lo, hi)`` of matrix ``index`` of :func:`glorot_shapes` ``(shapes, seed)``.

    The stream is advanced past the matrices before it and the block's first row.
    """
    fin, fout = shapes[index]
    bits = np.random.PCG64(seed)
    bits.advance(sum(a * b for a, b in shapes[:index]) + lo * fout)
    bound = np.sqrt(6.0 / (fin + fout))
    return np.random.Generator(bits).uniform(-bound, bound, size=(hi - lo, fout)).astype(dtype)


def glorot_weights(
    sizes: list[int], seed: int, dtype: np.dtype | type = np.float32
) -> list[np.ndarray]:
    """Glorot-uniform weight matrices ``W^l`` of shape ``(sizes[l-1], sizes[l])``.

    Drawn in layer order from one PCG64 stream seeded by ``seed`` (the draws
    :func:`glorot_rows` takes a block of), so every rank (and the serial reference) gets
    bit-identical weights.
    """
    return glorot_shapes(list(zip(sizes[:-1], sizes[1:], strict=True)), seed, dtype)


def glorot_shapes(
    shapes: list[tuple[int, int]], seed: int, dtype: np.dtype | type = np.float32
) -> list[np.ndarray]:
    """Glorot-uniform matrices of the given shapes, drawn in order from one PCG64 stream.

    The same draws as :func:`glorot_weights` when the shapes chain (``(f_0, f_1), (f_1, f_2)
    ...``): one 64-bit draw per entry, row by row.
    """
    gen = np.random.Generator(np.random.PCG64(seed))
    return [
        gen.uniform(-np.sqrt(6.0 / (a + b)), np.sqrt(6.0 / (a + b)), size=(a, b)).astype(dtype)
        for a, b in shapes
    ]


def init_weights(
    widths: list[int], seed: int, dtype: np.dtype | type = np.float32, kind: Layer = GCN,
    device: Device | None = None, bias: bool = False,
) -> list[torch.Tensor]:
    """Glorot weights as leaf tensors on ``device`` (default CPU), identical on every rank.

    ``bias``: each layer's weights are followed by its bias, zeros of the layer's output
    width (:func:`~hpcgnn.layout.order.param_shapes`); the weights are the same either way.

    The weights ``kind`` declares for each layer (:meth:`~hpcgnn.kinds.Layer.weights`), in
    the model's order; each from the stream of ``seed + weight.stream``, which draws its
    weights in the model's order (:func:`glorot_shapes`). So GCN's ``W^1 .. W^L`` are
    :func:`glorot_weights`; GraphSAGE's ``W_self^l`` come from ``seed`` and its ``W_neigh^l``
    from ``seed + 1`` (as the sampled GraphSAGE of
    :func:`hpcgnn.models.minibatch.sampled_weights`); GIN's ``W_1^l`` from ``seed`` and
    ``W_2^l`` from ``seed + 1``; GAT's ``W^l`` from ``seed``, ``a_src^l, a_dst^l`` from
    ``seed + 1``.
    """
    dev = get_device(device)
    last = len(widths) - 2
    declared = [w for layer, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True))
                for w in kind.weights(a, b, layer, layer == last)]
    values: list[np.ndarray | None] = [None] * len(declared)
    for stream in sorted({w.stream for w in declared}):
        ids = [i for i, w in enumerate(declared) if w.stream == stream]
        drawn = glorot_shapes([declared[i].shape for i in ids], seed + stream, dtype)
        for i, m in zip(ids, drawn, strict=True):
            values[i] = m
    mats = [m for m in values if m is not None]
    if bias:  # each layer's bias after its last weight
        parts = kind.weight_slices(len(widths) - 1)
        mats = [m for layer, part in enumerate(parts)
                for m in [*mats[part], np.zeros(widths[layer + 1], dtype=dtype)]]
    return [dev.from_numpy(m).requires_grad_(True) for m in mats]
