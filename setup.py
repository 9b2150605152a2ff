"""Ships the folders beside the package (``cuda/``, ``configs/``, ``jobs/``) inside it.

Everything else is in ``pyproject.toml``. The folders stay at the top level of the source
tree (where ``make ptx`` compiles the kernels and the docs point); a built wheel carries
copies as ``hpcgnn/_cuda`` (the ``.cu``/``.cuh`` sources and the host-build headers
``host/*.h``), ``hpcgnn/_configs`` (machine and topology files) and ``hpcgnn/_jobs`` (the
batch-script templates), which :func:`hpcgnn.utils.shipped.shipped_dir` finds in an
installed package.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent

#: folder -> (subfolder, patterns) copied into ``hpcgnn/_<folder>``
SHIPPED = {
    "cuda": (("", ("*.cu", "*.cuh")), ("host", ("*.h",))),
    "configs": (("machines", ("*.json",)), ("topologies", ("*.json",))),
    "jobs": (("", ("*.sh",)),),
}


class BuildPyWithData(build_py):
    """``build_py``, then copy the shipped folders into the package."""

    def run(self) -> None:
        """Build the packages, then add the folders of :data:`SHIPPED`."""
        super().run()
        for name, parts in SHIPPED.items():
            target = Path(self.build_lib) / "hpcgnn" / f"_{name}"
            for folder, patterns in parts:
                source = ROOT / name / folder
                self.mkpath(str(target / folder))
                for src in sorted(p for pattern in patterns for p in source.glob(pattern)):
                    self.copy_file(str(src), str(target / folder / src.name))


setup(cmdclass={"build_py": BuildPyWithData})
