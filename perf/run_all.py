"""Run every benchmark here and regenerate ``perf/results/README.md`` from their tables.

Each benchmark writes ``perf/results/NAME.{json,md}`` (see ``perf/tables.py``); this driver
runs them one after another with sizes that fit a laptop-class machine (under 30 minutes on
2 cores), then writes the README: the machine, the commit, the command of each run and
its table. ``--only`` picks benchmarks (the README keeps the other benchmarks' sections
as they were); ``--quick`` shrinks every size (a smoke run of
the whole chain in a few minutes; its tables, ``NAME_quick.*`` and ``README_quick.md``,
are not comparable and not kept in git).

    python perf/run_all.py
    python perf/run_all.py --only bench_pyg,bench_algorithms
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from tables import RESULTS, mpiexec

HERE = Path(__file__).resolve().parent

#: name -> (MPI ranks or None for a plain process, arguments, --quick arguments)
BENCHMARKS: dict[str, tuple[int | None, list[str], list[str]]] = {
    "bench_pyg": (None, ["--planetoid-like", "cora,citeseer", "--sbm", "20000", "--rmat",
                         "100000", "--threads", "2"],
                  ["--planetoid-like", "cora", "--epochs", "2", "--repeats", "1"]),
    "bench_models": (None, ["--sbm", "20000", "--rmat", "100000", "--procs", "4",
                             "--threads", "2"],
                     ["--sbm", "2000", "--procs", "2", "--epochs", "2", "--repeats", "1"]),
    "bench_spmm": (None, ["--threads", "1,2", "--repeats", "21"],
                   ["--nodes", "5000", "--repeats", "2", "--copy-mib", "32"]),
    "bench_algorithms": (None, ["--nodes", "100000", "--procs", "4", "--epochs", "5"],
                         ["--nodes", "3000", "--procs", "4", "--epochs", "2"]),
    "bench_model": (None, ["--nodes", "20000", "--procs", "2,4,8", "--epochs", "20"],
                    ["--nodes", "3000", "--procs", "2,4", "--epochs", "2"]),
    "bench_exchange": (None, ["--nodes", "4096", "--procs", "8", "--epochs", "20"],
                       ["--nodes", "1000", "--procs", "4", "--epochs", "2"]),
    "bench_bulk_sampling": (1, ["--nodes", "100000", "--batches", "64", "--bulk", "4,16,32"],
                            ["--nodes", "3000", "--batches", "8", "--bulk", "4", "--repeats", "1"]),
    "bench_sampling": (None, ["--sizes", "3000,20000", "--epochs", "60,30", "--procs", "1,4",
                              "--seeds", "0,1,2,3,4,5", "--global-batch", "200"],
                       ["--sizes", "1000", "--epochs", "2", "--procs", "1,2", "--seeds", "0"]),
    "bench_gist": (None, ["--sizes", "3000", "--procs", "4", "--epochs", "40"],
                   ["--sizes", "1000", "--procs", "2", "--subnets", "2", "--epochs", "4",
                    "--hidden", "32"]),
    "bench_memory": (None, [], ["--nodes", "5000", "--procs", "1,2", "--epochs", "2"]),
}


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _sections(readme: Path) -> dict[str, str]:
    """The ``## name`` sections of an existing README, by benchmark name (none if absent)."""
    if not readme.exists():
        return {}
    out: dict[str, str] = {}
    name = None
    for line in readme.read_text().splitlines(keepends=True):
        if line.startswith("## "):
            name = line[3:].strip()
            out[name] = ""
        if name is not None:
            out[name] += line
    return {k: v.rstrip("\n") + "\n" for k, v in out.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=None, help="comma-separated benchmark names")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    args = p.parse_args()
    names = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        sys.exit(f"run_all: unknown benchmark(s) {', '.join(unknown)}")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    runs: dict[str, dict] = {}
    suffix = "_quick" if args.quick else ""
    for name in names:
        ranks, full, quick = BENCHMARKS[name]
        out = ["--out", str(RESULTS / (name + suffix))] if name == "bench_gist" else [
            "--name", name + suffix]
        cmd = [sys.executable, str(HERE / f"{name}.py"), *(quick if args.quick else full), *out]
        if ranks is not None:
            cmd = [mpiexec(), "-n", str(ranks), *cmd]
        print(f"[run_all] {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, cwd=HERE)
        runs[name] = {"cmd": cmd, "seconds": time.perf_counter() - t0, "rc": done.returncode}
    readme = RESULTS / f"README{suffix}.md"
    kept = _sections(readme) if args.only else {}
    only = f" --only {args.only}" if args.only else ""
    lines = [
        "# Benchmark results", "",
        f"Regenerated by `python perf/run_all.py{' --quick' if args.quick else ''}{only}` at "
        f"commit `{_commit()}` on {platform.node() or 'this machine'} ({os.cpu_count()} cores, "
        f"{platform.platform()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
        "Every peer runs in the same process tree, on the same graph and threads."
        + (" The sections of the other benchmarks are kept from the previous README (their "
           "own run and commit)." if args.only else ""), "",
    ]
    for name in BENCHMARKS:
        table = RESULTS / f"{name}{suffix}.md"
        run = runs.get(name)
        if run is None and name in kept:
            lines.append(kept[name])
            continue
        lines.append(f"## {name}")
        lines.append("")
        if run is not None:
            shown = " ".join(Path(c).name if "/" in c else c for c in run["cmd"])
            status = "" if run["rc"] == 0 else f" — **failed (exit {run['rc']})**"
            lines.append(f"`{shown}` ({run['seconds']:.0f} s){status}")
            lines.append("")
        lines.append(table.read_text() if table.exists() else "(no results yet)\n")
    readme.write_text("\n".join(lines))
    print(f"[run_all] wrote {readme}")
    if any(r["rc"] for r in runs.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
