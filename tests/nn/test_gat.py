"""GAT's attention dropout: one decision per global (destination, source, head)."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from hpcgnn.kernels.attention import edge_pattern
from hpcgnn.nn.gat import AttentionDrop


def test_a_gist_sub_gat_draws_the_global_models_decisions_of_its_heads():
    a = sp.random(11, 11, density=0.3, random_state=1, format="csr") + sp.eye(11)
    pattern = edge_pattern(a.tocsr(), np.arange(11), np.arange(11), "cpu", torch.float64)
    whole = AttentionDrop(0.5, seed=3, epoch=2).keep(1, pattern, 5)  # K = 5 heads
    assert whole.shape == (pattern.edges, 5) and 0 < float(whole.double().mean()) < 1
    mine = np.array([1, 3, 4])  # a sub-GAT of global heads 1, 3, 4
    sub = AttentionDrop(0.5, seed=3, epoch=2, heads=lambda layer: (5, mine))
    assert torch.equal(sub.keep(1, pattern, 3), whole[:, mine])
    # and a SUMMA process of that sub-GAT holding its heads 0 and 2 (global 1 and 4)
    assert torch.equal(sub.keep(1, pattern, 3, [0, 2]), whole[:, [1, 4]])
    # a layer whose heads are all the model's (the output layer: None) is as without
    both = AttentionDrop(0.5, seed=3, epoch=2, heads=lambda layer: None)
    assert torch.equal(both.keep(1, pattern, 5), whole)


def _reference(pattern, z, s_dst, s_src, keep, p, g):
    """GAT's attention and its gradients the plain way: ``x[idx]`` gathers, the keep
    decisions of the expanded (edge, head) pairs, the SDDMM as a product and a sum."""
    from hpcgnn.kernels.attention import NEGATIVE_SLOPE, segment_sum
    from hpcgnn.kernels.spmm import spmm

    row, col, heads = pattern.row, pattern.col, z.shape[1]
    t = s_dst[row] + s_src[col]
    e = torch.nn.functional.leaky_relu(t, NEGATIVE_SLOPE)
    top = torch.segment_reduce(e, "max", lengths=pattern.crow.diff(), axis=0, unsafe=True,
                               initial=-torch.inf)
    top = torch.nan_to_num(top, nan=0.0, posinf=0.0, neginf=0.0)
    ex = torch.exp(e - top[row])
    alpha = ex / segment_sum(pattern, ex)[row]
    used = alpha if keep is None else alpha * keep / (1.0 - p)
    out = torch.stack([spmm(pattern.matrix(used[:, k].contiguous()), z[:, k].contiguous())
                       for k in range(heads)], dim=1)
    dz = torch.stack([spmm(pattern.transposed(used[:, k].contiguous()), g[:, k].contiguous())
                      for k in range(heads)], dim=1)
    d_alpha = (g[row] * z[col]).sum(dim=2)
    if keep is not None:
        d_alpha = d_alpha * keep / (1.0 - p)
    de = alpha * (d_alpha - (g * out).sum(dim=2)[row])
    dt = torch.where(t > 0, de, de * NEGATIVE_SLOPE)
    return out, dz, segment_sum(pattern, dt), segment_sum(pattern, dt, transposed=True)


def _bits(x):
    return x.contiguous().view(torch.uint8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("heads", [1, 2, 3, 4])
@pytest.mark.parametrize("p", [None, 0.4])
def test_attention_equals_the_unfused_reference_bit_for_bit(dtype, heads, p):
    """Coefficients, dropout, aggregation and gradients: the reference's bits, on a pattern
    with isolated vertices (only the self-loop), rows of one edge and an empty row."""
    from hpcgnn.kernels.dropout import keep_pairs
    from hpcgnn.nn.gat import attend, attend_backward
    from hpcgnn.rng import TAG_ATTENTION, stream_key

    n, width = 23, 4
    a = sp.random(n, n, density=0.2, random_state=heads, format="lil")
    a[3], a[7] = 0, 0  # isolated but for the self-loop
    a[11, :] = 0
    a[11, 2] = 1  # one edge and the self-loop
    a = (a.tocsr() + sp.eye(n)).tolil()
    a[16] = 0  # a row without edges (a split row's share)
    a = a.tocsr()
    a.eliminate_zeros()
    pattern = edge_pattern(a, np.arange(n) + 100, np.arange(n) * 3, "cpu", dtype)
    rng = np.random.default_rng(heads)
    z, g = (torch.from_numpy(rng.standard_normal((n, heads, width))).to(dtype) for _ in "zg")
    g[::3] = 0.0  # rows outside the loss: zero gradients
    s_dst, s_src = (torch.from_numpy(rng.standard_normal((n, heads))).to(dtype) for _ in "ds")
    keep = None
    if p is not None:
        keep = AttentionDrop(p, seed=4, epoch=1).keep(0, pattern, heads)
        pairs_r = pattern.row_ids[pattern.row][:, None].expand(-1, heads).reshape(-1)
        pairs_c = pattern.col_ids[pattern.col][:, None] * heads + torch.arange(heads)
        key = stream_key(4, TAG_ATTENTION, 1, 0)
        assert torch.equal(keep, keep_pairs(key, pairs_r, pairs_c.reshape(-1), p)
                           .reshape(-1, heads))
    want = _reference(pattern, z, s_dst, s_src, keep, p or 0.0, g)
    out, saved = attend(pattern, z, s_dst, s_src, keep, p or 0.0)
    got = (out, *attend_backward(pattern, z, saved, out, g, keep, p or 0.0))
    for x, y in zip(got, want, strict=True):
        assert x.shape == y.shape and torch.equal(_bits(x), _bits(y))
