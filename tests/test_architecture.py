"""The architecture, enforced: imports go one way, and the pure packages stay pure.

Layers, bottom up (``docs/architecture.md``): a module may import its own package and
packages of lower layers only, never a higher or a sibling one. ``cost``, ``layout`` and
``planning`` import neither torch nor mpi4py, ``hpcgnn model`` runs without torch,
``backend`` never loads mpi4py, and only the command line (``cli``) imports argparse: the
Python API (``api``, a sibling of ``cli``) takes objects, never flags.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hpcgnn"

#: Layers, bottom up; a package may import packages of strictly lower layers.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "rng", "__version__"),
    ("kinds",),
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
    ("training",),
    ("api", "cli"),
    ("__main__",),
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}
PURE = ("cost", "kinds", "layout", "planning")


def _package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__version__"


#: The calls that import a module named by a string (``importlib.import_module``, bare or as
#: an attribute, and the builtin ``__import__``).
IMPORT_CALLS = ("import_module", "__import__")


def _resolve(name: str, level: int, package: str) -> str | None:
    """``name`` imported ``level`` dots up from ``package`` (``None`` above ``hpcgnn``)."""
    parts = package.split(".")
    if level > len(parts):
        return None
    base = ".".join(parts[: len(parts) - level + 1])
    return f"{base}.{name}" if name else base


def _static_prefix(node: ast.expr) -> tuple[str, bool] | None:
    """The module name a call argument spells: ``(text, complete)``; ``None`` if no text.

    A string literal is complete; an f-string gives its leading literal text, incomplete.
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, True
    if isinstance(node, ast.JoinedStr):
        text = ""
        for part in node.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                return text, False
            text += part.value
        return text, True
    return None


def _call_import(node: ast.Call, package: str) -> tuple[str | None, str]:
    """The hpcgnn module an ``import_module`` / ``__import__`` call loads.

    Returns ``(module, "")``, ``(None, "")`` when the call loads no hpcgnn module (or one no
    source text names: a fully dynamic name is out of a static check's reach), or
    ``(None, why)`` when it names hpcgnn but the test cannot tell which package (refused).
    """
    spelt = _static_prefix(node.args[0]) if node.args else None
    if spelt is None:
        return None, ""
    text, complete = spelt
    if text.startswith("."):  # import_module(".x", "hpcgnn.pkg"): relative to a package
        anchor = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "package"), None
        )
        base = _static_prefix(anchor) if anchor is not None else None
        if base is None or not base[1] or not complete:
            return None, f"relative {text!r} without a literal package"
        level = len(text) - len(text.lstrip("."))
        resolved = _resolve(text.lstrip("."), level, base[0])
        if resolved is None:
            return None, f"{text!r} reaches above {base[0]!r}"
        text = resolved
    if text != "hpcgnn" and not text.startswith("hpcgnn."):
        return None, ""
    if complete:
        return text, ""
    # f"hpcgnn.cli.{name}": the package is known once its name and a dot follow "hpcgnn."
    known = text.split(".")[:-1]
    if len(known) >= 2:
        return ".".join(known), ""
    return None, f"{text!r}... names no package"


