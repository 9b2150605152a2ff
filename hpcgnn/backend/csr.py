"""SciPy CSR matrices as ``torch.sparse_csr`` tensors on a device.

The one conversion of a host sparse block into a tensor: the local SpMMs
(:mod:`hpcgnn.kernels.spmm`) and the calibration's stage blocks
(:mod:`hpcgnn.comm.calibrate`) call :func:`to_torch_csr`. On a GPU the indices are int32
where they fit (:func:`index_dtype`): cuSPARSE's SpMM with int64 indices reached a few
percent of the copy bandwidth; on the host they stay int64 (MKL takes int32 either way).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    import scipy.sparse as sp

# Construction of CSR tensors warns that the layout is "beta"; it is what we rely on.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")


#: Largest nonzero count and dimension int32 indices hold.
INT32_LIMIT = 2**31 - 1


def fits_int32(nnz: int, shape: tuple[int, int]) -> bool:
    """Whether int32 indices hold a matrix (``nnz`` and both sizes <= :data:`INT32_LIMIT`)."""
    return max(nnz, *shape) <= INT32_LIMIT


def index_dtype(nnz: int, shape: tuple[int, int], device: torch.device | str) -> torch.dtype:
    """The index dtype of a CSR tensor on ``device``: int32 on a GPU where it fits, else int64.

    int32 where ``nnz`` and both dimensions are at most :data:`INT32_LIMIT` and ``device``
    is not the host (an emulated GPU counts as a GPU).
    """
    on_gpu = torch.device(device).type != "cpu"
    return torch.int32 if on_gpu and fits_int32(nnz, shape) else torch.int64


def to_torch_csr(
    a: sp.csr_matrix, dtype: torch.dtype, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Convert a SciPy CSR matrix into a ``torch.sparse_csr`` tensor.

    Parameters
    ----------
    a
        The host matrix.
    dtype
        Dtype of the values.
    device
        Device of the tensor (``Device.torch_device``; the CPU by default). The indices
        are :func:`index_dtype`'s: int64 on the host, int32 on a GPU where they fit.
    """
    a = a.tocsr()
    idx = np.int32 if index_dtype(a.nnz, a.shape, device) == torch.int32 else np.int64
    return torch.sparse_csr_tensor(
        torch.from_numpy(a.indptr.astype(idx)),
        torch.from_numpy(a.indices.astype(idx)),
        torch.from_numpy(np.ascontiguousarray(a.data)).to(dtype),
        size=a.shape,
        check_invariants=False,
        device=device,
    )
