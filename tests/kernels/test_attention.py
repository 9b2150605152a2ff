"""GAT's edge kernels (``cuda/attention.cu``, run as the host build on the emulated device)
equal their CPU twins (:mod:`hpcgnn.kernels.attention`) under every thread order and capped
grids: coefficients and raw scores, the scores' gradient, the SDDMM."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hpcgnn.backend.emulation import emulated
from hpcgnn.kernels import cuda_modules as cm
from hpcgnn.kernels.attention import (
    DOT_COLUMN_CHUNK,
    DOT_COLUMNS,
    edge_dot,
    edge_pattern,
    edge_softmax,
    edge_softmax_backward,
    sums_in_order,
)
from tests.kernels.host import need_compiler

HEADS = 3


def _case(dtype: torch.dtype, seed: int = 0):
    """A 9 x 12 pattern with an empty row and repeated columns, per-vertex terms, gradients."""
    rng = np.random.default_rng(seed)
    a = sp.random(9, 12, density=0.35, random_state=seed, format="csr")
    a = (a + sp.eye(9, 12)).tolil()
    a[4] = 0  # a row without edges
    a = a.tocsr()
    a.eliminate_zeros()
    pattern = edge_pattern(a, np.arange(9), np.arange(12), "cpu", dtype)
    s_dst = torch.from_numpy(rng.standard_normal((9, HEADS))).to(dtype)
    s_src = torch.from_numpy(rng.standard_normal((12, HEADS))).to(dtype)
    d_alpha = torch.from_numpy(rng.standard_normal((pattern.edges, HEADS))).to(dtype)
    za = torch.from_numpy(rng.standard_normal((9, HEADS, 5))).to(dtype)
    zb = torch.from_numpy(rng.standard_normal((12, HEADS, 5))).to(dtype)
    return a, pattern, (s_dst, s_src, d_alpha, za, zb)


def _run(pattern, s_dst, s_src, d_alpha, za, zb):
    alpha, t = edge_softmax(pattern, s_dst, s_src, 0.2)
    dt = edge_softmax_backward(pattern, alpha, t, d_alpha, s_dst.flip(0), 0.2)
    return alpha, t, dt, edge_dot(pattern, za, zb)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_attention_kernels_equal_the_cpu_twins(settings, dtype, monkeypatch):
    need_compiler()
    launched = []
    real = cm.launch
    monkeypatch.setattr(cm, "launch", lambda *a, **k: launched.append(a[1]) or real(*a, **k))
    a, pattern, args = _case(dtype)
    want = _run(pattern, *args)
    rows = torch.from_numpy(np.repeat(np.arange(9), np.diff(a.indptr)))
    sums = torch.zeros(9, HEADS, dtype=dtype).index_add_(0, rows, want[0])
    assert torch.allclose(sums[[i for i in range(9) if i != 4]], torch.ones(1, dtype=dtype))
    with emulated():
        gpu = torch.device("cuda")
        gpu_pattern = edge_pattern(a, np.arange(9), np.arange(12), gpu, dtype)
        got = _run(gpu_pattern, *(x.to(gpu) for x in args))
        got = [g.cpu() for g in got]
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and torch.allclose(g, w, rtol=tol, atol=tol)
    assert torch.equal(got[1], want[1])  # the raw scores are one add: bit for bit
    assert [k.split("<")[0] for k in launched] == [
        "edge_softmax",
        "edge_softmax_backward",
        "edge_dot",
    ]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_sums_a_few_values_in_order(dtype):
    """What :data:`DOT_COLUMNS` relies on: ``sum`` of <= 4 values is ``0 + p_0 + ... + p_f``
    on every build, and :func:`sums_in_order` finds so for every width up to
    :data:`DOT_COLUMNS` where it holds (``-0`` rows included)."""
    rng = np.random.default_rng(1)
    p = torch.from_numpy(
        rng.standard_normal((4096, 3, DOT_COLUMNS))
        * np.exp(rng.standard_normal((4096, 3, DOT_COLUMNS)) * 6)
    ).to(dtype)
    p[::5] = -0.0
    for f in range(1, DOT_COLUMNS + 1):
        acc = torch.zeros(p.shape[:2], dtype=dtype)
        for c in range(f):
            acc = acc + p[..., c]
        in_order = torch.equal(p[..., :f].sum(dim=2).view(torch.uint8), acc.view(torch.uint8))
        assert in_order == sums_in_order(f, dtype)
        assert in_order or f > 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("heads", "width"), [(1, 1), (4, 4), (3, 2), (2, 3), (2, 7), (1, 8), (2, 8), (3, 8), (1, 5)]
)
def test_edge_dot_by_column_is_the_product_sum_bit_for_bit(dtype, heads, width, monkeypatch):
    """``(a[row] * b[col]).sum(2)`` bit for bit, ``-0`` products of zero rows included,
    over chunks that split rows."""
    monkeypatch.setattr("hpcgnn.kernels.attention.DOT_COLUMN_CHUNK", 7)
    assert DOT_COLUMN_CHUNK > 7
    _, pattern, _ = _case(dtype)
    rng = np.random.default_rng(heads * width)
    za = torch.from_numpy(rng.standard_normal((9, heads, width))).to(dtype)
    zb = torch.from_numpy(rng.standard_normal((12, heads, width))).to(dtype)
    za[::2] = 0.0  # rows of zero gradient: products -0 against negative values
    want = (za[pattern.row] * zb[pattern.col]).sum(dim=2)
    got = edge_dot(pattern, za, zb)
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("heads", "width"), [(1, 4), (2, 3), (4, 4), (2, 8)])
def test_edge_dot_without_edges_or_source_rows(dtype, heads, width):
    """A rank's share without edges (an uneven 1.5D grid): no source rows, an empty result."""
    pattern = edge_pattern(sp.csr_matrix((3, 0)), np.arange(3), np.arange(0), "cpu", dtype)
    za = torch.ones((3, heads, width), dtype=dtype)
    zb = torch.ones((0, heads, width), dtype=dtype)
    assert edge_dot(pattern, za, zb).shape == (0, heads)
