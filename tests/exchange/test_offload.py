import copy
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from mpi4py import MPI

from hpcgnn.backend import Device, cpu, emulation
from hpcgnn.config import TrainConfig
from hpcgnn.grid import ProcessGrid
from hpcgnn.models.offload import OffloadModel, OffloadOptions
from tests.devices import assert_same_training, train_on_both_devices
from tests.models.reference import kind_settings
from tests.mpi import assert_all


@dataclass(frozen=True)
class RecordingDevice(Device):
    """The CPU device, logging the placement calls the offload tiers make."""

    log: list = field(default_factory=list, compare=False, hash=False)

    def pinned_empty(self, shape, dtype):
        self.log.append(("pinned_empty", tuple(np.atleast_1d(shape))))
        return super().pinned_empty(shape, dtype)

    def from_numpy(self, arr):
        self.log.append(("from_numpy", arr.shape))
        return super().from_numpy(arr)

    def to_host(self, t):
        self.log.append(("to_host", tuple(t.shape)))
        return super().to_host(t)


@pytest.mark.mpi
@pytest.mark.ranks(1, 4)  # 4: rows also cross between ranks
@pytest.mark.parametrize("dedup", ["none", "full"])  # owners' host buffers; transition buffers
def test_host_tier_is_pinned_and_rows_cross_through_the_device(graph_file, world, dedup):
    # CPU on purpose, whatever the suite's device: the recording device is the CPU device
    # with its placement calls logged, and its results must equal the plain CPU device's
    # (on the suite's cuda device the offload model runs in tests/models/test_offload.py)
    path = graph_file("tiers.h5", n=24, directed=True, seed=2, features=4, classes=2)
    cfg = TrainConfig(layers=2, hidden=3, dropout=0.3, dtype="float64", seed=2)
    runs = {}
    for dev in (cpu(), RecordingDevice()):
        with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=dev) as grid:
            model = OffloadModel.read(path, grid, cfg, OffloadOptions(3, dedup, False))
            if isinstance(dev, RecordingDevice):
                dev.log.clear()  # the passes only, not the set-up
            logits = model.forward_pass(0)
            grads = model.backward_pass(torch.ones_like(logits))
            runs[type(dev)] = (logits.clone(), [g.clone() for g in grads])
    log = dev.log
    n_own = len(logits)
    pinned = [shape for name, shape in log if name == "pinned_empty"]
    # the host tier: each layer's output and the hidden layer's gradient, all own rows
    assert_all(world, len(pinned) >= 3 and all(s[0] == n_own for s in pinned), str(pinned))
    names = {name for name, _ in log}
    assert_all(world, {"from_numpy", "to_host"} <= names, str(names))  # loads and flushes
    (ref_logits, ref_grads), (got_logits, got_grads) = runs[Device], runs[RecordingDevice]
    same = torch.equal(ref_logits, got_logits) and all(
        torch.equal(a, b) for a, b in zip(ref_grads, got_grads, strict=True))
    assert_all(world, same, "a recording device changed the result")


@pytest.mark.gpu
@pytest.mark.parametrize("dedup", ["none", "inter", "full"])
def test_cuda_offload_trains_like_the_cpu(graph_file, shared_tmp, world, dedup):
    path = graph_file("gpu.h5", n=90, avg_degree=5, seed=11)
    docs = train_on_both_devices(world, shared_tmp, [
        str(path), "--mode", "offload", "--chunks", "3", "--dedup", dedup, "--epochs", "3",
        "--hidden", "8", "--dropout", "0.5", "--threads", "1"])
    # measured host<->device bytes are the same rows on both devices, as the model says
    assert_same_training(docs, ("offload_h2d", "offload_d2h", "offload_d2d", "offload_ckpt"))


