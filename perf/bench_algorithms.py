"""Per-epoch time breakdown of 1D / 1.5D / 2D / 3D full-batch training at P ranks.

Runs ``hpcgnn train`` under ``mpiexec`` once per algorithm on the same graph, same threads
and model, and reports the median epoch time and the seconds per phase (communication
categories and compute phases, averaged over ranks), measured vs predicted bytes, and each
algorithm's ratio to 1D (the baseline of 1.5D/2D/3D). Writes
``perf/results/bench_algorithms.{json,md}`` and prints the ratio table last.

    python perf/bench_algorithms.py inputs/rmat-1m.h5 --procs 4 --epochs 5
    python perf/bench_algorithms.py --nodes 100000 --procs 4   # a generated RMAT graph
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from tables import hpcgnn, markdown, mpiexec, prepare, save

RUNS = {"1d": [], "1.5d": ["--replication", "2"], "2d": [], "3d": ["--grid", "2x1x2"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph", nargs="?", help="graph file (default: a generated RMAT graph)")
    p.add_argument("--nodes", type=int, default=100_000, help="generated graph: vertices")
    p.add_argument("--procs", type=int, default=4)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--name", default="bench_algorithms", help="results name in perf/results")
    args = p.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        graph = args.graph or str(prepare(Path(tmp) / "rmat.h5", "rmat", args.nodes))
        for algo, extra in RUNS.items():
            metrics = Path(tmp) / f"{algo}.json"
            cmd = [mpiexec(), "-n", str(args.procs), *hpcgnn(
                "train", graph, "--algo", algo, *extra, "--epochs", str(args.epochs),
                "--hidden", str(args.hidden), "--layers", str(args.layers), "--quiet",
                "--eval-every", "0", "--threads", str(args.threads), "--metrics", str(metrics))]
            env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
            subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
            doc = json.loads(metrics.read_text())
            results[algo] = {
                "grid": doc["config"]["grid"],
                "epoch_median_s": doc["time"]["epoch_median_s"],
                "phases_s": doc["time"]["phases"],
                "measured_bytes": sum(doc["comm"]["measured_bytes"].values()),
                "predicted_bytes": sum(doc["comm"]["predicted_bytes"].values()),
            }
    base = results["1d"]
    rows = [
        [algo, r["grid"], r["epoch_median_s"], base["epoch_median_s"] / r["epoch_median_s"],
         r["measured_bytes"] / 1e6, r["predicted_bytes"] / 1e6,
         r["measured_bytes"] / base["measured_bytes"] if base["measured_bytes"] else "-"]
        for algo, r in results.items()
    ]
    table = markdown(
        f"CAGNET algorithms vs 1D ({args.procs} ranks, {args.threads} thread(s)/rank, "
        f"hidden {args.hidden}, {args.layers} layers; {args.graph or f'RMAT {args.nodes}'})",
        ["algo", "grid", "epoch s", "speed-up vs 1D", "MB/epoch measured", "MB predicted",
         "bytes vs 1D"], rows,
        ["Per-phase seconds in the JSON (`phases_s`). On one shared-memory node the "
         "communication is a copy; the byte ratios are what carries to a cluster."],
    )
    save(args.name, {"args": vars(args), "results": results}, table)


if __name__ == "__main__":
    main()
