"""Where every benchmark leaves its results: ``perf/results/NAME.json`` and ``NAME.md``.

A benchmark builds its JSON document and a Markdown table of ratios, then calls
:func:`save`, which writes both and prints the table last (so the terminal ends with it).
:func:`mpiexec` and :func:`prepare` are the launcher and the graph generator every
benchmark shares; ``perf/run_all.py`` collects the tables into ``perf/results/README.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def mpiexec() -> str:
    """The ``mpiexec`` next to this Python (the MPICH wheel's), else the one on ``PATH``."""
    here = Path(sys.executable).with_name("mpiexec")
    return str(here) if here.exists() else "mpiexec"


def hpcgnn(*args: str) -> list[str]:
    """The command line of ``hpcgnn args...`` with this Python."""
    return [sys.executable, "-m", "hpcgnn", *args]


def prepare(out: Path, generator: str, nodes: int, *, degree: float = 16.0,
            features: int = 64, classes: int = 8, seed: int = 0,
            parts: int | None = None) -> Path:
    """Generate a graph with ``hpcgnn prepare synthetic`` (METIS-partitioned if ``parts``)."""
    raw = out.with_name(out.stem + "-raw.h5") if parts else out
    subprocess.run(hpcgnn("prepare", "synthetic", "--generator", generator, "--nodes",
                          str(nodes), "--avg-degree", str(degree), "--features", str(features),
                          "--classes", str(classes), "--seed", str(seed), "--out", str(raw),
                          "--quiet"), check=True, stdout=subprocess.DEVNULL)
    if parts:
        subprocess.run(hpcgnn("partition", str(raw), "--parts", str(parts), "--method", "metis",
                              "--out", str(out), "--quiet"), check=True,
                       stdout=subprocess.DEVNULL)
    return out


def markdown(title: str, header: Sequence[str], rows: Sequence[Sequence[object]],
             notes: Sequence[str] = ()) -> str:
    """A titled Markdown table (floats with 4 significant digits) and notes under it."""

    def cell(v: object) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    lines = [f"### {title}", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def save(name: str, doc: dict, table: str, out_dir: Path = RESULTS) -> None:
    """Write ``out_dir/name.json`` and ``name.md``; print the table last."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out_dir / f"{name}.md").write_text(table)
    print("\n" + table, flush=True)
