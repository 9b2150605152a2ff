"""The architecture, enforced: imports go one way, and the pure packages stay pure.

Layers, bottom up (``docs/architecture.md``): a module may import its own package and
packages of lower layers only, never a higher or a sibling one. ``cost``, ``layout`` and
``planning`` import neither torch nor mpi4py, ``hpcgnn model`` runs without torch, and
``backend`` never loads mpi4py.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hpcgnn"

#: Layers, bottom up; a package may import packages of strictly lower layers.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "rng", "__version__"),
    ("config", "utils"),
    ("layout",),
    ("backend",),
    ("comm",),
    ("grid",),
    ("io",),
    ("graph", "kernels"),
    ("planning",),
    ("cost", "prepare", "partition"),
    ("exchange", "plots"),
    ("spmm", "sampling", "nn"),
    ("models",),
    ("train",),
    ("cli",),
    ("__main__",),
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}
PURE = ("cost", "layout", "planning")


def _package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__version__"


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, imported hpcgnn module)`` of every import in a file, nested ones included."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("hpcgnn")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "hpcgnn":
                out += [(node.lineno, f"hpcgnn.{a.name}") for a in node.names]
            elif node.module.startswith("hpcgnn."):
                out.append((node.lineno, node.module))
    return out


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_package_has_a_layer():
    found = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in _modules()}
    found.discard("__init__")
    assert found <= set(LEVEL), f"packages without a layer: {sorted(found - set(LEVEL))}"


def test_imports_go_one_way():
    bad = []
    for path in _modules():
        rel = path.relative_to(PACKAGE)
        here = rel.parts[0].removesuffix(".py")
        if here == "__init__":
            continue
        for line, module in _imports(path):
            there = _package_of(module)
            if there != here and LEVEL[there] >= LEVEL[here]:
                bad.append(f"hpcgnn/{rel}:{line} ({here}) imports {module} ({there})")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def _loaded_after(code: str) -> list[str]:
    heavy = "('torch', 'mpi4py')"
    probe = f"{code}\nimport sys; print('LOADED', *(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[-1].split()[1:]


def test_pure_packages_load_neither_torch_nor_mpi4py():
    modules = sorted(
        ".".join(("hpcgnn", *p.relative_to(PACKAGE).with_suffix("").parts))
        for p in _modules()
        if p.relative_to(PACKAGE).parts[0] in PURE
    )
    modules = [m.removesuffix(".__init__") for m in modules]
    pure = "; ".join(f"import {m}" for m in modules)
    assert _loaded_after(pure) == []
    # the device layer sits below comm: torch yes, MPI never
    assert _loaded_after(f"{pure}; import hpcgnn.backend") == ["torch"]


@pytest.mark.parametrize("argv", [["model", "{graph}", "--procs", "1024"]])
def test_model_command_runs_without_torch(tmp_path, argv):
    from tests.graphs import write_random_graph

    graph = write_random_graph(tmp_path / "g.h5", n=40)
    args = [a.format(graph=graph) for a in argv]
    code = f"from hpcgnn.cli.main import main; assert main({args!r}) == 0"
    assert "torch" not in _loaded_after(code)
