"""Per-epoch time breakdown of 1D / 1.5D / 2D / 3D full-batch training at P ranks.

Runs ``hpcgnn train`` under ``mpiexec`` once per algorithm on the same graph and prints a
table of the median epoch time and the seconds per phase (communication categories and
compute phases, averaged over ranks), plus measured vs predicted bytes.

    python perf/bench_algorithms.py inputs/rmat-1m.h5 --procs 4 --epochs 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RUNS = {"1d": [], "1.5d": ["--replication", "2"], "2d": [], "3d": ["--grid", "2x1x2"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph")
    p.add_argument("--procs", type=int, default=4)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--mpiexec", default=str(Path(sys.executable).parent / "mpiexec"))
    p.add_argument("--json", default=None)
    args = p.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for algo, extra in RUNS.items():
            metrics = Path(tmp) / f"{algo}.json"
            cmd = [args.mpiexec, "-n", str(args.procs), sys.executable, "-m", "hpcgnn", "train",
                   args.graph, "--algo", algo, *extra, "--epochs", str(args.epochs),
                   "--hidden", str(args.hidden), "--layers", str(args.layers), "--quiet",
                   "--eval-every", "0", "--threads", str(args.threads), "--metrics", str(metrics)]
            env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
            subprocess.run(cmd, check=True, env=env)
            doc = json.loads(metrics.read_text())
            results[algo] = {
                "grid": doc["config"]["grid"],
                "epoch_median_s": doc["time"]["epoch_median_s"],
                "phases_s": doc["time"]["phases"],
                "measured_bytes": sum(doc["comm"]["measured_bytes"].values()),
                "predicted_bytes": sum(doc["comm"]["predicted_bytes"].values()),
            }
    phases = sorted({k for r in results.values() for k in r["phases_s"]})
    print(f"{'algo':>5} {'grid':>7} {'epoch s':>8} " + " ".join(f"{k[:12]:>12}" for k in phases)
          + f" {'MB meas':>9} {'MB pred':>9}")
    for algo, r in results.items():
        print(f"{algo:>5} {r['grid']:>7} {r['epoch_median_s']:>8.3f} "
              + " ".join(f"{r['phases_s'].get(k, 0.0):>12.4f}" for k in phases)
              + f" {r['measured_bytes'] / 1e6:>9.2f} {r['predicted_bytes'] / 1e6:>9.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