# -- HongTu's device paths (issue 43: in-place buffers, interleaved rounds, zero-copy) -------
def _epochs(path, dev, dedup, opts=None, epochs=2, exchange="p2p", tracing=False, kind="gcn"):
    """Forward and backward of ``epochs`` epochs: logits, weight gradients, model, stats."""
    cfg = TrainConfig(layers=2, hidden=5, dropout=0.3, dtype="float64", seed=5,
                      **kind_settings(kind))
    opts = OffloadOptions(3, dedup, False, exchange=exchange, **(opts or {}))
    with ProcessGrid.create(MPI.COMM_WORLD, "1d", device=dev) as grid:
        grid.world.stats.tracing = tracing
        model = OffloadModel.read(path, grid, cfg, opts)
        model.comm.stats.reset()
        out = []
        h2d = emulation.COUNTS["h2d"]
        for epoch in range(epochs):
            logits = model.forward_pass(epoch)
            grads = model.backward_pass(torch.ones_like(logits))
            out.append((logits.detach().cpu(), [g.detach().cpu() for g in grads]))
        model.h2d_copies = emulation.COUNTS["h2d"] - h2d  # the emulated GPU's transfers
        stats = model.comm.stats
        categories = copy.deepcopy(stats.categories)  # the epochs' (the report probes plans)
        model.report = model.exchange_report({}, {}, None)  # collective: while the grid lives
        return out, model, categories, stats.spans


def _same(a, b) -> bool:
    return all(torch.equal(la, lb) and all(torch.equal(x, y) for x, y in zip(ga, gb, strict=True))
               for (la, ga), (lb, gb) in zip(a, b, strict=True))


def _close(a, b, exact: bool) -> bool:
    if exact:
        return _same(a, b)
    return all(torch.allclose(la, lb, rtol=1e-9, atol=1e-12) and all(
        torch.allclose(x, y, rtol=1e-9, atol=1e-12) for x, y in zip(ga, gb, strict=True))
        for (la, ga), (lb, gb) in zip(a, b, strict=True))


def _exact_against_cpu(device, kind="gcn") -> bool:
    """Bit-identical to the CPU device: on the CPU, and GCN on the emulated GPU (host sums).

    The attention kernels of ``cuda/attention.cu`` round differently from the CPU's torch
    (within float64 rounding, as on a real GPU).
    """
    return not device.is_cuda or (device.emulated and kind != "gat")


@pytest.mark.mpi
@pytest.mark.parametrize("dedup,exchange,kind", [
    ("inter", "p2p", "gcn"), ("full", "p2p", "gcn"), ("full", "planned", "gcn"),
    ("full", "p2p", "gat"),
])
def test_in_place_buffers_give_todays_result_without_allocating_per_batch(
    graph_file, world, device, dedup, exchange, kind
):
    path = graph_file("inplace.h5", n=40, avg_degree=4, directed=True, seed=7, features=4,
                      classes=3)
    today, m0, cats0, _ = _epochs(path, device, dedup, {"in_place": False}, exchange=exchange,
                                  kind=kind)
    got, m1, cats1, _ = _epochs(path, device, dedup, {"in_place": True}, exchange=exchange,
                                kind=kind)
    assert_all(world, _same(today, got), "in-place buffers changed the result")
    bytes0 = {k: v.bytes for k, v in cats0.items() if k.startswith("offload_")}
    bytes1 = {k: v.bytes for k, v in cats1.items() if k.startswith("offload_")}
    assert_all(world, bytes0 == bytes1, f"{bytes0} != {bytes1}")
    # today: buffers per batch; in place: one per role (transition, two neighbour buffers,
    # their gradient twins) for the whole run, whatever the batches and epochs
    old, new = (m.exchange.allocated + m.reload.allocated for m in (m0, m1))
    assert_all(world, new <= 12 and old > 2 * new, f"allocations {old} today, {new} in place")
    _, m2, _, _ = _epochs(path, device, dedup, {"in_place": True}, epochs=4,
                          exchange=exchange, kind=kind)
    assert_all(world, m2.exchange.allocated + m2.reload.allocated == new,
               "in-place buffers were allocated again in later epochs")
    cpu_run, *_ = _epochs(path, cpu(), dedup, {"in_place": False}, exchange=exchange, kind=kind)
    exact = _exact_against_cpu(device, kind)
    assert_all(world, _close(cpu_run, got, exact), "differs from the CPU")


