"""The wire: one code path for every message, only the placement of MPI's memory differs.

``HPCGNN_CUDA_AWARE_MPI=0`` stages every buffer through host staging buffers, so the CPU
runs the staged path: its results and counted bytes must equal the direct path's. On the
suite's cuda device the reference is the device's own wire (CUDA-aware, or staged where
MPI does not say it takes device buffers); host buffers go direct on either device.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from mpi4py import MPI

from hpcgnn.backend import cpu
from hpcgnn.cli.main import main
from hpcgnn.comm import Comm
from hpcgnn.comm.wire import StagingPool, Wire, cuda_aware_setting, library_cuda_aware
from hpcgnn.errors import ConfigError
from tests.mpi import assert_all


@pytest.mark.parametrize(
    ("value", "setting", "path"),
    [(None, None, "direct"), ("", None, "direct"), ("1", True, "direct"), ("0", False, "staged")],
)
def test_environment_decides_the_cpu_path(monkeypatch, value, setting, path):
    # the CPU device on purpose: the paths of host buffers on a host wire (the cuda
    # device's are test_environment_decides_the_device_path's)
    if value is None:
        monkeypatch.delenv("HPCGNN_CUDA_AWARE_MPI", raising=False)
    else:
        monkeypatch.setenv("HPCGNN_CUDA_AWARE_MPI", value)
    assert cuda_aware_setting() is setting
    wire = Wire.detect(cpu())
    assert wire.path == path
    assert wire.path_of(np.zeros(3)) == path == wire.path_of(torch.zeros(3))


@pytest.mark.parametrize("value", [None, "1", "0"])
def test_environment_decides_the_device_path(monkeypatch, device, value):
    """On the suite's device: its buffers' path, and host buffers' beside them."""
    if value is None:
        monkeypatch.delenv("HPCGNN_CUDA_AWARE_MPI", raising=False)
    else:
        monkeypatch.setenv("HPCGNN_CUDA_AWARE_MPI", value)
    wire = Wire.detect(device)
    host = "staged" if value == "0" else "direct"
    if device.is_cuda:
        aware = {None: library_cuda_aware(), "1": True, "0": False}[value]
        path = "cuda-aware" if aware else "staged"
    else:
        path = host
    assert wire.path == path == wire.path_of(device.zeros(3, torch.float32))
    assert wire.path_of(np.zeros(3)) == host == wire.path_of(torch.zeros(3))


@pytest.mark.parametrize(
    "query,kinds,env,expected",
    [
        (True, None, {}, (True, "MPIX_Query_cuda_support")),
        (False, None, {"MPICH_GPU_SUPPORT_ENABLED": "1"}, (False, "MPIX_Query_cuda_support")),
        (None, "system,cuda:implicit", {}, (True, "mpi_memory_alloc_kinds=system,cuda:implicit")),
        (None, "system", {"MPICH_GPU_SUPPORT_ENABLED": "1"},
         (True, "MPICH_GPU_SUPPORT_ENABLED=1")),
        (None, None, {"OMPI_MCA_opal_cuda_support": "TRUE"},
         (True, "OMPI_MCA_opal_cuda_support=true")),
        (None, None, {}, (False, "the library has no CUDA query")),
    ],
)
def test_cuda_support_is_asked_of_the_library_first(monkeypatch, query, kinds, env, expected):
    """The library's own answer, else the memory kinds, else a vendor's variable, else no."""
    from mpi4py import MPI

    from hpcgnn.comm import wire

    if query is None:
        monkeypatch.delattr(MPI, "Query_cuda_support", raising=False)
    else:
        monkeypatch.setattr(MPI, "Query_cuda_support", lambda: query, raising=False)

    class _Info:
        def Get(self, key):
            return kinds

    class _World:
        def Get_info(self):
            return _Info()

    monkeypatch.setattr(MPI, "COMM_WORLD", _World())
    for name, _ in wire.VENDOR_GPU_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    wire.library_cuda_support.cache_clear()
    try:
        aware, reason = wire.library_cuda_support()
    finally:
        wire.library_cuda_support.cache_clear()
    assert aware == expected[0] and reason.startswith(expected[1])


def test_a_bad_setting_is_one_line(monkeypatch, device):
    monkeypatch.setenv("HPCGNN_CUDA_AWARE_MPI", "banana")
    with pytest.raises(ConfigError, match="HPCGNN_CUDA_AWARE_MPI must be 0 or 1, not 'banana'"):
        Wire.detect(device)


def test_staging_buffers_are_reused(device):
    pool = StagingPool(device)
    a = pool.take(10)
    assert a.numel() == 4096 and pool.allocated == 1
    assert a.device.type == "cpu" and a.is_pinned() == device.is_cuda  # host, page-locked
    pool.give(a)
    assert pool.take(4000) is a and pool.allocated == 1
    b = pool.take(5000)
    assert b.numel() == 8192 and pool.allocated == 2
    pool.give(b)
    pool.give(a)
    assert pool.take(0) is a  # the smallest that fits


