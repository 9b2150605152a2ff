"""The host build itself: the kernel table, argument checks, thread orders, grid caps, the
disk cache, the loader's emulated path, the sanitizer run and a launch past 2^31 elements."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from hpcgnn.backend import emulation
from hpcgnn.errors import ConfigError
from hpcgnn.kernels import cuda_modules as cm
from hpcgnn.kernels import host_build, rows
from hpcgnn.kernels.host_build import LaunchSettings, launch_settings
from hpcgnn.rng import column_key, dropout_keep, dropout_key, keep_threshold
from hpcgnn.utils.memory import available_bytes
from tests.kernels.host import host, need_compiler, poisoned, same_bytes
from tests.kernels.test_cuda_modules import EXTERN_C

REPO = Path(__file__).resolve().parents[2]

#: A kernel that records the order its threads ran in, and the grid it saw.
RECORDER = """
extern "C" __global__ void record(long long* order, long long* next, unsigned* grid) {
    const long long block = (long long)blockIdx.z * gridDim.y * gridDim.x
                            + (long long)blockIdx.y * gridDim.x + blockIdx.x;
    const long long thread = (long long)threadIdx.z * blockDim.y * blockDim.x
                             + (long long)threadIdx.y * blockDim.x + threadIdx.x;
    order[(*next)++] = block * blockDim.x * blockDim.y * blockDim.z + thread;
    grid[0] = gridDim.x;
}
"""


@pytest.fixture
def sources(tmp_path, monkeypatch):
    """A fresh folder of sources (``$HPCGNN_CUDA_DIR``) with the host headers, and its
    own build folder; ``sources(name, text)`` adds a source."""
    folder = tmp_path / "cuda"
    shutil.copytree(cm.cuda_dir() / "host", folder / "host")
    monkeypatch.setenv(cm.CUDA_DIR_ENV, str(folder))
    monkeypatch.setenv(host_build.BUILD_DIR_ENV, str(tmp_path / "build"))

    def add(name: str, text: str) -> Path:
        (folder / name).write_text(textwrap.dedent(text))
        return folder / name

    return add


def _recorded(grid, block, settings: LaunchSettings) -> tuple[np.ndarray, int]:
    """The thread order and ``gridDim.x`` of one launch of ``record``."""
    total = int(np.prod(grid)) * int(np.prod(block))
    order = np.full(total, -1, dtype=np.int64)
    next_, seen = np.zeros(1, np.int64), np.zeros(1, np.uint32)
    with launch_settings(settings):
        host("order.cu").launch("record", grid, block, (order, next_, seen))
    return order[: int(next_[0])], int(seen[0])


def test_every_kernel_the_loader_launches_is_in_the_build():
    folder = cm.cuda_dir()
    for src in sorted(p.name for p in folder.glob("*.cu")):
        want = {*cm.NAME_EXPRESSIONS.get(src, ()), *EXTERN_C.get(src, ())}
        assert set(host(src).names) == want, src
    assert host("rows.cu").signature("gather_rows<float, int>") == ("*f4", "*i4", "*f4", "i8", "i8")
    packed = host("rows.cu").signature("gather_rows<hpcgnn_vec16<double>, int>")
    assert packed == ("*f8", "*i4", "*f8", "i8", "i8")  # a pack: its values' kind
    assert host("dropout.cu").signature("hash_keep")[4:] == ("u8", "u8", "u8", "*b1")


def test_arguments_are_checked_against_the_parameters():
    module = host("rows.cu")
    x, idx, out = np.zeros((4, 2), np.float32), np.zeros(3, np.int32), np.zeros((3, 2), np.float32)
    name = "gather_rows<float, int>"
    module.launch(name, 1, 32, (x, idx, out, np.int64(3), np.int64(2)))
    wrong = {
        "np.int32 for long long": (x, idx, out, np.int32(3), np.int64(2)),
        "np.uint64 for long long": (x, idx, out, np.uint64(3), np.int64(2)),
        "a Python int": (x, idx, out, 3, np.int64(2)),
        "int64 ids for int*": (x, idx.astype(np.int64), out, np.int64(3), np.int64(2)),
        "float64 rows for float*": (x.astype(np.float64), idx, out, np.int64(3), np.int64(2)),
        "a scalar for a pointer": (np.float32(0), idx, out, np.int64(3), np.int64(2)),
        "an array for a scalar": (x, idx, out, np.array([3]), np.int64(2)),
        "too few": (x, idx, out, np.int64(3)),
    }
    for why, args in wrong.items():
        with pytest.raises(TypeError, match=r"gather_rows<float, int>"):
            module.launch(name, 1, 32, args)
            pytest.fail(why)
    with pytest.raises(ValueError, match="contiguous"):
        module.launch(name, 1, 32, (x.T, idx, out, np.int64(3), np.int64(2)))
    with pytest.raises(KeyError, match="scatter_add_atomic"):
        module.launch("scatter_add_atomic<float, int>", 1, 32, ())
    ids = torch.tensor([3, 0, 3], dtype=torch.int32)  # tensors pass their address
    rows_in = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    module.launch(name, 1, 32, (rows_in, ids, out, np.int64(3), np.int64(2)))
    assert out.tolist() == [[6, 7], [0, 1], [6, 7]]


@pytest.mark.parametrize(
    ("grid", "block"), [(0, 32), ((1, 0), 32), (1, 0), (1, 2048), (1, (32, 64)), (2**31, 1)]
)
def test_launches_a_gpu_would_refuse_are_refused(grid, block):
    one = np.zeros(1, np.int64)
    args = (one, one, one, one, np.int64(0), one)
    with pytest.raises(ValueError, match=r"grid|block"):
        host("csr.cu").launch("gather_ranges<long long>", grid, block, args)


def test_thread_orders_and_the_grid_cap(sources):
    sources("order.cu", RECORDER)
    natural, seen = _recorded(5, 7, LaunchSettings())
    assert natural.tolist() == list(range(35)) and seen == 5
    backwards, _ = _recorded(5, 7, LaunchSettings("reversed"))
    assert backwards.tolist() == list(range(35))[::-1]
    shuffled, _ = _recorded(5, 7, LaunchSettings("shuffled", seed=1))
    assert sorted(shuffled) == list(range(35)) and shuffled.tolist() != natural.tolist()
    again, _ = _recorded(5, 7, LaunchSettings("shuffled", seed=1))
    other, _ = _recorded(5, 7, LaunchSettings("shuffled", seed=2))
    assert np.array_equal(again, shuffled) and not np.array_equal(other, shuffled)
    big, _ = _recorded(1000, 257, LaunchSettings("shuffled", seed=3))  # cycle-walked
    assert np.array_equal(np.sort(big), np.arange(257000))
    capped, seen = _recorded(5, 7, LaunchSettings("reversed", max_blocks=2))
    assert capped.tolist() == list(range(14))[::-1] and seen == 2  # gridDim reports the cap
    three_d, _ = _recorded((2, 3, 2), (4, 2, 3), LaunchSettings())
    assert three_d.tolist() == list(range(12 * 24))
    shuffled_3d, _ = _recorded((2, 3, 2), (4, 2, 3), LaunchSettings("shuffled"))
    assert sorted(shuffled_3d) == list(range(12 * 24))


@pytest.mark.parametrize(
    ("what", "body"),
    [
        ("__syncthreads", "__syncthreads();"),
        ("shared_memory", "__shared__ float cache[32]; out[0] = cache[0];"),
        ("constant_memory", "static __constant__ float table[4]; out[0] = table[0];"),
        ("warpSize", "out[0] = warpSize;"),
        ("__shfl_down_sync", "out[0] = __shfl_down_sync(0xffffffffu, out[0], 1);"),
        ("atomicCAS", "atomicCAS((int*)out, 0, 1);"),
    ],
)
def test_what_a_sequential_loop_cannot_run_does_not_compile(sources, what, body):
    sources("bad.cu", f'extern "C" __global__ void bad(float* out) {{ {body} }}\n')
    need_compiler()
    with pytest.raises(RuntimeError, match=f"host build of bad.cu failed(.|\n)*{what}"):
        host_build.module("bad.cu")


def test_builds_are_cached_by_content_and_safe_to_race(sources, tmp_path):
    sources("order.cu", RECORDER)
    need_compiler()
    code = (
        "from hpcgnn.kernels import host_build\n"
        "print(host_build.module('order.cu').library)\n"
    )
    racers = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                               cwd=REPO) for _ in range(3)]
    built = {r.communicate()[0].strip() for r in racers}
    assert all(r.returncode == 0 for r in racers) and len(built) == 1
    library = Path(built.pop())
    assert sorted(p.name for p in library.parent.iterdir()) == sorted(
        [library.name, library.with_suffix(".cpp").name]
    )  # no temporary left behind
    stamp = library.stat().st_mtime_ns
    assert host_build.module("order.cu").library == library
    assert library.stat().st_mtime_ns == stamp  # found, not rebuilt
    sources("order.cu", RECORDER + "\n// edited\n")
    cm_dir = Path(os.environ[cm.CUDA_DIR_ENV])
    assert host_build._build(cm_dir, "order.cu", False) != library  # new text, new build


def test_no_compiler_is_one_clear_error(sources, monkeypatch, tmp_path):
    sources("order.cu", RECORDER)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="no C\\+\\+ compiler") as err:
        host_build.module("order.cu")
    assert "\n" not in str(err.value)
    monkeypatch.setenv("CXX", "/nowhere/g++ -O3")
    with pytest.raises(ConfigError, match="CXX"):
        host_build.compiler()


def test_settings_come_from_the_environment_unless_set(monkeypatch):
    for var in (host_build.ORDER_ENV, host_build.SEED_ENV, host_build.MAX_BLOCKS_ENV):
        monkeypatch.delenv(var, raising=False)
    assert host_build.current_settings() == LaunchSettings()
    monkeypatch.setenv(host_build.ORDER_ENV, "shuffled")
    monkeypatch.setenv(host_build.SEED_ENV, "12")
    monkeypatch.setenv(host_build.MAX_BLOCKS_ENV, "3")
    assert host_build.current_settings() == LaunchSettings("shuffled", 12, 3)
    with launch_settings(LaunchSettings("reversed")) as inside:
        assert host_build.current_settings() is inside
    assert host_build.current_settings().order == "shuffled"
    for var, text in [(host_build.ORDER_ENV, "sideways"), (host_build.MAX_BLOCKS_ENV, "0"),
                      (host_build.SEED_ENV, "x")]:
        monkeypatch.setenv(var, text)
        with pytest.raises(ConfigError):
            host_build.current_settings()
        monkeypatch.delenv(var)


class _EmulatedCuda(torch.Tensor):
    """A host tensor that says it is on a GPU, as the emulated device's are."""

    @property
    def is_cuda(self) -> bool:
        return True


