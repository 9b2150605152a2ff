"""How an epoch's cost grows with the graph: RMAT 250K, 1M, 4M vertices on one box.

For each ``--sizes`` vertex count (average degree ``--degree``, ``--features`` features):
generate the RMAT graph (``hpcgnn prepare synthetic``), partition it with METIS for the
halo runs (``hpcgnn partition --balance edges``; its wall time and peak memory, the
command's own progress lines on the terminal), then run ``hpcgnn train`` for every
``--algos`` at every ``--procs`` under ``mpiexec`` and record, from the metrics: the
epoch's time, the time per stored edge, and each rank's peak memory above its start
against the memory check's prediction (``memory.predicted_bytes``, what ``hpcgnn model``
prints). The epoch time is the steady state's: the median of the epochs after the first
``--warmup`` (which page-fault the run's memory in: at 4M vertices those took up to 2.9x
a steady epoch); the first epochs' times and new pages are kept in the JSON. With
``--pyg`` one process of PyG's ``GCNConv`` on the same graph, both paths (``edge_index``
and the sparse ``adj_t``), where the graph fits (``--pyg-max-nodes``).

The table closes with the ratios the issue asks for: time per edge at each size over the
smallest size's, at the same algorithm and ranks (goal: at most 1.3 at 4M), and the
largest measured / predicted peak (goal: at most 1.25). Writes
``perf/results/NAME.{json,md}``. A run that fails (out of memory, a grid that does not
fit) is recorded with its error line and the rest go on.

    python perf/bench_scale.py                                   # 250K, 1M, 4M
    python perf/bench_scale.py --graphs /scratch/rmat              # keep graphs, METIS parts
    python perf/bench_scale.py --sizes 20000,80000 --procs 1,2 --name bench_scale_small
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from tables import hpcgnn, markdown, mpiexec, save

MIB = 2**20
#: ``--algo`` flags of each algorithm (1.5D with ``c = 2``, from 2 ranks up).
ALGOS = {"1d": ["--algo", "1d"], "1.5d": ["--algo", "1.5d", "--replication", "2"],
         "halo": ["--algo", "halo"]}


def timed(cmd: list[str]) -> dict:
    """Run one process to its end: wall seconds and its peak resident memory (MiB).

    The peak is the child's ``ru_maxrss``, which starts from this process's own at the fork:
    keep this process small (PyG runs in a spawned one).
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else ""
    out = {"seconds": time.perf_counter() - t0, "peak_mib": usage.ru_maxrss / 1024}
    if proc.returncode:
        out["error"] = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:160]
    return out


def train(graph: Path, algo: str, procs: int, args: argparse.Namespace, tmp: Path) -> dict:
    """One ``hpcgnn train`` run: epoch time, per-edge time, peak and predicted memory."""
    metrics = tmp / f"{algo}-{procs}.json"
    metrics.unlink(missing_ok=True)
    cmd = [mpiexec(), "-n", str(procs), *hpcgnn(
        "train", str(graph), *ALGOS[algo], "--epochs", str(args.epochs), "--hidden",
        str(args.hidden), "--eval-every", "0", "--quiet", "--threads", str(args.threads),
        "--metrics", str(metrics))]
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
    if proc.returncode or not metrics.exists():
        lines = (proc.stderr + proc.stdout).strip().splitlines()
        return {"error": (lines or [f"exit {proc.returncode}"])[-1][:160]}
    doc = json.loads(metrics.read_text())
    epochs = doc["epochs"]
    steady = [e["time_s"] for e in epochs[args.warmup:]] or [e["time_s"] for e in epochs]
    mem = doc["memory"]
    peak = [(p - s) / MIB for p, s in zip(mem["peak_bytes"], mem["phases"]["start"],
                                           strict=True)]
    predicted = [b / MIB for b in mem["predicted_bytes"]]
    busiest = max(range(procs), key=lambda r: peak[r])
    edges = doc["graph"]["num_edges"] if "graph" in doc else None
    return {"grid": doc["config"].get("grid"), "epoch_s": statistics.median(steady),
            "epoch_median_all_s": doc["time"]["epoch_median_s"],
            "warmup_s": [e["time_s"] for e in epochs[:args.warmup]],
            "new_pages": [e.get("new_pages") for e in epochs], "edges": edges,
            "peak_mib": peak[busiest], "predicted_mib": predicted[busiest],
            "memory_ratio": peak[busiest] / predicted[busiest]}


