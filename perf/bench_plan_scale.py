"""``hpcgnn plan`` at scale: 128 and 1024 modelled ranks on rail topologies.

Generates an RMAT graph (``hpcgnn prepare synthetic``), writes rail topologies with
``hpcgnn plan --write-topology`` (``NODESx8`` GPUs: NVLink inside a node, one rail per GPU
index through the nodes' shared NICs), without latency (DGCL's bandwidth-only model) and
with latency (3 us per NVLink message, 8 us per network message, 10 us per stage), and runs
``hpcgnn plan`` once per (ranks, latency) as its own process, on an even block split of the
graph (the generated file has no partition into that many parts). Per run it records the
seconds spent building the relation and planning, the child's wall and CPU time and peak
resident memory (``ru_*`` of that child alone, from ``wait4``), the 1-minute load average
before and after (the machine may be shared), the (vertex, rank) pairs, the
modelled p2p and planned times and the planned stages.
Writes ``perf/results/bench_plan_scale.{json,md}`` and prints the table last.

    python perf/bench_plan_scale.py                       # 16x8 and 128x8, RMAT n=1024
    python perf/bench_plan_scale.py --shapes 16x8 --nodes 65536 --name bench_plan_128
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import hpcgnn, markdown, prepare, save

LATENCY = "nvlink_us=3,net_us=8,stage_us=10"


def run_child(argv: list[str]) -> tuple[float, float, float, str]:
    """Run ``argv``; its wall seconds, CPU seconds, own peak RSS (MiB) and stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed with exit code {proc.returncode}")
    cpu = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - t0, cpu, usage.ru_maxrss / 1024, out


def _save(args: argparse.Namespace, rows: list, runs: list) -> None:
    """Write the results so far (after every run: a long one leaves the others saved)."""
    doc = {"graph": {"generator": "rmat", "nodes": args.nodes, "avg_degree": args.degree},
           "feature_dim": args.feature_dim, "chunks": args.chunks, "latency": LATENCY,
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
           "runs": runs}
    table = markdown(
        f"hpcgnn plan at scale (RMAT n={args.nodes}, avg degree {args.degree:g}, even blocks, "
        f"feature_dim {args.feature_dim}, chunks {args.chunks})",
        ["rail", "ranks", "latency", "pairs", "relation s", "planning s", "wall s", "CPU s",
         "peak RSS MiB", "p2p ms", "planned ms", "reduction", "stages"],
        rows,
        [f"Latency: `{LATENCY}` (microseconds). Modelled times are per layer exchange; "
         "wall, CPU seconds and peak RSS are the `hpcgnn plan` process's own; relation and "
         "planning seconds are wall time inside it (a shared machine inflates them: compare "
         "CPU s with wall s)."],
    )
    save(args.name, doc, table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="16x8,128x8", help="rail shapes NODESxGPUS")
    ap.add_argument("--nodes", type=int, default=1024, help="RMAT vertices")
    ap.add_argument("--degree", type=float, default=8.0, help="RMAT average degree")
    ap.add_argument("--feature-dim", type=int, default=128)
    ap.add_argument("--chunks", type=int, default=64)
    ap.add_argument("--name", default="bench_plan_scale")
    args = ap.parse_args()

    rows, runs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        g = prepare(Path(tmp) / "g.h5", "rmat", args.nodes, degree=args.degree, features=8)
        for shape in args.shapes.split(","):
            for latency in (False, True):
                spec = f"rail:{shape}" + (f",{LATENCY}" if latency else "")
                topo = Path(tmp) / f"{shape}-{int(latency)}.json"
                subprocess.run(hpcgnn("plan", "--write-topology", spec, "--out", str(topo)),
                               check=True, stdout=subprocess.DEVNULL)
                ranks = str(json.loads(topo.read_text())["ranks"])
                out = Path(tmp) / "plan.json"
                load = os.getloadavg()[0]
                wall, cpu, rss, text = run_child(hpcgnn(
                    "plan", str(g), "--parts", ranks, "--topology", str(topo),
                    "--feature-dim", str(args.feature_dim), "--chunks", str(args.chunks),
                    "--out", str(out)))
                doc = json.loads(out.read_text())
                run = {
                    "topology": spec, "ranks": int(ranks), "split": doc["split"],
                    "pairs": int(sum(map(sum, doc["relation_pairs"]))),
                    "relation_s": doc["relation_time_s"], "planning_s": doc["planning_time_s"],
                    "wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss,
                    "load_avg_1min": [load, os.getloadavg()[0]],
                    "p2p_s": doc["p2p"]["time_s"], "planned_s": doc["planned"]["time_s"],
                    "stages": doc["planned"]["num_stages"], "reduction": doc["reduction"],
                    "summary": text.splitlines()[-1],
                }
                runs.append(run)
                print(json.dumps({k: v for k, v in run.items() if k != "summary"}), flush=True)
                rows.append([shape, run["ranks"], "yes" if latency else "no", run["pairs"],
                             run["relation_s"], run["planning_s"], run["wall_s"], cpu,
                             round(rss), run["p2p_s"] * 1e3, run["planned_s"] * 1e3,
                             f"{run['reduction'] * 100:.1f}%", run["stages"]])
                _save(args, rows, runs)


if __name__ == "__main__":
    main()
