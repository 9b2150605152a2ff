"""The CUDA sources of ``cuda/`` as CuPy ``RawModule`` objects: found, compiled once, launched.

Only the CUDA branches of the kernel modules call into this module, and it imports CuPy
(and torch) inside its functions: nothing imports CuPy on the CPU path, and the NumPy
kernels (:mod:`~hpcgnn.kernels.csr`, :mod:`~hpcgnn.kernels.sampling`) load no torch.
Under the emulated CUDA device (:func:`hpcgnn.backend.emulation.is_active`) the same
calls run the host build of the sources instead (:mod:`~hpcgnn.kernels.host_build`) and
CuPy is never imported.

- :func:`cuda_dir` finds the sources: ``$HPCGNN_CUDA_DIR`` when set, else the copy a wheel
  ships inside the package (``hpcgnn/_cuda``, made by ``setup.py``), else ``cuda/`` next
  to the package (a source checkout or an editable install);
- :func:`module` compiles a source once per (file, device) with NVRTC
  (``RawModule(code=..., options=COMPILE_OPTIONS, name_expressions=...)``, CuPy also
  caches the binary on disk); :func:`function` returns one of its kernels;
- :func:`launch` runs a kernel on the current torch stream (tensor arguments: ordered
  with the torch work before and after it) or on CuPy's (CuPy array arguments);
- :func:`as_cupy` views a tensor as a CuPy array, zero-copy through DLPack.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcgnn.errors import ConfigError
from hpcgnn.utils.shipped import shipped_dir

if TYPE_CHECKING:  # torch is imported where used: the NumPy kernels' callers stay torch-free
    import torch

#: Environment variable naming the folder of the ``.cu`` sources.
CUDA_DIR_ENV = "HPCGNN_CUDA_DIR"
#: Threads per block of the grid-stride kernels.
BLOCK = 256
#: Most blocks launched along x (grid-stride kernels loop over the rest).
MAX_BLOCKS = 1 << 20
#: NVRTC options every source is compiled with (:func:`module`; a tool that compiles the
#: sources as the loader does uses the same). ``--fmad=false``: no multiply and add contract
#: into an FMA, so the kernels round as their CPU twins. Subnormals: CuPy's ``RawModule``
#: appends ``-ftz=true`` after these (``cupy/cuda/compiler.py``, ``_compile_with_cache_cuda``)
#: and NVRTC keeps the last, so ``--ftz=false`` here would do nothing; the kernels add
#: float32 through ``hpcgnn_add`` (``cuda/grid.cuh``: inline PTX ``add.rn.f32``, which no
#: ``-ftz`` touches) and keep subnormals. :mod:`hpcgnn.kernels.nvrtc_check` reports the
#: options NVRTC finally gets. The host build (:mod:`~hpcgnn.kernels.host_build`) never
#: flushes and never contracts.
COMPILE_OPTIONS: tuple[str, ...] = ("-std=c++17", "--fmad=false")

_FLOATS = ("float", "double")
_INDICES = ("int", "long long")
#: rows.cu's value types: the scalars and their 16-byte packs (``hpcgnn_vec16``).
_ROW_VALUES = (*_FLOATS, *(f"hpcgnn_vec16<{t}>" for t in _FLOATS))

#: Template instantiations each source is compiled with (``name_expressions``); the
#: ``#ifdef HPCGNN_INSTANTIATE`` blocks of the sources list the same ones for ``make ptx``.
NAME_EXPRESSIONS: dict[str, tuple[str, ...]] = {
    "rows.cu": (
        *(f"{k}<{t}, {i}>" for k in ("gather_rows", "copy_rows", "scatter_add_unique")
          for t in _ROW_VALUES for i in _INDICES),
        *(f"scatter_add_segments<{t}>" for t in _ROW_VALUES),
    ),
    "csr.cu": tuple(f"gather_ranges<{i}>" for i in _INDICES),
    "attention.cu": tuple(f"{k}<{t}>" for k in ("edge_softmax", "edge_softmax_backward",
                                                 "edge_dot") for t in _FLOATS),
}

#: C type of each array dtype the kernels take, by dtype name (torch and NumPy/CuPy alike).
C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long"}


def c_type(dtype: Any) -> str:
    """The C type of a torch or NumPy/CuPy dtype; ``TypeError`` when no kernel takes it."""
    name = str(dtype).removeprefix("torch.")
    if name not in C_TYPES:
        raise TypeError(f"no CUDA kernel for dtype {name}")
    return C_TYPES[name]


def device_index(device: torch.device) -> int:
    """The CUDA device number of a ``torch.device`` (its index, else the current device).

    Under the emulated device, 0 for a device without an index (there is no CUDA runtime).
    """
    if device.index is not None:
        return device.index
    if _emulated():
        return 0
    import torch

    return torch.cuda.current_device()


def _emulated() -> bool:
    """Whether kernels run as host builds (the emulated CUDA device is active)."""
    from hpcgnn.backend import emulation

    return emulation.is_active()


def cuda_dir() -> Path:
    """The folder of the ``.cu`` sources.

    ``$HPCGNN_CUDA_DIR`` when set; else ``hpcgnn/_cuda`` (the copy of ``cuda/`` an installed
    wheel carries) when it holds sources; else ``cuda/`` next to the package.

    Raises
    ------
    ConfigError
        When the folder holds no ``.cu`` file.
    """
    env = os.environ.get(CUDA_DIR_ENV)
    package = Path(__file__).resolve().parents[1]
    path = Path(env) if env else shipped_dir("cuda", "*.cu", package)
    if not any(path.glob("*.cu")):
        raise ConfigError(f"no CUDA sources (*.cu) in {path}; set {CUDA_DIR_ENV}")
    return path


def source_text(folder: Path, source: str) -> str:
    """The text of ``source`` with its local ``#include "x.cuh"`` lines replaced by the headers.

    Inlined, the headers are part of the code CuPy hashes for its on-disk kernel cache, so
    editing a header recompiles (an ``-I`` include would leave a stale binary).
    """
    lines = []
    for line in (folder / source).read_text().splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "#include" and words[1].startswith('"'):
            header = (folder / words[1].strip('"')).read_text().splitlines()
            lines += [h for h in header if h.strip() != "#pragma once"]
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


@functools.cache
def module(source: str, device_id: int) -> Any:
    """``source`` compiled for device ``device_id``: a ``cupy.RawModule``, once per process.

    Compiled with :data:`COMPILE_OPTIONS` and the source's :data:`NAME_EXPRESSIONS`.
    """
    import cupy

    with cupy.cuda.Device(device_id):
        compiled = cupy.RawModule(
            code=source_text(cuda_dir(), source),
            options=COMPILE_OPTIONS,
            name_expressions=NAME_EXPRESSIONS.get(source),
        )
        compiled.compile()
    return compiled


def function(source: str, name: str, device_id: int) -> Any:
    """Kernel ``name`` (an ``extern "C"`` name or a template name expression) of ``source``."""
    return module(source, device_id).get_function(name)


def blocks(threads: int, block: int = BLOCK) -> int:
    """Blocks of ``block`` threads for ``threads`` work items of a grid-stride kernel.

    ``ceil(threads / block)``, capped at :data:`MAX_BLOCKS` (the kernels stride over the
    grid, so the cap only makes threads loop); 0 for no work.
    """
    return min(-(-threads // block), MAX_BLOCKS)


def launch(
    source: str, name: str, device_id: int, grid: int, args: tuple, *,
    block: int = BLOCK, torch_stream: bool = True,
) -> None:
    """Run kernel ``name`` of ``source`` on ``grid`` blocks of ``block`` threads.

    Nothing is launched for ``grid == 0``. The kernel runs on torch's current stream of
    the device (tensor arguments: ordered with the torch work around it), or with
    ``torch_stream=False`` on CuPy's current stream (CuPy array arguments). Under the
    emulated device it runs the host build of ``source`` instead, synchronously
    (:meth:`hpcgnn.kernels.host_build.HostModule.launch`, the same arguments).
    """
    if grid <= 0:
        return
    if _emulated():
        from hpcgnn.kernels import host_build

        host_build.module(source).launch(name, grid, block, args)
        return
    import cupy
    import torch

    kernel = function(source, name, device_id)
    with cupy.cuda.Device(device_id):
        if not torch_stream:
            kernel((grid,), (block,), args)
            return
        with external_stream(cupy, torch.cuda.current_stream(device_id)):
            kernel((grid,), (block,), args)


def external_stream(cupy: Any, stream: Any) -> Any:
    """CuPy's view of torch's CUDA ``stream`` (a context manager that makes it current).

    ``cupy.cuda.Stream.from_external(stream)`` where CuPy has it: it takes an object of the
    CUDA stream protocol (``__cuda_stream__``, which torch's streams implement), not a
    pointer, and keeps the object alive. Else (older CuPy or torch) the deprecated
    ``cupy.cuda.ExternalStream`` of the raw pointer ``stream.cuda_stream``.
    """
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None and hasattr(stream, "__cuda_stream__"):
        return from_external(stream)
    return cupy.cuda.ExternalStream(stream.cuda_stream)


def as_cupy(t: torch.Tensor) -> Any:
    """A CuPy view of a CUDA tensor (zero-copy, DLPack); made contiguous first if needed.

    A page-locked host tensor gives a CuPy array over its host memory (:func:`_mapped`),
    which a kernel reads over the bus (HongTu's zero-copy loads).

    Under the emulated device: the contiguous detached tensor itself (its ``data_ptr`` is
    host memory, which the host build takes as it is).
    """
    t = t.detach().contiguous()
    if _emulated():
        return t
    import cupy

    if not t.is_cuda and t.is_pinned():
        return _mapped(cupy, t)
    return cupy.from_dlpack(t)


def _mapped(cupy: Any, t: torch.Tensor) -> Any:
    """A CuPy array over page-locked host tensor ``t`` (zero-copy reads by a kernel).

    Under unified addressing (every 64-bit CUDA platform) the host pointer of memory from
    ``cudaHostAlloc`` (torch's pinned allocator) is also its device pointer, so a kernel
    reads the host rows over the bus; ``t`` must outlive the kernel (the array keeps it).
    """
    nbytes = t.numel() * t.element_size()
    memory = cupy.cuda.UnownedMemory(t.data_ptr(), nbytes, t, cupy.cuda.runtime.getDevice())
    return cupy.ndarray(tuple(t.shape), dtype=str(t.dtype).removeprefix("torch."),
                        memptr=cupy.cuda.MemoryPointer(memory, 0))


def is_tensor(a: Any) -> bool:
    """Whether ``a`` is a torch tensor (checked without importing torch).

    The kernels' dispatch: a tensor (on a GPU or the emulated device) runs the ``.cu``
    source, anything else the NumPy reference.
    """
    return type(a).__module__.split(".")[0] == "torch"
