"""The HDF5 file ``hpcgnn sample`` writes (layout in ``docs/sampling.md``).

::

    /                      attrs: format="hpcgnn-samples", format_version, sampler, sizes,
                           layers, batch_size, bulk, seed, epoch (counted from 1, as
                           training counts them; version 1 counted from 0), num_nodes, num_batches,
                           graph, graph_layout, world_size, grid
    /batches/<b>/seeds     int64 (B_b,)   seed vertices of batch b, in batch order
    /batches/<b>/hop<h>/   attrs: nnz
        rows               int64 (R,)     global ids of the rows (hop 0: the seeds)
        cols               int64 (C,)     global ids of the columns (= rows of hop h+1)
        indptr             int64 (R+1,)   CSR row pointer
        indices            int64 (nnz,)   global column vertex id of each sampled edge
        values             float64 (nnz,) aggregation weight of each edge

Edges of row ``r`` are ``rows[r] <- indices[indptr[r]:indptr[r+1]]`` (the source vertex
``indices[e]`` is an in-neighbour of ``rows[r]``), listed in the order of ``cols``.
"""

from __future__ import annotations

import os
from typing import Any

import h5py
import numpy as np

from hpcgnn.io.output import H5Output, write_dataset
from hpcgnn.sampling.sampled import SampledBatch, SampledHop

FORMAT = "hpcgnn-samples"
#: 2: ``epoch`` counts from 1 (it counted from 0 in version 1).
VERSION = 2


def write_samples(
    path: str | os.PathLike, batches: list[SampledBatch], attrs: dict[str, Any]
) -> None:
    """Write ``batches`` (any order; stored by batch id) to ``path`` atomically.

    A failed write (a full disk) raises :class:`~hpcgnn.errors.OutputError` naming ``path``
    and leaves no temporary file; a previous file at ``path`` is kept.
    """
    with H5Output(path, "--out") as out:
        f = out.file
        f.attrs["format"] = FORMAT
        f.attrs["format_version"] = VERSION
        for k, v in attrs.items():
            f.attrs[k] = v
        root = f.create_group("batches")
        for b in sorted(batches, key=lambda x: x.batch):
            g = root.create_group(str(b.batch))
            write_dataset(g, "seeds", b.seeds.astype(np.int64))
            for h, hop in enumerate(b.hops):
                hg = g.create_group(f"hop{h}")
                hg.attrs["nnz"] = hop.nnz
                write_dataset(hg, "rows", hop.rows.astype(np.int64))
                write_dataset(hg, "cols", hop.cols.astype(np.int64))
                write_dataset(hg, "indptr", hop.indptr.astype(np.int64))
                write_dataset(hg, "indices", hop.cols[hop.indices].astype(np.int64))
                write_dataset(hg, "values", hop.values.astype(np.float64))


def read_samples(path: str | os.PathLike) -> tuple[dict[str, Any], list[SampledBatch]]:
    """Read a samples file back: its attributes and the batches in batch order.

    ``SampledHop.indices`` are turned back into positions in ``cols``.
    """
    with h5py.File(path, "r") as f:
        if f.attrs.get("format") != FORMAT:
            raise ValueError(f"{path}: not an hpcgnn samples file")
        attrs = {
            k: (v.item() if hasattr(v, "item") and np.ndim(v) == 0 else v)
            for k, v in f.attrs.items()
        }
        out = []
        for name in sorted(f["batches"], key=int):
            g = f["batches"][name]
            batch = SampledBatch(int(name), g["seeds"][()])
            for h in range(len([k for k in g if k.startswith("hop")])):
                hg = g[f"hop{h}"]
                cols = hg["cols"][()]
                order = np.argsort(cols, kind="stable")
                pos = order[np.searchsorted(cols, hg["indices"][()], sorter=order)]
                batch.hops.append(SampledHop(
                    rows=hg["rows"][()], cols=cols, indptr=hg["indptr"][()],
                    indices=pos.astype(np.int64), values=hg["values"][()],
                ))
            out.append(batch)
    return attrs, out
