from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from mpi4py import MPI

from hpcgnn.backend import Device, cpu
from hpcgnn.config import TrainConfig
from hpcgnn.grid import ProcessGrid
from hpcgnn.models.offload import OffloadModel, OffloadOptions
from tests.devices import assert_same_training, train_on_both_devices
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