def _exercise(comm: Comm, kind: str) -> list[np.ndarray]:
    """Every buffer call of ``Comm`` once; the results as host arrays.

    ``kind``: ``"torch"``, tensors on the communicator's device; ``"numpy"``, host arrays.
    """
    r, p = comm.rank, comm.size
    dev = comm.device

    def buf(arr: np.ndarray):
        return dev.from_numpy(arr) if kind == "torch" else arr

    def arr(x) -> np.ndarray:
        return dev.to_host(x) if isinstance(x, torch.Tensor) else x

    b = buf(np.full((2, 3), float(r)))
    comm.bcast(b, p - 1, "bcast")
    a = buf(np.arange(6.0).reshape(2, 3) * (r + 1))
    comm.allreduce(a, "allreduce")
    rs = comm.reduce_scatter(buf(np.ones((2 * p, 2)) * r), [2] * p, "reduce_scatter")
    ag = comm.allgatherv(buf(np.full((r + 1, 2), r, dtype=np.int64)), "allgatherv")
    send = buf(np.repeat(np.arange(p, dtype=np.float32), 2).reshape(p, 2) + 10 * r)
    av, counts = comm.alltoallv(send, np.ones(p, dtype=np.int64), "alltoallv")
    got = buf(np.zeros(4, dtype=np.float64))
    out = buf(np.full(4, float(r)))
    reqs = [comm.irecv(got, (r - 1) % p), comm.isend(out, (r + 1) % p)]
    comm.complete(reqs, [got], "p2p")
    return [arr(x) for x in (b, a, rs, ag, av, counts, got)]


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_staged_and_direct_paths_agree(world, device, kind):
    # the reference: the device's own wire (CPU: direct); against it, every buffer staged
    ref = Comm(MPI.COMM_WORLD.Dup(), owned=True, device=device)
    staged = Comm(MPI.COMM_WORLD.Dup(), owned=True, device=device,
                  wire=Wire(device, stage_host=True))
    try:
        want = _exercise(ref, kind)
        got = _exercise(staged, kind)
        pairs = zip(want, got, strict=True)
        same = all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in pairs)
        assert_all(world, same, "staged results differ from direct ones")
        bytes_of = {k: v["bytes"] for k, v in ref.stats.snapshot().items()}
        assert_all(world, bytes_of == {k: v["bytes"] for k, v in staged.stats.snapshot().items()})
        assert_all(world, set(ref.stats.paths) == set(staged.stats.paths))
        # host arrays go direct, the alltoallv's counts ("control") included
        path = ref.wire.path if kind == "torch" else "direct"
        paths = {k: {"direct" if k == "control" else path} for k in ref.stats.paths}
        assert_all(world, ref.stats.paths == paths, f"{ref.stats.paths} != {paths}")
        assert_all(world, all(v == {"staged"} for v in staged.stats.paths.values()))
        ref_staged = sum(ref.stats.staged.values())
        assert_all(world, (ref_staged == 0) == (path != "staged"), f"staged bytes {ref_staged}")
        assert_all(world, 0 < sum(staged.stats.staged.values()))
        assert_all(world, not staged._pending and staged.wire.pool.allocated <= 4)
    finally:
        staged.free()
        ref.free()


def _train(graph, out, flags) -> dict:
    rc = main(["train", str(graph), "--epochs", "2", "--hidden", "4", "--seed", "3",
               "--threads", "1", "--quiet", "--eval-every", "0", "--metrics", str(out), *flags])
    assert_all(MPI.COMM_WORLD, rc == 0, f"hpcgnn train exited {rc}")
    return json.loads(out.read_text())


@pytest.mark.mpi
@pytest.mark.ranks(1, 2)
@pytest.mark.parametrize("flags", [["--algo", "1d"], ["--algo", "halo", "--exchange", "planned"]])
def test_forced_staging_trains_the_same_model(
    graph_file, shared_tmp, monkeypatch, device, flags
):
    # ``hpcgnn train`` runs on the suite's device ($HPCGNN_DEVICE, see tests/conftest.py)
    graph = graph_file(n=30, seed=2)
    monkeypatch.delenv("HPCGNN_CUDA_AWARE_MPI", raising=False)
    path = Wire.detect(device).path  # unforced: direct on the CPU, CUDA-aware or staged on a GPU
    direct = _train(graph, shared_tmp / "direct.json", flags)
    monkeypatch.setenv("HPCGNN_CUDA_AWARE_MPI", "0")
    staged = _train(graph, shared_tmp / "staged.json", flags)
    assert staged["params_sha256"] == direct["params_sha256"]
    assert staged["comm"]["measured_bytes"] == direct["comm"]["measured_bytes"]
    assert (direct["comm"]["path"], staged["comm"]["path"]) == (path, "staged")
    assert set(staged["comm"]["paths"].values()) == {"staged"}
    assert (direct["comm"]["staged_bytes"] == 0) == (path != "staged")
    assert 0 < staged["comm"]["staged_bytes"]
    assert direct["device"] == staged["device"]
    assert direct["device"]["kind"] == device.kind
    if not device.is_cuda:  # and how many cores its ranks had
        assert direct["device"]["kind"] == "cpu" and "name" not in direct["device"]


@pytest.mark.parametrize("aware", [True, False])
def test_a_pairs_method_picks_the_path_of_its_device_buffers(device, aware):
    """DGCL 6.2: ``host-staged`` pairs go through pinned host memory even where MPI takes
    device buffers; ``ipc`` and ``nic`` pairs take the wire's path; host buffers go as
    always, whatever the method."""
    wire = Wire(device, cuda_aware=aware)
    device_path = ("cuda-aware" if aware else "staged") if device.is_cuda else "direct"
    assert wire.method_path("ipc") == wire.method_path("nic") == device_path == wire.path
    assert wire.method_path("host-staged") == ("staged" if device.is_cuda else "direct")
    assert wire.path_of(np.zeros(3), "host-staged") == "direct"
    assert wire.transfer("nic").method == "nic" and wire.transfer().method is None
    if device.is_cuda:
        buf = device.zeros(4, torch.float32)
        t = wire.transfer("host-staged")
        host = t.read(buf)
        assert t.path == "staged" and isinstance(host, np.ndarray) and t.staged_bytes == 16
        t.finish()
