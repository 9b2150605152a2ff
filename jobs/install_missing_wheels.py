#!/usr/bin/env python3
"""Install, from a folder of wheels and with no package index, only what this Python lacks.

Made for a GPU node that has Python, torch, CuPy, NumPy, SciPy, h5py, pytest (and maybe
mpi4py) but no package index: ``make gpu-wheels PY=3.12`` fills ``build/gpu-wheels`` on a
machine that has one; on the node run this script with the interpreter of the environment to
fill, best a venv that sees the node's packages::

    python3 jobs/install_missing_wheels.py --venv build/gpu-env build/gpu-wheels
    export PATH=$PWD/build/gpu-env/bin:$PATH   # its python (and mpiexec, when MPICH came in)

(``--venv`` makes a venv that sees this Python's packages, even where this Python is itself
a venv, then installs into it; ``make gpu-check`` does exactly this.)

(``pip install --target DIR`` is no alternative: pip leaves out the ``lib/`` of the MPICH
wheel there, which holds ``libmpi``.) For each wheel, by its distribution name:

- ``hpcgnn`` is always installed (``--force-reinstall``): the code under test;
- ``mpich`` and ``mpi4py`` are installed only when ``from mpi4py import MPI`` fails in this
  Python (no mpi4py, or one whose MPI library is missing). A working mpi4py keeps its MPI:
  the MPICH wheel would otherwise be the first ``libmpi`` PyPI's mpi4py finds;
- any other wheel is installed when ``importlib.metadata`` finds no distribution of its name.

Everything goes through ``python -m pip install --no-index --no-deps``. ``--dry-run`` only
prints the plan. The exit status is non-zero when pip fails or mpi4py still cannot load MPI.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

#: Installed even when present: the project itself.
ALWAYS = {"hpcgnn"}
#: Installed together, only when ``from mpi4py import MPI`` fails.
MPI_GROUP = {"mpich", "mpi4py"}
#: Loads MPI and names the library (run in a subprocess: a broken MPI may abort).
MPI_PROBE = "from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])"


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it (``Pytest_MPI`` -> ``pytest-mpi``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(path: Path) -> tuple[str, str, str]:
    """``(distribution, version, python tag)`` of a wheel file name (PEP 427)."""
    parts = path.name[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        raise ValueError(f"{path.name}: not a wheel file name")
    return normalize(parts[0]), parts[1], parts[-3]


def installed_version(name: str) -> str | None:
    """The version of distribution ``name`` this Python has, or None."""
    for candidate in (name, name.replace("-", "_")):
        try:
            return importlib.metadata.version(candidate)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def python_tag_fits(tag: str) -> bool:
    """Whether a wheel's python tag (``py3``, ``cp312``, ``py2.py3``) fits this Python."""
    here = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return any(t in ("py3", here) for t in tag.split("."))


def mpi_works(python: str = sys.executable) -> tuple[bool, str]:
    """Whether ``from mpi4py import MPI`` works in ``python``, and its MPI library or error."""
    try:
        done = subprocess.run([python, "-c", MPI_PROBE], capture_output=True, text=True,
                              timeout=120)
    except subprocess.TimeoutExpired:
        return False, "from mpi4py import MPI did not finish in 120 s"
    if done.returncode == 0:
        return True, done.stdout.strip()
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return False, lines[-1] if lines else f"exit status {done.returncode}"