def _imports(
    source: str, package: str, filename: str = "<source>"
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``(imports, refused)`` of a module of ``package`` (e.g. ``hpcgnn.comm``).

    ``imports``: ``(line, imported hpcgnn module)`` of every ``import`` and ``from ...
    import`` (relative ones resolved against ``package``), nested ones included, and of every
    ``import_module`` / ``__import__`` call whose argument spells an hpcgnn module.
    ``refused``: ``(line, why)`` of the imports the test cannot place in a layer.
    """
    tree = ast.parse(source, filename)
    out: list[tuple[int, str]] = []
    refused: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("hpcgnn")]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # from . import x, from .x import y, from .. import x
                resolved = _resolve(module, node.level, package)
                if resolved is None:
                    refused.append((node.lineno, f"'from {'.' * node.level}{module}' reaches"
                                    f" above {package!r}"))
                    continue
                module = resolved
            if module == "hpcgnn":
                out += [(node.lineno, f"hpcgnn.{a.name}") for a in node.names]
            elif module.startswith("hpcgnn.") and not node.module:  # from . import x
                out += [(node.lineno, f"{module}.{a.name}") for a in node.names]
            elif module.startswith("hpcgnn."):
                out.append((node.lineno, module))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in IMPORT_CALLS:
                module, why = _call_import(node, package)
                if module is not None:
                    out.append((node.lineno, module))
                elif why:
                    refused.append((node.lineno, f"{name}: {why}"))
    return out, refused


def _violations(source: str, rel: Path) -> list[str]:
    """The imports of the file ``hpcgnn/<rel>`` against the layering, one line each."""
    here = rel.parts[0].removesuffix(".py")
    if here == "__init__":
        return []
    package = ".".join(("hpcgnn", *rel.parts[:-1]))
    imports, refused = _imports(source, package, f"hpcgnn/{rel}")
    bad = [f"hpcgnn/{rel}:{line} ({here}) refused: {why}" for line, why in refused]
    for line, module in imports:
        there = _package_of(module)
        if there not in LEVEL:
            bad.append(f"hpcgnn/{rel}:{line} ({here}) imports {module}, in no layer")
        elif there != here and LEVEL[there] >= LEVEL[here]:
            bad.append(f"hpcgnn/{rel}:{line} ({here}) imports {module} ({there})")
    return bad


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


#: Modules outside ``hpcgnn/cli`` that may import argparse, and why.
ARGPARSE_OUTSIDE_CLI = {
    # ``python -m hpcgnn.kernels.nvrtc_check``: a build check that runs in an environment of
    # NumPy and CuPy alone, importing only ``kernels/cuda_modules.py`` of hpcgnn
    "kernels/nvrtc_check.py",
}


def _imports_argparse(source: str) -> list[int]:
    """The lines of ``source`` that import argparse (any form, nested ones too)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            lines += [node.lineno for a in node.names if a.name.split(".")[0] == "argparse"]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            lines += [node.lineno] if node.module.split(".")[0] == "argparse" else []
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            spelt = _static_prefix(node.args[0]) if node.args else None
            if name in IMPORT_CALLS and spelt is not None and spelt[0].startswith("argparse"):
                lines.append(node.lineno)
    return lines


def test_only_the_command_line_imports_argparse():
    bad = []
    for path in _modules():
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "cli" or rel.as_posix() in ARGPARSE_OUTSIDE_CLI:
            continue
        bad += [f"hpcgnn/{rel.as_posix()}:{line}" for line in _imports_argparse(path.read_text())]
    why = "argparse outside hpcgnn/cli (modes and options are made from values)"
    assert not bad, why + ":\n" + "\n".join(bad)
    assert all((PACKAGE / rel).exists() for rel in ARGPARSE_OUTSIDE_CLI)


@pytest.mark.parametrize("source", [
    "import argparse", "from argparse import Namespace", "import argparse as ap",
    "def f():\n    import argparse", "import importlib\nimportlib.import_module('argparse')",
])
def test_the_argparse_check_catches_every_form(source):
    assert _imports_argparse(source) != []


def test_every_package_has_a_layer():
    found = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in _modules()}
    found.discard("__init__")
    assert found <= set(LEVEL), f"packages without a layer: {sorted(found - set(LEVEL))}"


def test_imports_go_one_way():
    bad = []
    for path in _modules():
        bad += _violations(path.read_text(), path.relative_to(PACKAGE))
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


