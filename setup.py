"""Ships the CUDA sources of ``cuda/`` inside the package, as ``hpcgnn/_cuda``.

Everything else is in ``pyproject.toml``. The sources stay at the top-level ``cuda/``
(where ``make ptx`` compiles them); a built wheel carries a copy that
:func:`hpcgnn.kernels.cuda_modules.cuda_dir` finds in an installed package.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SOURCES = Path(__file__).parent / "cuda"


class BuildPyWithCuda(build_py):
    """``build_py``, then copy ``cuda/*.cu`` and ``cuda/*.cuh`` to ``hpcgnn/_cuda``."""

    def run(self) -> None:
        """Build the packages, then add the CUDA sources."""
        super().run()
        target = Path(self.build_lib) / "hpcgnn" / "_cuda"
        self.mkpath(str(target))
        for src in sorted([*SOURCES.glob("*.cu"), *SOURCES.glob("*.cuh")]):
            self.copy_file(str(src), str(target / src.name))


setup(cmdclass={"build_py": BuildPyWithCuda})
