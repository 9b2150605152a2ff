"""A rank's share of the graph on block rows, and its loader.

The row-block models (CAGNET 1D / 1.5D, halo, offload) are built from a :class:`RowShare`:
the rows of ``Â^T`` (and ``Â``) process row ``i`` holds, and their features, labels and
masks. :func:`load_rows` reads it from a graph file or from a graph in memory
(:class:`~hpcgnn.io.memory.MemoryGraph`), so a model is built the same way from either.
The SUMMA grids' share is :class:`hpcgnn.models.summa.SummaShare`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from hpcgnn.backend import Device, cpu
from hpcgnn.comm.collective import collective
from hpcgnn.comm.communicator import Comm
from hpcgnn.config import TrainConfig
from hpcgnn.errors import InputError
from hpcgnn.graph.blocks import normalized_rows
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.io.format import MASK_NAMES
from hpcgnn.io.memory import GraphReader, GraphSource, open_graph, read_feature_block
from hpcgnn.io.reader import GraphMeta
from hpcgnn.kernels.sparse_input import SparseFeatures, dense, held_features, nonzeros
from hpcgnn.layout.blocks import partition_fits, vertex_offsets


def input_features(
    x: np.ndarray | sp.csr_matrix, cfg: TrainConfig, world: Comm, device: Device
) -> torch.Tensor | SparseFeatures:
    """This rank's feature block, CSR when ``cfg`` says so for all of ``world``'s blocks.

    ``x``: the block as read (dense, or CSR from a file that stores its features sparse).
    Collective over ``world``: ``--sparse-features auto`` decides on the density of the
    blocks of every rank together, so every rank takes the same path.
    """
    counts = world.allgather_obj((nonzeros(x), int(x.shape[0]) * int(x.shape[1])))
    return held_features(x, cfg.sparse_input(sum(c[0] for c in counts),
                                              sum(c[1] for c in counts)), device)


def read_vertex_arrays(
    gf: GraphReader, rows: tuple[int, int], dtype: np.dtype, columns: tuple[int, int] | None,
    scored: tuple[int, int] | None, device: Device,
) -> tuple[np.ndarray | sp.csr_matrix, torch.Tensor, dict[str, torch.Tensor]]:
    """:func:`read_vertex_data` with the features as read: dense, or CSR (``features_csr``).

    A full-batch loader makes them dense or CSR with :func:`input_features` once every rank
    has read its block (outside the collective read: that decision is a collective too).
    """
    x = read_feature_block(gf, *rows, dtype)
    if columns is not None:
        x = x[:, columns[0] : columns[1]]
        x = np.ascontiguousarray(x) if isinstance(x, np.ndarray) else x.tocsr()
    s_lo, s_hi = rows if scored is None else scored
    masks = {m: device.from_numpy(gf.read_mask(m, s_lo, s_hi)) for m in MASK_NAMES}
    y = device.from_numpy(gf.read_labels(s_lo, s_hi))
    return x, y, masks


def read_vertex_data(
    gf: GraphReader, rows: tuple[int, int], dtype: np.dtype, columns: tuple[int, int] | None = None,
    scored: tuple[int, int] | None = None, *, device: Device,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Features of ``rows`` (``columns`` of them); labels and masks of ``scored`` (or rows).

    The tensors live on ``device`` (CPU: views of the arrays read, no copy).
    """
    x, y, masks = read_vertex_arrays(gf, rows, dtype, columns, scored, device)
    return device.from_numpy(dense(x)), y, masks


@dataclass(frozen=True)
class RowShare:
    """Block row ``i`` of a graph: what process row ``i`` of a row-block model holds.

    Attributes
    ----------
    meta
        The graph's sizes.
    offsets
        The block rows' vertex offsets (one block per process row).
    rows
        This block's global rows ``[lo, hi)``.
    a_t, a
        Its rows of ``Â^T`` and of ``Â`` (``None`` when not read); GraphSAGE: of the mean
        ``D_in^-1 A^T`` and its adjoint.
    x, y, masks
        Its features (dense, or CSR: :class:`~hpcgnn.kernels.sparse_input.SparseFeatures`;
        offload's are dense), labels and ``train`` / ``val`` / ``test`` masks.
    """

    meta: GraphMeta
    offsets: np.ndarray
    rows: tuple[int, int]
    a_t: sp.csr_matrix
    a: sp.csr_matrix | None
    x: torch.Tensor | SparseFeatures
    y: torch.Tensor
    masks: dict[str, torch.Tensor]


def require_partition(meta: GraphMeta, parts: int) -> None:
    """Refuse a file whose partition cannot give ``parts`` row blocks (a partitioned model).

    Such a file would silently be split evenly (:func:`~hpcgnn.layout.blocks.vertex_offsets`),
    throwing its partition away; a file without a partition is split evenly as documented.
    """
    offsets = meta.partition_offsets
    if offsets is not None and not partition_fits(offsets, parts):
        k = len(offsets) - 1
        raise InputError(
            f"{meta.path}: its partition has {k} parts, which {parts} ranks cannot follow"
            f" (it needs {parts} parts or a multiple); re-partition it for {parts} parts:"
            f" hpcgnn partition {meta.path} --parts {parts} --out NEW.h5"
        )


def load_rows(
    source: GraphSource, grid: ProcessGrid, cfg: TrainConfig, *, with_a: bool = True,
    follows_partition: bool = False, host_resident: bool = False,
) -> RowShare:
    """Read this rank's block row (collective over ``grid.world``).

    Process row ``i`` (``grid.col.rank``) takes block row ``i``: the file's partition when it
    fits (see :func:`~hpcgnn.layout.blocks.vertex_offsets`), else an even split; with
    ``follows_partition`` a partition that does not fit is refused
    (:func:`require_partition`). ``with_a``: read the rows of ``Â`` too (the backward's
    operator). ``host_resident``: the vertex data stays in host memory (offload's host tier).
    """
    comm = grid.col
    with collective(grid.world), open_graph(source) as gf:
        meta = gf.meta
        if follows_partition:
            require_partition(meta, comm.size)
        offsets = vertex_offsets(meta.num_nodes, comm.size, meta.partition_offsets)
        lo, hi = (int(v) for v in offsets[comm.rank : comm.rank + 2])
        dtype, kind = cfg.numpy_dtype, cfg.kind
        a_t = normalized_rows(gf, lo, hi, True, dtype, kind)
        a = normalized_rows(gf, lo, hi, False, dtype, kind) if with_a else None
        home = cpu() if host_resident else comm.device
        x, y, masks = read_vertex_arrays(gf, (lo, hi), dtype, None, None, home)
    # after the collective read: a rank whose block failed has told every rank
    features = input_features(x, cfg, grid.world, home)
    return RowShare(meta, offsets, (lo, hi), a_t, a, features, y, masks)
