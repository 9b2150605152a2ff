"""The SUMMA / Split-3D SpMM against SciPy on every grid shape, and its traffic."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from mpi4py import MPI

from hpcgnn.grid import ProcessGrid
from hpcgnn.layout.shapes import admissible_shapes
from hpcgnn.layout.summa import (
    SummaLayout,
    count_block_nnz,
    message_bytes,
    owned_blocks,
    pack_block,
    sparse_block_bytes,
)
from hpcgnn.spmm.summa import SummaGrid, SummaSpMM, unpack_block
from hpcgnn.training.report import summed_over_ranks
from tests.mpi import assert_all


@pytest.mark.parametrize(
    "rows,cols,density", [(7, 5, 0.6), (30, 4, 0.05), (6, 6, 0.0), (0, 3, 0.0)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pack_unpack_roundtrip_on_the_device(device, rows, cols, density, dtype):
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    a = sp.random(rows, cols, density=density, format="csr", random_state=1, dtype=np_dtype)
    a.sort_indices()
    for n in (cols, 2**31):  # int32 and int64 indices (misaligned float64 values with int32)
        msg = pack_block(a, n, np_dtype)
        assert msg.dtype == np.uint8
        assert msg.nbytes == message_bytes(rows, n, a.nnz, np_dtype)
        assert msg.nbytes == sparse_block_bytes(rows, n, a.nnz, np_dtype.itemsize)
        t = unpack_block(device.from_numpy(msg), a.shape, n, a.nnz, dtype)
        assert t.device == device.torch_device and t.values().dtype == dtype
        b = sp.csr_matrix((device.to_host(t.values()), device.to_host(t.col_indices()),
                           device.to_host(t.crow_indices())), shape=a.shape)
        assert (abs(a - b)).sum() == 0


def _operator(grid, m, n, part=None, split="auto"):
    """The SUMMA operator of ``m`` on ``grid``: ``(view, layout, owned blocks, operator)``."""
    sg = SummaGrid.of(grid)
    layout = SummaLayout(n, sg.dims, part, split)
    i, j, layer = sg.coords
    blocks = owned_blocks(layout, i, j, layer, lambda lo, hi: m[lo:hi])
    return sg, layout, blocks, SummaSpMM(layout, sg, blocks, torch.float64)


def _partition(n, parts, seed):
    """Uneven offsets with empty parts, the same on every rank."""
    cuts = np.sort(np.random.default_rng(seed).integers(0, n + 1, parts - 1))
    return tuple(int(x) for x in np.concatenate([[0], cuts, [n]]))


def _delta(before, after):
    return {c: v["bytes"] - before.get(c, {}).get("bytes", 0) for c, v in after.items()}


@pytest.mark.mpi
@pytest.mark.parametrize("split", ["auto", "even"])
@pytest.mark.parametrize("partitioned", [False, True])
def test_summa_spmm_equals_scipy_and_moves_the_predicted_bytes(
    world, device, split, partitioned
):
    n = 37
    m = sp.random(n, n, density=0.12, format="csr", random_state=4)  # not symmetric
    m = sp.csr_matrix(m + sp.eye(n))
    m.sort_indices()
    x = np.random.default_rng(0).normal(size=(n, 5))
    for kind in ("2d", "3d"):
        for shape in admissible_shapes(kind, world.size):
            with ProcessGrid(MPI.COMM_WORLD, shape, device=device) as grid:
                pr, pc, pl = SummaGrid.of(grid).dims
                part = _partition(n, pr * pl, sum(shape.dims)) if partitioned else None
                sg, layout, _, op = _operator(grid, m, n, part, split)
                i, j, layer = sg.coords
                lo, hi = layout.fine_range(i, layer)
                counts = count_block_nnz(layout, lambda a, b: m[a:b])
                for f in (5, 2):  # f = 2 leaves column blocks empty when Pc > 2
                    c0, c1 = layout.col_range(f, j)
                    before = grid.stats.snapshot()
                    y = op(device.from_numpy(np.ascontiguousarray(x[lo:hi, c0:c1])))
                    moved = summed_over_ranks(world, _delta(before, grid.stats.snapshot()))
                    want = (m @ x[:, :f])[lo:hi, c0:c1]
                    ok = y.shape == want.shape and np.allclose(device.to_host(y), want, atol=1e-12)
                    assert_all(world, ok, f"{shape} split={split} f={f}: wrong product")
                    sparse = 0
                    for r in range(pr):
                        rlo, rhi = layout.row_block(r)
                        for q in range(pl):
                            for z in counts[q][r]:
                                if z > 0:
                                    sparse += (pc - 1) * message_bytes(rhi - rlo, n, z, np.float64)
                    ok = moved.get("dense_bcast", 0) == (pr - 1) * n * f * 8
                    ok &= moved.get("reduce_scatter", 0) == (pl - 1) * n * f * 8
                    ok &= moved.get("sparse_bcast", 0) == sparse
                    assert_all(world, ok, f"{shape}: traffic {moved}, sparse {sparse}")


def _every_grid(world, device, n, seed):
    """``(shape, owned blocks, operator, this process's block of X)`` on every 2D and 3D grid
    of the world's ranks, for a random ``n x n`` matrix with a diagonal (``seed``)."""
    m = sp.csr_matrix(sp.random(n, n, density=0.2, format="csr", random_state=seed)
                      + sp.eye(n))
    m.sort_indices()
    x = np.random.default_rng(seed).normal(size=(n, 3))
    for kind in ("2d", "3d"):
        for shape in admissible_shapes(kind, world.size):
            with ProcessGrid(MPI.COMM_WORLD, shape, device=device) as grid:
                sg, layout, blocks, op = _operator(grid, m, n)
                i, j, layer = sg.coords
                lo, hi = layout.fine_range(i, layer)
                c0, c1 = layout.col_range(3, j)
                yield shape, blocks, op, device.from_numpy(np.ascontiguousarray(x[lo:hi, c0:c1]))


@pytest.mark.mpi
def test_summa_unpacks_its_own_blocks_once(world, device, monkeypatch):
    """A process unpacks each block it owns once and a received one at every step, with the
    same products (on a ``Pr x 1`` grid every block is owned: nothing after the first)."""
    import hpcgnn.spmm.summa as summa

    calls = []
    real = summa.unpack_block

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(summa, "unpack_block", counted)
    for shape, blocks, op, xs in _every_grid(world, device, 31, 4):
        calls.clear()
        outs = [device.to_host(op(xs)) for _ in range(3)]
        want = sum(1 if s.index in blocks else 3 for s in op.segments if op.nnz[s.index] > 0)
        ok = len(calls) == want and all(np.array_equal(outs[0], o) for o in outs)
        assert_all(world, ok, f"{shape}: {len(calls)} unpacks in 3 products, expected {want}")


@pytest.mark.mpi
def test_summa_uploads_its_sparse_blocks_once(world, device, monkeypatch):
    """The owned blocks go to the device at construction; the stages copy nothing up.

    With a CUDA-aware wire (the emulated GPU's MPI takes its memory), a product makes no
    host-to-device copy at all on the emulated device (counted by the device).
    """
    from hpcgnn.backend import emulation

    monkeypatch.setenv("HPCGNN_CUDA_AWARE_MPI", "1")
    for shape, blocks, op, xs in _every_grid(world, device, 29, 2):
        before = emulation.COUNTS["h2d"]
        for _ in range(3):
            op(xs)
        up = emulation.COUNTS["h2d"] - before
        ok = op.uploads == len(blocks) and (not emulation.is_active() or up == 0)
        assert_all(world, ok, f"{shape}: {op.uploads} uploads of {len(blocks)} blocks, "
                              f"{up} host-to-device copies in 3 products")
