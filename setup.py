"""Ships the CUDA sources of ``cuda/`` inside the package, as ``hpcgnn/_cuda``.

Everything else is in ``pyproject.toml``. The sources stay at the top-level ``cuda/``
(where ``make ptx`` compiles them); a built wheel carries a copy that
:func:`hpcgnn.kernels.cuda_modules.cuda_dir` finds in an installed package, with the
headers of the host build (``cuda/host/*.h`` as ``hpcgnn/_cuda/host``, for
:mod:`hpcgnn.kernels.host_build`).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SOURCES = Path(__file__).parent / "cuda"


class BuildPyWithCuda(build_py):
    """``build_py``, then copy the CUDA sources into the package.

    ``cuda/*.cu`` and ``cuda/*.cuh`` go to ``hpcgnn/_cuda``, ``cuda/host/*.h`` to
    ``hpcgnn/_cuda/host``.
    """

    def run(self) -> None:
        """Build the packages, then add the CUDA sources and the host-build headers."""
        super().run()
        target = Path(self.build_lib) / "hpcgnn" / "_cuda"
        for folder, patterns in (("", ("*.cu", "*.cuh")), ("host", ("*.h",))):
            self.mkpath(str(target / folder))
            for src in sorted(p for pattern in patterns for p in (SOURCES / folder).glob(pattern)):
                self.copy_file(str(src), str(target / folder / src.name))


setup(cmdclass={"build_py": BuildPyWithCuda})
