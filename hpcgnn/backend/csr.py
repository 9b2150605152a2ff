"""SciPy CSR matrices as ``torch.sparse_csr`` tensors on a device.

The one conversion of a host sparse block into a tensor: the local SpMMs
(:mod:`hpcgnn.kernels.spmm`) and the calibration's stage blocks
(:mod:`hpcgnn.comm.calibrate`) call :func:`to_torch_csr`.
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


def to_torch_csr(
    a: sp.csr_matrix, dtype: torch.dtype, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Convert a SciPy CSR matrix into a ``torch.sparse_csr`` tensor (64-bit indices).

    Parameters
    ----------
    a
        The host matrix.
    dtype
        Dtype of the values.
    device
        Device of the tensor (``Device.torch_device``; the CPU by default).
    """
    a = a.tocsr()
    return torch.sparse_csr_tensor(
        torch.from_numpy(a.indptr.astype(np.int64)),
        torch.from_numpy(a.indices.astype(np.int64)),
        torch.from_numpy(np.ascontiguousarray(a.data)).to(dtype),
        size=a.shape,
        check_invariants=False,
        device=device,
    )