# Every form of import the check reads, in a module of ``comm`` (layer 4) reaching up to
# ``models`` (layer 12): each must be found, resolved and reported.
UPWARD = [
    "from ..models import base",
    "from .. import models",
    "from ..models.base import RowBlockModel",
    "import hpcgnn.models.base",
    "from hpcgnn import models",
    "from hpcgnn.models import base",
    "import importlib\nimportlib.import_module('hpcgnn.models.base')",
    "from importlib import import_module\nimport_module('hpcgnn.models')",
    "import importlib\nimportlib.import_module('..models', 'hpcgnn.comm')",
    "import importlib\nimportlib.import_module('.base', package='hpcgnn.models')",
    "import importlib\nname = 'base'\nimportlib.import_module(f'hpcgnn.models.{name}')",
    "__import__('hpcgnn.models.base')",
    "import builtins\nbuiltins.__import__('hpcgnn.models')",
    "def f():\n    from ..models import base\n    return base",
]


@pytest.mark.parametrize("source", UPWARD)
def test_check_catches_every_import_form(source):
    bad = _violations(source, Path("comm", "wire.py"))
    assert len(bad) == 1 and bad[0].endswith("(models)"), bad


@pytest.mark.parametrize("source", [
    "from . import stats",
    "from .stats import CommStats",
    "from .. import errors",
    "from ..layout.blocks import even_offsets",
    "import importlib\nimportlib.import_module('hpcgnn.backend')",
    "import importlib\nimportlib.import_module('numpy.dtypes')",
    "import importlib\nimportlib.import_module(name)",  # no text: out of a static check's reach
])
def test_check_passes_downward_and_foreign_imports(source):
    assert _violations(source, Path("comm", "wire.py")) == []


@pytest.mark.parametrize("source", [
    "import importlib\nname = 'x'\nimportlib.import_module(f'hpcgnn.{name}')",
    "import importlib\nimportlib.import_module('.models')",
    "import importlib\nimportlib.import_module('.x', package)",
    "from .... import x",
    "import importlib\nimportlib.import_module('....x', 'hpcgnn.comm')",
])
def test_check_refuses_what_it_cannot_place(source):
    bad = _violations(source, Path("comm", "wire.py"))
    assert len(bad) == 1 and "refused" in bad[0], bad


def test_relative_imports_resolve_against_the_package():
    imports, refused = _imports(
        "from . import stats, wire\nfrom .x import y\nfrom .. import config", "hpcgnn.comm"
    )
    assert refused == []
    assert imports == [
        (1, "hpcgnn.comm.stats"), (1, "hpcgnn.comm.wire"), (2, "hpcgnn.comm.x"),
        (3, "hpcgnn.config"),
    ]
    # in a top-level module (hpcgnn/config.py) the package is hpcgnn itself
    assert _imports("from . import errors", "hpcgnn")[0] == [(1, "hpcgnn.errors")]


def _direction() -> str:
    """The one-line summary of the layering, top down, as ``docs/architecture.md`` gives it."""
    def group(layer: tuple[str, ...]) -> str:
        names = [n for n in layer if not n.startswith("__")]
        return names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"

    layers = [layer for layer in LAYERS if any(not n.startswith("__") for n in layer)]
    return " -> ".join(group(layer) for layer in reversed(layers))


def test_docs_summary_line_follows_the_layers():
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    found = re.findall(r"So the direction is `([^`]*)`", text)
    assert len(found) == 1, "docs/architecture.md: no one 'So the direction is `...`' line"
    assert " ".join(found[0].split()) == _direction()


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


@pytest.mark.parametrize("argv", [["model", "{graph}", "--procs", "1024"],
                                  ["model", "{graph}", "--procs", "4", "--sampler", "ladies"]])
def test_model_command_runs_without_torch(tmp_path, argv):
    from tests.graphs import write_random_graph

    graph = write_random_graph(tmp_path / "g.h5", n=40)
    args = [a.format(graph=graph) for a in argv]
    code = f"from hpcgnn.cli.main import main; assert main({args!r}) == 0"
    assert "torch" not in _loaded_after(code)
