"""The emulated CUDA device: host tensors with a GPU's placement rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hpcgnn.backend import Device, emulation
from hpcgnn.backend.emulation import MixedDeviceError, emulated

GPU = Device("cuda", 0, emulated=True)


def test_device_tensors_look_like_cuda_tensors_and_never_share_host_memory():
    installed = emulation.is_active()  # for good, by an emulated test device
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    with emulated():
        t = GPU.from_numpy(host)
        assert t.is_cuda and t.device == torch.device("cuda", 0) and t.get_device() == 0
        host[0, 0] = 100.0  # a transfer is a copy
        assert float(t[0, 0]) == 0.0
        back = GPU.to_host(t)
        back[1, 1] = -1.0
        assert float(t[1, 1]) == 4.0
        with pytest.raises(TypeError, match="can't convert cuda:0"):
            t.numpy()
        z = torch.zeros((2, 3), device=GPU.torch_device)
        assert z.is_cuda and (t + z).is_cuda and t[0].is_cuda and t.T.contiguous().is_cuda
        assert not torch.zeros(3).is_cuda  # no device: host memory, as on a GPU machine
        moved = torch.ones(3).to("cuda")
        assert moved.is_cuda and not moved.cpu().is_cuda
        assert t.to(torch.float64).is_cuda and t.to(torch.float64).dtype == torch.float64
        host_like = torch.ones(2).to(t)  # .to(other): other's device and dtype
        assert host_like.is_cuda and host_like.dtype == torch.float32
        assert torch.ones(2).cuda().is_cuda and not t.to("cpu", copy=True).is_cuda
        assert t.to(device="cuda", non_blocking=True) is t  # already there: no copy
        pinned = GPU.pinned_empty((4,), torch.float32)
        assert pinned.is_pinned() and not pinned.is_cuda
    assert emulation.is_active() == installed


def test_mixing_host_and_device_raises_with_the_operation_and_the_line():
    with emulated():
        a = GPU.zeros((3, 2), torch.float32)
        b = torch.ones(3, 2)
        with pytest.raises(MixedDeviceError, match=r"aten\.add\.Tensor .*test_emulation\.py:\d+"):
            a + b
        assert (a + torch.tensor(2.0)).is_cuda  # a 0-dim host tensor is a scalar
        a[0:2] = b[0:2]  # copy_: the written transfer
        assert float(a.sum()) == 4.0


def test_modules_move_with_to_and_count_their_transfers():
    """``nn.Module.to`` sets ``param.data``: the parameter takes the placement it is given."""
    with emulated():
        before = dict(emulation.COUNTS)
        lin = torch.nn.Linear(3, 2).to("cuda")
        assert lin.weight.is_cuda and lin.bias.is_cuda
        y = lin(torch.ones(4, 3, device="cuda"))
        y.sum().backward()
        assert y.is_cuda and lin.weight.grad is not None and lin.weight.grad.is_cuda
        assert not lin.to("cpu").weight.is_cuda
        float(y.detach().sum())  # a scalar read waits on a GPU
        moved = {k: emulation.COUNTS[k] - before.get(k, 0) for k in ("h2d", "d2h", "scalar")}
        assert moved["h2d"] >= 2 and moved["d2h"] >= 2 and moved["scalar"] == 1, moved
        with pytest.raises(MixedDeviceError):
            lin(torch.ones(1, 3, device="cuda"))  # the module is back on the host


def test_backward_of_custom_functions_sees_the_device():
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            out = torch.zeros(g.shape, dtype=g.dtype, device=g.device)  # cuda, in a backward
            return out + 2 * g

    with emulated():
        x = GPU.from_numpy(np.ones(4, dtype=np.float64)).requires_grad_()
        Twice.apply(x).sum().backward()
        assert x.grad.is_cuda and GPU.to_host(x.grad).tolist() == [2.0] * 4


@pytest.mark.parametrize("kind", ["1d", "halo", "2d"])
def test_a_host_tensor_in_a_model_fails_naming_the_operation_and_line(graph_file, world, kind):
    from hpcgnn.config import TrainConfig
    from hpcgnn.grid import ProcessGrid
    from hpcgnn.models.block_row import BlockRowGCN
    from hpcgnn.models.halo import HaloGCN
    from hpcgnn.models.summa import GridGCN

    model_class = {"1d": BlockRowGCN, "halo": HaloGCN, "2d": GridGCN}[kind]
    path = graph_file(n=40, seed=3)
    cfg = TrainConfig(layers=2, hidden=4, dropout=0.0)
    grid_kind = "1d" if kind == "halo" else kind
    with emulated(), ProcessGrid.create(world.mpi, grid_kind, device=GPU) as grid:
        model = model_class.read(path, grid, cfg)
        model.logits(None)  # on the device: fine
        model.x = torch.from_numpy(GPU.to_host(model.x).copy())  # a host copy sneaks in
        with pytest.raises(MixedDeviceError, match=r"aten\.\w+.* at .*hpcgnn/.*\.py:\d+"):
            model.logits(None)