def test_the_loader_runs_host_builds_under_the_emulated_device(monkeypatch, settings):
    need_compiler()
    monkeypatch.setattr(emulation, "is_active", lambda: True)
    t = torch.arange(12.0).reshape(4, 3).T
    view = cm.as_cupy(t)
    assert isinstance(view, torch.Tensor) and view.is_contiguous() and torch.equal(view, t)
    cm.launch("rows.cu", "no such kernel", 0, 0, ())  # zero grid: nothing launched
    gen = torch.Generator().manual_seed(5)
    x = torch.rand(50, 7, dtype=torch.float64, generator=gen)
    idx = torch.tensor([49, 0, 3, 3, 17, 0, 0] * 40, dtype=torch.int32)
    add = torch.rand(len(idx), 7, dtype=torch.float64, generator=gen) * 1e16
    dev = {k: v.as_subclass(_EmulatedCuda) for k, v in {"x": x, "idx": idx, "add": add}.items()}
    assert torch.equal(rows.gather_rows(dev["x"], dev["idx"]).as_subclass(torch.Tensor),
                       x[idx.long()])
    want = x.clone().index_add_(0, idx, add)
    for ids in (dev["idx"], rows.scatter_map(dev["idx"])):  # raw ids and a prebuilt map
        got = rows.scatter_add_rows(dev["x"].clone(), ids, dev["add"])
        assert torch.equal(got.as_subclass(torch.Tensor), want)
    uniq = torch.tensor([5, 2, 40], dtype=torch.int64)
    got = rows.scatter_add_rows(dev["x"].clone(), uniq.as_subclass(_EmulatedCuda),
                                dev["add"][:3], unique=True)
    assert torch.equal(got.as_subclass(torch.Tensor),
                       rows.scatter_add_rows(x.clone(), uniq, add[:3], unique=True))


