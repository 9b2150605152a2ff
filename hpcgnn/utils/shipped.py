"""Folders the project ships beside the package, found in a source checkout or a wheel.

A source checkout keeps ``cuda/``, ``configs/`` and ``jobs/`` at its top level, next to
``hpcgnn/``; a built wheel carries copies inside the package as ``hpcgnn/_cuda``,
``hpcgnn/_configs`` and ``hpcgnn/_jobs`` (made by ``setup.py``), so an installed
``hpcgnn`` finds its kernel sources, machine and topology files and job templates too.
"""

from __future__ import annotations

from pathlib import Path

#: The folder of the ``hpcgnn`` package.
PACKAGE = Path(__file__).resolve().parents[1]


def shipped_dir(name: str, pattern: str = "*", package: Path = PACKAGE) -> Path:
    """The folder ``name`` (``"cuda"``, ``"configs"``, ``"jobs"``) of this installation.

    Parameters
    ----------
    name
        The top-level folder of the source checkout.
    pattern
        A glob (searched recursively) that the wheel's copy must match to count.
    package
        The ``hpcgnn`` package folder (tests point it elsewhere).

    Returns
    -------
    Path
        ``package/_<name>`` when it holds a match (an installed wheel), else
        ``package.parent/<name>`` (a source checkout or an editable install).
    """
    inside = package / f"_{name}"
    if inside.is_dir() and any(inside.rglob(pattern)):
        return inside
    return package.parent / name