def plan(folder: Path, mpi_ok: bool) -> tuple[list[Path], list[Path], list[str]]:
    """``(install, reinstall, report lines)`` for the wheels of ``folder``."""
    install: list[Path] = []
    reinstall: list[Path] = []
    report: list[str] = []
    for wheel in sorted(folder.glob("*.whl")):
        name, version, tag = wheel_name(wheel)
        have = installed_version(name)
        if not python_tag_fits(tag):
            raise SystemExit(
                f"install_missing_wheels: {wheel.name} is for {tag}, this is Python "
                f"{sys.version_info.major}.{sys.version_info.minor}: run make gpu-wheels "
                f"PY={sys.version_info.major}.{sys.version_info.minor}")
        if name in ALWAYS:
            reinstall.append(wheel)
            report.append(f"install {name} {version} (always; this Python has {have or 'none'})")
        elif name in MPI_GROUP:
            if mpi_ok:
                report.append(f"skip    {name} {version} (mpi4py already loads an MPI; "
                              f"{name} here: {have or 'none'})")
            else:  # both into this environment: mpi4py looks for libmpi beside itself
                reinstall.append(wheel)
                report.append(f"install {name} {version} (mpi4py loads no MPI; "
                              f"{name} here: {have or 'none'})")
        elif have is None:
            install.append(wheel)
            report.append(f"install {name} {version} (missing)")
        else:
            report.append(f"skip    {name} {version} (have {have})")
    return install, reinstall, report


def pip_install(wheels: list[Path], *extra: str) -> None:
    """``python -m pip install --no-index --no-deps [extra] wheels`` (exits on failure)."""
    if not wheels:
        return
    command = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
               "--disable-pip-version-check", *extra, *map(str, wheels)]
    print("install_missing_wheels: " + " ".join(command), flush=True)
    if subprocess.run(command).returncode != 0:
        raise SystemExit("install_missing_wheels: pip failed")


def make_venv(env: Path) -> Path:
    """A venv at ``env`` that sees this Python's packages; its interpreter.

    ``--system-site-packages`` alone is not enough where this Python is itself a venv (a
    GPU node's ``python3`` often is: its torch and CuPy live in that venv, not in the base
    interpreter's site-packages), so a ``.pth`` file in the new venv lists this
    interpreter's site-packages: the new venv's own packages come first, the node's after.
    Made without pip (``ensurepip`` is often missing): the node's pip is found through the
    same ``.pth`` and installs into the new venv.
    """
    python = env / "bin" / "python"
    if python.exists():
        return python
    import site
    import venv

    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    seen = [*site.getsitepackages(), site.getusersitepackages()]
    paths = [p for p in dict.fromkeys(seen) if Path(p).is_dir()]
    (Path(purelib) / "hpcgnn-node.pth").write_text("\n".join(paths) + "\n")
    print(f"install_missing_wheels: made {env} (sees {', '.join(paths)})")
    return python


def main(argv: list[str] | None = None) -> int:
    """The command line; the exit status."""
    default = Path(__file__).resolve().parents[1] / "build" / "gpu-wheels"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=default,
                        help="the folder of wheels (default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan only")
    parser.add_argument("--venv", type=Path, default=None,
                        help="first make this venv (seeing this Python's packages) and install "
                             "into it; no wheels then is no error")
    args = parser.parse_args(argv)
    if args.venv is not None:
        python = make_venv(args.venv)
        if not any(args.folder.glob("*.whl")):
            print(f"install_missing_wheels: no wheels in {args.folder}: {args.venv} as it is")
            return 0
        rest = [str(args.folder), *(["--dry-run"] if args.dry_run else [])]
        return subprocess.run([str(python), str(Path(__file__).resolve()), *rest]).returncode
    if not any(args.folder.glob("*.whl")):
        print(f"install_missing_wheels: no wheels in {args.folder} (make gpu-wheels PY=3.x)")
        return 1
    mpi_ok, mpi_info = mpi_works()
    print(f"install_missing_wheels: {sys.executable} (Python {sys.version.split()[0]}); "
          f"mpi4py: {mpi_info if mpi_ok else 'no MPI (' + mpi_info + ')'}")
    install, reinstall, report = plan(args.folder, mpi_ok)
    for line in report:
        print(f"install_missing_wheels: {line}")
    if args.dry_run:
        return 0
    pip_install(install)
    pip_install(reinstall, "--force-reinstall")
    if not mpi_ok:
        mpi_ok, mpi_info = mpi_works()
        if not mpi_ok:
            print(f"install_missing_wheels: mpi4py still loads no MPI: {mpi_info}")
            return 1
        bin_dir = Path(sys.executable).parent
        print(f"install_missing_wheels: mpi4py now loads {mpi_info}; "
              f"launch with {bin_dir / 'mpiexec'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