def pyg(graph: Path, args: argparse.Namespace) -> dict:
    """PyG's ``GCNConv`` epoch on one process, both paths (:mod:`bench_pyg`)."""
    try:
        from bench_pyg import pyg_step
    except ImportError as exc:
        return {"error": f"PyG not installed ({exc})"}
    import torch

    from hpcgnn.config import TrainConfig

    torch.set_num_threads(args.threads)
    cfg = TrainConfig(hidden=args.hidden, epochs=args.epochs)
    out = {}
    for path in ("edge_index", "adj_t"):
        step = pyg_step(str(graph), cfg, adjacency=path)
        times = []
        for _ in range(args.epochs + 1):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        out[path] = statistics.median(times[1:])
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="250000,1000000,4000000", help="RMAT vertex counts")
    p.add_argument("--degree", type=float, default=16.0)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2,
                   help="first epochs left out of the epoch time (they page-fault memory in)")
    p.add_argument("--algos", default="1d,1.5d,halo")
    p.add_argument("--procs", default="1,2,4")
    p.add_argument("--threads", type=int, default=1, help="threads per rank")
    p.add_argument("--pyg", action="store_true", help="PyG's GCNConv, one process, both paths")
    p.add_argument("--pyg-max-nodes", type=int, default=1_000_000)
    p.add_argument("--balance", choices=("vertices", "edges"), default="edges",
                   help="what METIS balances for the halo runs (partition --balance): on RMAT "
                   "a vertex balance leaves most edges on one rank")
    p.add_argument("--tmpdir", default=None, help="where the graphs go (several GB at 4M)")
    p.add_argument("--graphs", default=None,
                   help="keep the prepared graphs and METIS partitions in this folder and "
                   "reuse those found there (METIS takes minutes at 4M); default: a "
                   "temporary folder, emptied after each size")
    p.add_argument("--name", default="bench_scale")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    procs = [int(s) for s in args.procs.split(",")]
    algos = args.algos.split(",")
    doc: dict = {"args": vars(args), "sizes": []}
    with tempfile.TemporaryDirectory(dir=args.tmpdir) as name:
        tmp = Path(name)
        store = Path(args.graphs) if args.graphs else tmp
        store.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            stem = f"rmat-{n}-d{args.degree:g}-f{args.features}"
            raw, row = store / f"{stem}.h5", {"nodes": n, "runs": []}
            row["prepare"] = {"seconds": 0.0, "peak_mib": 0.0, "reused": True}
            if not raw.exists():
                row["prepare"] = timed(hpcgnn(
                    "prepare", "synthetic", "--generator", "rmat", "--nodes", str(n),
                    "--avg-degree", str(args.degree), "--features", str(args.features),
                    "--out", str(raw), "--quiet"))
            for k in procs:
                if "error" in row["prepare"]:
                    break
                for algo in algos:
                    if algo == "1.5d" and k < 2:
                        continue
                    graph = raw
                    if algo == "halo" and k > 1:
                        graph = store / f"{stem}-metis{k}-{args.balance}.h5"
                        if not graph.exists():
                            row.setdefault("partition", {})[k] = timed(hpcgnn(
                                "partition", str(raw), "--parts", str(k), "--method", "metis",
                                "--balance", args.balance, "--out", str(graph)))
                    run = train(graph, algo, k, args, tmp)
                    row["runs"].append({"algo": algo, "procs": k, **run})
                    print(f"bench_scale: n={n} {algo} P={k}: {json.dumps(run)}", flush=True)
            if args.pyg and n <= args.pyg_max_nodes and "error" not in row["prepare"]:
                # in a process of its own: a forked child's peak (rusage) starts from its
                # parent's, so PyG's memory here would count in every later prepare
                with mp.get_context("spawn").Pool(1) as pool:
                    row["pyg"] = pool.apply(pyg, (raw, args))
            doc["sizes"].append(row)
            for f in tmp.glob("*.h5"):  # the next size needs the disk
                f.unlink()
            save(args.name, doc, tables(doc))  # what a long run has measured so far
    save(args.name, doc, tables(doc))


def tables(doc: dict) -> str:
    """Per size and run, then the growth ratios against the smallest size."""
    rows, first = [], {}
    for size in doc["sizes"]:
        n = size["nodes"]
        for r in size["runs"]:
            key = (r["algo"], r["procs"])
            if "error" in r:
                rows.append([n, r["algo"], r["procs"], "-", r["error"], "-", "-", "-", "-"])
                continue
            per_edge = r["epoch_s"] / r["edges"] * 1e9 if r.get("edges") else float("nan")
            first.setdefault(key, per_edge)
            rows.append([n, r["algo"], r["procs"], r["grid"], 1e3 * r["epoch_s"], per_edge,
                         per_edge / first[key], r["peak_mib"], r["memory_ratio"]])
    notes, balance = [], doc["args"].get("balance", "vertices")
    for size in doc["sizes"]:
        parts = size.get("partition", {})
        prep = size["prepare"]
        made = ("graph reused" if prep.get("reused") else
                f"prepare {prep['seconds']:.0f} s, {prep['peak_mib']:.0f} MiB")
        notes.append(
            f"n={size['nodes']}: {made}"
            + "".join(f"; METIS {k} parts by {balance} {v['seconds']:.0f} s,"
                      f" {v['peak_mib']:.0f} MiB"
                      + (f" ({v['error']})" if "error" in v else "")
                      for k, v in parts.items())
            + ("; PyG GCNConv " + ", ".join(
                f"{k} {v:.3f} s" if isinstance(v, float) else f"{k} {v}"
                for k, v in size["pyg"].items()) if "pyg" in size else ""))
    return markdown(
        "Scale on one box: RMAT, degree {degree:g}, {features} features, hidden {hidden}, "
        "{threads} thread(s) a rank, epoch: median after {warmup} warm-up".format(
            **{"warmup": 0, **doc["args"]}),
        ["n", "algo", "P", "grid", "epoch ms", "ns per edge", "per edge / smallest n's",
         "peak MiB (busiest)", "measured / predicted"],
        rows, notes)


if __name__ == "__main__":
    main()
