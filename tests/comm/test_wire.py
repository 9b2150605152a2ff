"""The wire: one code path for every message, only the placement of MPI's memory differs.

``HPCGNN_CUDA_AWARE_MPI=0`` stages every buffer through host staging buffers, so the CPU
runs the staged path: its results and counted bytes must equal the direct path's.
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
from hpcgnn.comm.wire import StagingPool, Wire, cuda_aware_setting
from hpcgnn.errors import ConfigError
from tests.mpi import assert_all


@pytest.mark.parametrize(
    ("value", "setting", "path"),
    [(None, None, "direct"), ("", None, "direct"), ("1", True, "direct"), ("0", False, "staged")],
)
def test_environment_decides_the_cpu_path(monkeypatch, value, setting, path):
    if value is None:
        monkeypatch.delenv("HPCGNN_CUDA_AWARE_MPI", raising=False)
    else:
        monkeypatch.setenv("HPCGNN_CUDA_AWARE_MPI", value)
    assert cuda_aware_setting() is setting
    wire = Wire.detect(cpu())
    assert wire.path == path
    assert wire.path_of(np.zeros(3)) == path == wire.path_of(torch.zeros(3))


def test_a_bad_setting_is_one_line(monkeypatch):
    monkeypatch.setenv("HPCGNN_CUDA_AWARE_MPI", "banana")
    with pytest.raises(ConfigError, match="HPCGNN_CUDA_AWARE_MPI must be 0 or 1, not 'banana'"):
        Wire.detect(cpu())


def test_staging_buffers_are_reused():
    pool = StagingPool(cpu())
    a = pool.take(10)
    assert a.numel() == 4096 and pool.allocated == 1
    pool.give(a)
    assert pool.take(4000) is a and pool.allocated == 1
    b = pool.take(5000)
    assert b.numel() == 8192 and pool.allocated == 2
    pool.give(b)
    pool.give(a)
    assert pool.take(0) is a  # the smallest that fits


def _exercise(comm: Comm, kind: str) -> list[np.ndarray]:
    """Every buffer call of ``Comm`` once; the results as arrays."""
    r, p = comm.rank, comm.size

    def buf(arr: np.ndarray):
        return torch.from_numpy(arr) if kind == "torch" else arr

    def arr(x) -> np.ndarray:
        return x.numpy() if isinstance(x, torch.Tensor) else x

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
def test_staged_and_direct_paths_agree(world, kind):
    staged = Comm(MPI.COMM_WORLD.Dup(), owned=True, wire=Wire(cpu(), stage_host=True))
    try:
        want = _exercise(world, kind)
        got = _exercise(staged, kind)
        pairs = zip(want, got, strict=True)
        same = all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in pairs)
        assert_all(world, same, "staged results differ from direct ones")
        bytes_of = {k: v["bytes"] for k, v in world.stats.snapshot().items()}
        assert_all(world, bytes_of == {k: v["bytes"] for k, v in staged.stats.snapshot().items()})
        assert_all(world, set(world.stats.paths) == set(staged.stats.paths))
        assert_all(world, all(v == {"direct"} for v in world.stats.paths.values()))
        assert_all(world, all(v == {"staged"} for v in staged.stats.paths.values()))
        assert_all(world, sum(world.stats.staged.values()) == 0 < sum(staged.stats.staged.values()))
        assert_all(world, not staged._pending and staged.wire.pool.allocated <= 4)
    finally:
        staged.free()


def _train(graph, out, flags) -> dict:
    rc = main(["train", str(graph), "--epochs", "2", "--hidden", "4", "--seed", "3",
               "--threads", "1", "--quiet", "--eval-every", "0", "--metrics", str(out), *flags])
    assert_all(MPI.COMM_WORLD, rc == 0, f"hpcgnn train exited {rc}")
    return json.loads(out.read_text())


@pytest.mark.mpi
@pytest.mark.ranks(1, 2)
@pytest.mark.parametrize("flags", [["--algo", "1d"], ["--algo", "halo", "--exchange", "planned"]])
def test_forced_staging_trains_the_same_model(graph_file, shared_tmp, monkeypatch, flags):
    graph = graph_file(n=30, seed=2)
    monkeypatch.delenv("HPCGNN_CUDA_AWARE_MPI", raising=False)
    direct = _train(graph, shared_tmp / "direct.json", flags)
    monkeypatch.setenv("HPCGNN_CUDA_AWARE_MPI", "0")
    staged = _train(graph, shared_tmp / "staged.json", flags)
    assert staged["params_sha256"] == direct["params_sha256"]
    assert staged["comm"]["measured_bytes"] == direct["comm"]["measured_bytes"]
    assert (direct["comm"]["path"], staged["comm"]["path"]) == ("direct", "staged")
    assert set(staged["comm"]["paths"].values()) == {"staged"}
    assert direct["comm"]["staged_bytes"] == 0 < staged["comm"]["staged_bytes"]
    assert direct["device"] == staged["device"] == {"kind": "cpu"}
