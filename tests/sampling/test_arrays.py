"""The samplers on the emulated GPU: the same samples as on the host, held on the device.

:mod:`hpcgnn.sampling.arrays` runs one algorithm on NumPy arrays or on device tensors; on
the emulated device (``HPCGNN_EMULATE_CUDA``'s, the ``.cu`` kernels built for the host)
every hop must equal the host's bit for bit, and stay in device memory.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hpcgnn.backend import emulation
from hpcgnn.sampling import bulk
from hpcgnn.sampling.arrays import HOST, ops
from hpcgnn.sampling.bulk import sample_depth_first, sample_stack
from hpcgnn.sampling.spec import SamplerSpec
from tests.sampling import random_adjacency, same_batches, store_of

CASES = [("sage", (4, 3)), ("ladies", (12, 8)), ("sage", (30, 30))]


def _stack(sampler: str, sizes: tuple[int, ...], directed: bool = False):
    store = store_of(random_adjacency(200, 5.0, seed=7, directed=directed), sampler)
    spec = SamplerSpec(sampler, sizes, batch_size=9, bulk=8, seed=3)
    ids, seeds = list(range(5, 13)), [np.arange(9 * i, 9 * i + 9) * 2 for i in range(8)]
    return store, spec, ids, seeds


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize(("sampler", "sizes"), CASES)
def test_the_device_samples_what_the_host_samples(sampler, sizes, directed):
    store, spec, ids, seeds = _stack(sampler, sizes, directed)
    want = sample_stack(spec, 2, ids, seeds, lambda _ids: store)
    with emulation.emulated():
        on = store.on(torch.device("cuda"))
        assert emulation.device_index(on.indices) == 0
        got = sample_stack(spec, 2, ids, seeds, lambda _ids: on)
        hop = got[0].hops[-1]
        assert hop.on_device and all(
            emulation.device_index(a) == 0
            for a in (hop.rows, hop.cols, hop.indptr, hop.indices, hop.values)
        )
        assert same_batches([b.on_host() for b in got], want)


@pytest.mark.parametrize(("sampler", "sizes"), CASES[:2])
def test_chunks_and_groups_on_the_device_give_the_stack(monkeypatch, sampler, sizes):
    store, spec, ids, seeds = _stack(sampler, sizes)
    want = sample_stack(spec, 2, ids, seeds, lambda _ids: store)
    with emulation.emulated():
        on = store.on(torch.device("cuda"))
        for limit in (1, 300):
            monkeypatch.setattr(bulk, "MAX_STACK_ENTRIES", limit)
            stacked = sample_stack(spec, 2, ids, seeds, lambda _ids: on)
            groups = [b for g in sample_depth_first(spec, 2, ids, seeds, on) for b in g]
            assert same_batches([b.on_host() for b in stacked], want), limit
            assert same_batches([b.on_host() for b in groups], want), limit


def test_a_device_hop_is_a_csr_tensor_there_and_the_host_copy_is_scipy():
    store, spec, ids, seeds = _stack("sage", (4, 3))
    with emulation.emulated():
        on = store.on(torch.device("cuda"))
        hop = sample_stack(spec, 2, ids, seeds, lambda _ids: on)[3].hops[1]
        m = hop.matrix(np.float32)
        assert m.layout == torch.sparse_csr and m.dtype == torch.float32 and m.is_cuda
        dense = m.to_dense().cpu().numpy()
    assert np.array_equal(dense, hop.on_host().matrix(np.float32).toarray())


def test_ops_choose_numpy_for_arrays_and_the_device_for_tensors():
    assert ops(np.zeros(2)) is HOST
    with emulation.emulated():
        xp = ops(torch.zeros(2, device="cuda"))
        assert xp is not HOST and xp.device.type == "cuda"
        x = xp.asarray(np.array([3, 1, 2]))
        assert emulation.device_index(x) == 0
        assert np.array_equal(xp.to_host(xp.sort(x)), [1, 2, 3])


@pytest.mark.parametrize("eps", [0.25, -1.0])
def test_the_gin_and_gat_block_is_sum_blocks_on_the_host_and_the_device(eps):
    from hpcgnn.graph.normalize import sum_block
    from hpcgnn.sampling.sampled import SampledHop

    # row 1 sampled itself (a self loop in the graph): its diagonal entry sums 1 + (1 + eps)
    hop = SampledHop(rows=np.array([7, 3, 9]), cols=np.array([7, 3, 9, 1, 4]),
                     indptr=np.array([0, 2, 5, 5]), indices=np.array([1, 4, 0, 1, 3]),
                     values=np.full(5, 0.5))
    want = sum_block(hop.matrix(np.float32), 0, 1.0 + eps, np.float32)
    got = hop.sum_matrix(1.0 + eps, np.float32)
    for f in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f
    with emulation.emulated():
        on = SampledHop(*(torch.from_numpy(a).to("cuda") for a in (
            hop.rows, hop.cols, hop.indptr, hop.indices, hop.values)))
        dev = on.sum_matrix(1.0 + eps, np.float32)
        assert dev.layout == torch.sparse_csr and emulation.device_index(dev.values()) == 0
        dense = dev.to_dense().cpu().numpy()
    assert np.array_equal(dense, want.toarray())
