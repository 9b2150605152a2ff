"""The dense step T W and the logit gather on a process row: values and gradients.

Each variant also runs inside CAGNET's backward (``--product-order paper``:
:func:`hpcgnn.nn.gcn.aggregate_transform` with the step; here around the identity
aggregation, so ``(Â^T T) W = T W``): ``G`` brought to ``T``'s layout, ``U = G``
all-gathered along the row, gives the adjoint's gradients.
"""

import numpy as np
import pytest
import torch
from mpi4py import MPI

from hpcgnn.grid import ProcessGrid
from hpcgnn.layout.shapes import admissible_shapes
from hpcgnn.layout.summa import ALLGATHER, GATHER, REDUCE, REDUCE_SCATTER, SummaLayout
from hpcgnn.nn.gcn import aggregate_transform
from hpcgnn.spmm.dense_step import DenseStep, gather_rows
from hpcgnn.spmm.summa import SummaGrid
from tests.mpi import assert_all


def leaf(device, arr: np.ndarray) -> torch.Tensor:
    """A copy of ``arr`` on ``device`` that requires a gradient (a leaf of the test)."""
    return device.from_numpy(np.array(arr, order="C")).requires_grad_(True)


class Identity:
    """The aggregation ``Â = I``: ``(Â^T T) W`` is the dense step alone."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h

    def backward(self, g: torch.Tensor) -> torch.Tensor:
        return g


@pytest.mark.mpi
@pytest.mark.parametrize("backward", ["adjoint", "cagnet"])
@pytest.mark.parametrize("variant", [ALLGATHER, REDUCE_SCATTER, GATHER, REDUCE])
def test_dense_step_values_and_gradients(world, device, variant, backward):
    n = 11
    rng = np.random.default_rng(3)
    for f_in, f_out in [(5, 3), (2, 6)]:  # 2 columns leave blocks empty on wider rows
        t_full = rng.normal(size=(n, f_in))
        w_full = rng.normal(size=(f_in, f_out))
        r_full = rng.normal(size=(n, f_out))  # loss = sum(Z * R), so dZ = R
        for kind in ("2d", "3d"):
            for shape in admissible_shapes(kind, world.size):
                with ProcessGrid(MPI.COMM_WORLD, shape, device=device) as grid:
                    sg = SummaGrid.of(grid)
                    layout = SummaLayout(n, sg.dims)
                    i, j, layer = sg.coords
                    lo, hi = layout.fine_range(i, layer)
                    a0, a1 = layout.col_range(f_in, j)
                    b0, b1 = layout.col_range(f_out, j)
                    step = DenseStep(sg.row, layout.cols(f_in), layout.cols(f_out), variant)
                    t = leaf(device, t_full[lo:hi, a0:a1])
                    w = leaf(device, w_full)
                    if backward == "cagnet":
                        z = aggregate_transform(t, w, Identity(), step=step)
                    else:
                        z = step(t, w)
                    if step.final and (j == 0 or sg.row.size == 1):
                        want, r = (t_full @ w_full)[lo:hi], r_full[lo:hi]
                    elif step.final:
                        want, r = np.zeros((0, f_out)), np.zeros((0, f_out))
                    else:
                        want, r = (t_full @ w_full)[lo:hi, b0:b1], r_full[lo:hi, b0:b1]
                    ok = z.shape == want.shape and np.allclose(device.to_host(z), want)
                    assert_all(world, ok, f"{variant} {shape}: forward")
                    (z * device.from_numpy(np.ascontiguousarray(r))).sum().backward()
                    dt = (r_full @ w_full.T)[lo:hi, a0:a1]
                    ok = np.allclose(device.to_host(t.grad), dt)
                    dw = w.grad.clone()
                    grid.world.allreduce(dw, "allreduce")
                    ok &= np.allclose(device.to_host(dw), t_full.T @ r_full)
                    assert_all(world, ok, f"{variant} {shape}: gradients")


@pytest.mark.mpi
def test_gather_rows_and_its_adjoint(world, device):
    n, c = 9, 3
    rng = np.random.default_rng(8)
    z_full = rng.normal(size=(n, c))
    r_full = rng.normal(size=(n, c))
    for shape in admissible_shapes("3d", world.size):
        with ProcessGrid(MPI.COMM_WORLD, shape, device=device) as grid:
            sg = SummaGrid.of(grid)
            layout = SummaLayout(n, sg.dims)
            i, j, layer = sg.coords
            lo, hi = layout.fine_range(i, layer)
            c0, c1 = layout.col_range(c, j)
            z = leaf(device, z_full[lo:hi, c0:c1])
            out = gather_rows(z, sg.row, layout.cols(c))
            rows = (lo, hi) if j == 0 else (lo, lo)
            ok = np.allclose(device.to_host(out), z_full[rows[0] : rows[1]])
            (out * device.from_numpy(r_full[rows[0] : rows[1]])).sum().backward()
            ok &= np.allclose(device.to_host(z.grad), r_full[lo:hi, c0:c1])
            assert_all(world, ok, f"{shape}")