def test_the_kernels_are_clean_under_address_and_undefined_behaviour_sanitizers():
    if os.environ.get(host_build.SANITIZE_ENV) == "1":
        pytest.skip("already the sanitizer run")
    need_compiler()
    runtime = host_build.asan_runtime()
    if runtime is None:
        pytest.skip("the C++ compiler has no AddressSanitizer runtime (libasan.so)")
    env = {**os.environ, "LD_PRELOAD": str(runtime), "ASAN_OPTIONS": "detect_leaks=0",
           host_build.SANITIZE_ENV: "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(  # -s: a sanitizer's report and exit must not be captured away
        [sys.executable, "-m", "pytest", "-q", "-s", "-x", "-p", "no:cacheprovider",
         "-m", "not slow", "tests/kernels/test_host_kernels.py"],
        cwd=REPO, env=env, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert " passed" in done.stdout


@pytest.mark.slow
def test_a_launch_past_2_31_elements():
    """hash_keep over n x ncols > 2^31 entries: 64-bit indexing end to end."""
    ncols, n = 64, (1 << 25) + 1
    need = n * ncols + n * 8 + (1 << 29)
    free = available_bytes()
    if free is None or free < need:
        pytest.skip(f"needs {need / 2**30:.1f} GiB of available memory")
    ids = np.arange(n, dtype=np.int64)
    ids *= 3
    cols = np.arange(ncols, dtype=np.int64)
    out = poisoned((n, ncols), np.bool_)
    key = dropout_key(1, 2, 4, 3)
    args = (ids, np.int64(n), cols, np.int64(ncols), np.uint64(key), column_key(key),
            np.uint64(keep_threshold(0.5)), out)
    host("dropout.cu").launch("hash_keep", cm.blocks(n * ncols), cm.BLOCK, args)
    assert out.view(np.uint8).max() == 1  # every entry written (the poison is 0xFF)
    some = np.array([0, 1, (1 << 24) + 7, n - 2, n - 1])  # the last rows: past 2^31 entries
    assert same_bytes(out[some], dropout_keep(key, ids[some], (0, ncols), 0.5))
