"""Make a device's kernels ready before the first timed phase, or say why they cannot be.

On a GPU, CuPy importing is not enough: the kernels are compiled at run time by NVRTC,
which needs its library and the CUDA headers, and a node that lacks them would fail
inside the first kernel launch, on one rank, in the middle of a collective. A run
therefore prepares its device once, inside :func:`hpcgnn.grid.device.choose_device`'s
collective check: :func:`prepare_kernels` compiles and launches a tiny probe kernel,
then compiles every source of ``cuda/`` (CuPy caches the binaries on disk), so the first
compile no longer lands in the first timed phase. On the emulated GPU the same steps
build the sources for the host (:mod:`hpcgnn.kernels.host_build`). The CPU needs nothing.
"""

from __future__ import annotations

from hpcgnn.backend import Device
from hpcgnn.errors import ConfigError
from hpcgnn.kernels import cuda_modules as cm

#: The probe: one thread writes 1 (checks compiler, headers, driver and launch).
PROBE = 'extern "C" __global__ void hpcgnn_probe(int* out) { out[threadIdx.x] = 1; }\n'


def sources() -> list[str]:
    """File names of every CUDA source the loader compiles."""
    return sorted(p.name for p in cm.cuda_dir().glob("*.cu"))


def prepare_kernels(device: Device) -> None:
    """Compile (and probe) this device's kernels now; nothing on the CPU.

    Raises
    ------
    ConfigError
        One line naming what failed (no NVRTC, missing headers, no C++ compiler for the
        emulated GPU, a source that does not compile).
    """
    if not device.is_cuda:
        return
    try:
        if device.emulated:
            from hpcgnn.kernels import host_build

            for source in sources():
                host_build.module(source)
        else:
            _probe(device.index)
            for source in sources():
                cm.module(source, device.index)
    except ConfigError:
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(
            f"--device cuda: the CUDA kernels cannot be compiled on this node "
            f"({type(exc).__name__}: {first}); check NVRTC and the CUDA headers "
            f"(pip install 'hpcgnn[cuda12]' or 'hpcgnn[cuda13]')"
        ) from exc


def _probe(device_id: int) -> None:
    """Compile :data:`PROBE` with the loader's options, run it, check what it wrote."""
    import cupy

    with cupy.cuda.Device(device_id):
        kernel = cupy.RawModule(code=PROBE, options=cm.COMPILE_OPTIONS).get_function(
            "hpcgnn_probe"
        )
        out = cupy.zeros(32, dtype=cupy.int32)
        kernel((1,), (32,), (out,))
        if int(out.sum()) != 32:
            raise RuntimeError("the probe kernel ran but wrote the wrong result")
