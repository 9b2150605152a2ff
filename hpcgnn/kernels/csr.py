"""Extraction of CSR rows by position: the rows ``S_U`` of a sampling hop.

CUDA: ``cuda/csr.cu`` (``gather_ranges<I>``, int32/int64 column ids), for tensors on the
sampling device (a GPU, or the emulated device's host build); NumPy arrays run the CPU
reference. The samplers use both (:meth:`hpcgnn.sampling.rows.RowStore.take` and
``merge``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpcgnn.kernels import cuda_modules as cm

#: Threads per block of ``gather_ranges`` (one block walks one output row at a time).
ROW_BLOCK = 128
#: Most blocks of ``gather_ranges`` (blocks stride over the output rows).
ROW_BLOCKS = 65535


def gather_ranges(indptr: Any, indices: Any, pos: Any) -> tuple[Any, Any]:
    """The CSR rows ``pos`` of ``(indptr, indices)`` as a new ``(indptr, indices)``.

    Parameters
    ----------
    indptr
        Row pointer (int64).
    indices
        Column ids (int32 or int64 on a GPU; any dtype on the CPU).
    pos
        Rows to take, in output order; may repeat; empty rows give empty output rows.

    Returns
    -------
    (indptr, indices)
        ``indptr`` int64 with ``len(pos) + 1`` entries, ``indices`` of the input dtype;
        tensors on the inputs' device for tensors, else NumPy.
    """
    if cm.is_tensor(indices):
        return _gather_ranges_cuda(indptr, indices, pos)
    pos = np.asarray(pos, dtype=np.int64)
    starts = indptr[pos]
    lens = indptr[pos + 1] - starts
    out_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    idx = np.repeat(starts - out_ptr[:-1], lens) + np.arange(int(out_ptr[-1]), dtype=np.int64)
    return out_ptr, indices[idx]


def _gather_ranges_cuda(indptr: Any, indices: Any, pos: Any) -> tuple[Any, Any]:
    import torch

    indptr = indptr.to(torch.int64).contiguous()
    pos = pos.to(torch.int64).contiguous()
    indices = indices.contiguous()
    lens = indptr[pos + 1] - indptr[pos]
    out_ptr = torch.zeros(len(pos) + 1, dtype=torch.int64, device=indices.device)
    torch.cumsum(lens, 0, out=out_ptr[1:])
    out = torch.empty(int(out_ptr[-1]), dtype=indices.dtype, device=indices.device)
    rows = min(len(pos), ROW_BLOCKS) if len(out) else 0
    name = f"gather_ranges<{cm.c_type(indices.dtype)}>"
    args = tuple(cm.as_cupy(a) for a in (indptr, indices, pos, out_ptr))
    args = (*args, np.int64(len(pos)), cm.as_cupy(out))
    cm.launch("csr.cu", name, cm.device_index(indices.device), rows, args, block=ROW_BLOCK)
    return out_ptr, out
