"""The cost model against measurement: predicted vs measured bytes and seconds per phase.

For each ``P`` of ``--procs`` and each full-batch algorithm, ``hpcgnn model --out`` gives
the fastest grid of the algorithm with its bytes per category and its alpha-beta time per
phase on ``--machine``; ``hpcgnn train`` then runs that grid under ``mpiexec -n P`` on the
same graph, and the ratio measured / predicted is reported per category: bytes (summed
over ranks, per epoch: exact by construction, the check that the model counts what the
code sends) and seconds (the busiest rank's modelled time against the measured seconds
per epoch averaged over ranks: how well alpha and beta describe this machine). Writes
``perf/results/bench_model.{json,md}`` and prints the table last.

    python perf/bench_model.py --procs 2,4,8 --nodes 20000 --machine laptop
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from tables import hpcgnn, markdown, mpiexec, prepare, save

ALGOS = ("1d", "1.5d", "2d", "3d")


def _fastest(results: dict, algo: str) -> dict | None:
    """The model's first-ranked choice of ``algo`` for one ``P``."""
    for choice in results["choices"]:
        if choice["algo"] == algo:
            return choice
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph", nargs="?", help="graph file (default: a generated RMAT graph)")
    p.add_argument("--nodes", type=int, default=20_000, help="generated graph: vertices")
    p.add_argument("--procs", default="2,4,8")
    p.add_argument("--machine", default="laptop")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--name", default="bench_model", help="results name in perf/results")
    args = p.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        graph = args.graph or str(prepare(Path(tmp) / "rmat.h5", "rmat", args.nodes))
        study = Path(tmp) / "model.json"
        subprocess.run(hpcgnn("model", graph, "--procs", args.procs, "--machine", args.machine,
                              "--hidden", str(args.hidden), "--out", str(study), "--top", "0"),
                       check=True, stdout=subprocess.DEVNULL, env=env)
        for per_p in json.loads(study.read_text())["results"]:
            procs = per_p["procs"]
            for algo in ALGOS:
                choice = _fastest(per_p, algo)
                if choice is None:
                    continue
                metrics = Path(tmp) / f"{algo}-{procs}.json"
                subprocess.run([mpiexec(), "-n", str(procs), *hpcgnn(
                    "train", graph, "--algo", algo, "--grid", choice["grid"],
                    "--epochs", str(args.epochs), "--hidden", str(args.hidden), "--quiet",
                    "--eval-every", "0", "--threads", str(args.threads),
                    "--metrics", str(metrics))], check=True, env=env, stdout=subprocess.DEVNULL)
                doc = json.loads(metrics.read_text())
                measured_b = doc["comm"]["measured_bytes"]
                measured_s = doc["time"]["phases"]
                pred_b, pred_s = choice["bytes_by_category"], choice["time_by_phase_s"]
                cats = sorted(set(pred_b) | {c for c, v in measured_b.items() if v})
                runs.append({
                    "procs": procs, "algo": algo, "grid": choice["grid"],
                    "bytes": {c: {"measured": measured_b.get(c, 0.0),
                                  "predicted": pred_b.get(c, 0.0)} for c in cats},
                    "seconds": {c: {"measured": measured_s.get(c, 0.0),
                                    "predicted": pred_s.get(c, 0.0)} for c in cats},
                    "predicted_latency_s": pred_s.get("latency", 0.0),
                    "measured_comm_s": sum(measured_s.get(c, 0.0) for c in cats),
                    "predicted_comm_s": choice["time_s"],
                })

    def ratio(m: float, p: float) -> float | str:
        return m / p if p else "-"

    rows = []
    for r in runs:
        mb = sum(v["measured"] for v in r["bytes"].values())
        pb = sum(v["predicted"] for v in r["bytes"].values())
        rows.append([r["procs"], r["algo"], r["grid"], mb / 1e6, ratio(mb, pb),
                     1e3 * r["measured_comm_s"], 1e3 * r["predicted_comm_s"],
                     ratio(r["measured_comm_s"], r["predicted_comm_s"])])
    table = markdown(
        f"Cost model vs measurement ({args.machine} alpha/beta, hidden {args.hidden}, "
        f"{args.threads} thread(s)/rank; {args.graph or f'RMAT {args.nodes}'})",
        ["P", "algo", "grid", "MB/epoch measured", "bytes measured/predicted",
         "comm ms measured", "comm ms predicted", "time measured/predicted"], rows,
        ["Per-category ratios in the JSON. Bytes are the sum over ranks; the predicted time "
         "is the busiest rank's alpha-beta time, the measured one the mean over ranks of the "
         "seconds in communication per epoch."],
    )
    save(args.name, {"args": vars(args), "runs": runs}, table)


if __name__ == "__main__":
    main()
