"""``hpcgnn predict``: a trained model's logits for every vertex, in an HDF5 file.

The model is built and restored as ``hpcgnn train --resume`` would (same flags, same
checkpoint checks), then each rank computes the logits of the rows it scores in
evaluation (:meth:`~hpcgnn.training.loop.Trainer.predictions`). The rows are gathered to rank 0
in blocks of :data:`CHUNK_ROWS` vertices, so rank 0 never holds more than one block, and
written to::

    logits        (n, C) float32   the model's output, without dropout
    predictions   (n,)   int64     the argmax of each row
                  (n, C) uint8     multi-label targets (``--loss bce``): 1 where the logit
                                   is above 0, the classes each vertex is predicted to have

under a temporary name renamed over ``--out`` when complete (a failure leaves any previous
file). Rank 0 checks that every vertex was written exactly once.
"""

from __future__ import annotations

import numpy as np
import torch

from hpcgnn.comm.collective import collective
from hpcgnn.comm.communicator import Comm
from hpcgnn.errors import HpcgnnError
from hpcgnn.io.output import CHECKSUM, H5Output
from hpcgnn.io.reader import GraphMeta

#: Settings of the training run that a prediction need not repeat (the optimiser's, the
#: dropout, the seed and the model's selection: the weights are the checkpoint's).
TRAINING_ONLY = ("lr", "weight_decay", "weight_decay_layers", "dropout", "seed", "select_model")
#: The communication category of the gathers.
PREDICT = "predict"
#: Vertices per gathered block.
CHUNK_ROWS = 1 << 18


def writer_rows(
    comm: Comm, world: Comm, ids: np.ndarray, logits: torch.Tensor
) -> tuple[np.ndarray, torch.Tensor]:
    """``(ids, logits)`` where ``comm`` (whose ranks score every vertex once) holds world rank 0.

    The other copies of the rows (replicas of a 1.5D process row) return none: each vertex
    is written once. Collective over ``comm``.
    """
    if comm.allreduce_scalar(int(world.rank == 0)):
        return np.asarray(ids, dtype=np.int64), logits
    return np.zeros(0, dtype=np.int64), logits[:0]


def write_predictions(
    path: str, world: Comm, meta: GraphMeta, ids: np.ndarray, logits: torch.Tensor,
    chunk_rows: int = CHUNK_ROWS,
) -> int:
    """Write every rank's rows ``ids`` of ``logits`` to ``path`` (collective); the rows written."""
    n, classes = meta.num_nodes, meta.num_classes
    order = np.argsort(ids, kind="stable")
    ids = np.asarray(ids, dtype=np.int64)[order]
    values = np.ascontiguousarray(
        logits.detach().cpu().numpy().astype(np.float32, copy=False)[order]
    )
    out: H5Output | None = None
    with collective(world):
        if world.rank == 0:
            out = H5Output(path, "--out")
            out.file.create_dataset("logits", (n, classes), dtype=np.float32, chunks=True,
                                    **CHECKSUM)
            shape, dtype = ((n, classes), np.uint8) if meta.multi_label else ((n,), np.int64)
            out.file.create_dataset("predictions", shape, dtype=dtype, chunks=True, **CHECKSUM)
    try:
        for a in range(0, n, chunk_rows):
            b = min(n, a + chunk_rows)
            lo, hi = np.searchsorted(ids, [a, b])
            got_ids, _ = world.gatherv(ids[lo:hi], 0, PREDICT)
            got, _ = world.gatherv(values[lo:hi], 0, PREDICT)
            with collective(world):
                if out is not None:
                    assert got_ids is not None and got is not None
                    _write_block(out, a, b, got_ids, got, meta.multi_label)
        with collective(world):
            if out is not None:
                out.commit()
    except BaseException:
        if out is not None:
            out.discard()
        raise
    return n


def _write_block(
    out: H5Output, a: int, b: int, ids: np.ndarray, rows: np.ndarray, multi_label: bool
) -> None:
    """Rows ``[a, b)`` from the gathered ``ids`` and ``rows``, each vertex exactly once."""
    seen = np.bincount(ids - a, minlength=b - a)
    if len(seen) != b - a or not (seen == 1).all():
        bad = int(np.flatnonzero(seen != 1)[0]) + a
        raise HpcgnnError(f"internal error: vertex {bad} was predicted {int(seen[bad - a])}"
                          " times (once expected)")
    block = np.empty((b - a, rows.shape[1]), dtype=np.float32)
    block[ids - a] = rows
    with out.errors():
        out.file["logits"][a:b] = block
        out.file["predictions"][a:b] = (block > 0) if multi_label else block.argmax(axis=1)