@pytest.mark.mpi
@pytest.mark.ranks(2, 3, 4)  # 3: uneven rounds
@pytest.mark.parametrize("dedup", ["inter", "full"])
def test_interleaved_rounds_move_the_same_bytes_to_the_same_result(graph_file, world, device,
                                                                    dedup):
    path = graph_file("rounds.h5", n=40, avg_degree=4, directed=True, seed=8, features=4,
                      classes=3)
    today, _, cats0, _ = _epochs(path, device, dedup, {}, tracing=True)
    got, model, cats1, spans = _epochs(path, device, dedup, {"interleave": True}, tracing=True)
    assert_all(world, _same(today, got), "interleaved rounds changed the result")
    d2d0, d2d1 = cats0["offload_d2d"], cats1["offload_d2d"]
    assert_all(world, d2d0.bytes == d2d1.bytes, f"bytes {d2d0.bytes} != {d2d1.bytes}")
    p = world.size
    # each all-to-allv of a batch became p - 1 sequential rounds, each a recorded call
    assert_all(world, d2d1.calls == (p - 1) * d2d0.calls, f"{d2d1.calls} vs {d2d0.calls}")
    names = {s.name for s in spans if s.name.startswith("offload_d2d.round")}
    want = {f"offload_d2d.round{r}" for r in range(1, p)}
    assert_all(world, names == want, f"{sorted(names)}")
    assert_all(world, model.report["rounds"] == p - 1, "report")


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 4)
@pytest.mark.parametrize("dedup", ["inter", "full"])
def test_zero_copy_loads_equal_the_cpu_path(graph_file, world, device, dedup):
    path = graph_file("zerocopy.h5", n=40, avg_degree=4, directed=True, seed=9, features=4,
                      classes=3)
    staged, m0, *_ = _epochs(path, device, dedup, {"in_place": True})
    got, m1, cats, _ = _epochs(path, device, dedup, {"zero_copy": True})
    h2d_staged, h2d_zero = m0.h2d_copies, m1.h2d_copies
    assert_all(world, _same(staged, got), "zero-copy loads changed the result")
    cpu_run, _, cpu_cats, _ = _epochs(path, cpu(), dedup, {"in_place": False})
    assert_all(world, _close(cpu_run, got, _exact_against_cpu(device)), "differs from the CPU")
    assert_all(world, cats["offload_h2d"].bytes == cpu_cats["offload_h2d"].bytes, "h2d bytes")
    if device.is_cuda and device.emulated:  # the kernel read the host rows: no copies for them
        assert_all(world, h2d_zero < h2d_staged, f"h2d copies {h2d_zero} vs {h2d_staged}")


@pytest.mark.mpi
@pytest.mark.ranks(1, 2, 3, 4)
@pytest.mark.parametrize("dedup,exchange,kind,paths", [
    ("inter", "p2p", "gcn", {}), ("inter", "planned", "gcn", {}), ("full", "p2p", "gcn", {}),
    ("full", "planned", "gcn", {}), ("full", "p2p", "gat", {}), ("full", "p2p", "sage", {}),
    ("full", "p2p", "gcn", {"interleave": True, "zero_copy": True}),
])
def test_merged_buffer_gives_the_separate_buffers_result_in_fewer_bytes(
    graph_file, world, device, dedup, exchange, kind, paths
):
    # HongTu's merged transition + neighbour buffer (issue 43 item 7): the chunk operators
    # read it with their columns renumbered, the edges in their order: the same sums
    path = graph_file("merged.h5", n=40, avg_degree=4, directed=True, seed=7, features=4,
                      classes=3)
    apart, m0, cats0, _ = _epochs(path, device, dedup, paths, exchange=exchange, kind=kind)
    got, m1, cats1, _ = _epochs(path, device, dedup, {**paths, "merged": True},
                                exchange=exchange, kind=kind)
    assert_all(world, _same(apart, got), "the merged buffer changed the result")
    bytes0 = {k: v.bytes for k, v in cats0.items() if k.startswith("offload_")}
    bytes1 = {k: v.bytes for k, v in cats1.items() if k.startswith("offload_")}
    assert_all(world, bytes0 == bytes1, f"{bytes0} != {bytes1}")
    # one buffer for T_ij and N_ij: the own neighbour rows are stored once
    b0, b1 = (m.exchange.buffer_bytes + m.reload.buffer_bytes for m in (m0, m1))
    lo, hi = m1.rows
    owned = any(np.any((t.neigh >= lo) & (t.neigh < hi)) for t in m1.exchange.tables)
    assert_all(world, b1 < b0 if owned else b1 <= b0, f"buffer bytes {b1} merged, {b0} apart")
    assert_all(world, m1.exchange.allocated < m0.exchange.allocated, "allocations")
    assert_all(world, m1.report["device_paths"]["merged"], "report")
    cpu_run, *_ = _epochs(path, cpu(), dedup, {}, exchange=exchange, kind=kind)
    assert_all(world, _close(cpu_run, got, _exact_against_cpu(device, kind)),
               "differs from the CPU")
