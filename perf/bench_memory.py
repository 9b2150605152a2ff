"""Measured peak memory per rank vs the memory check's prediction, full-batch and minibatch.

Runs ``hpcgnn train`` under ``mpiexec`` for 1D, 1.5D (``c = 2``), 2D and halo at each
``--procs`` (and with ``--minibatch`` the minibatch samplers in both graph layouts:
:func:`hpcgnn.cost.minibatch_memory.minibatch_memory_parts`) on one generated graph and
compares each rank's measured peak above the
process's start (the metrics' ``memory.peak_bytes - memory.phases.start``) with the
prediction (``memory.predicted_bytes``: the memory check's estimate, the one ``hpcgnn
model`` prints, :func:`hpcgnn.cost.ranking.memory_parts`). The busiest rank's ratio is
the table's; the setup phase (the graph's check, the blocks loaded) and the training
phases (peak above setup) are compared with the parts that fall in them. Writes
``perf/results/bench_memory.{json,md}``. A script, not a test: the peaks depend on the
machine's allocator and libraries.

    python perf/bench_memory.py                          # SBM 150k, degree 16, 64 features
    python perf/bench_memory.py --generator rmat --nodes 100000 --procs 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from tables import hpcgnn, markdown, mpiexec, prepare, save

from hpcgnn.config import TrainConfig
from hpcgnn.io.reader import GraphFile
from hpcgnn.training.modes.fullbatch import FullBatchMode
from hpcgnn.training.modes.minibatch import MinibatchMode

MIB = 2**20
#: Each run's flags, the smallest rank count it needs and its mode object.
RUNS = {
    "1d": (["--algo", "1d"], 1, FullBatchMode(algo="1d")),
    "1.5d": (["--algo", "1.5d", "--replication", "2"], 2,
             FullBatchMode(algo="1.5d", replication=2)),
    "2d": (["--algo", "2d"], 1, FullBatchMode(algo="2d")),
    "halo": (["--algo", "halo"], 1, FullBatchMode(algo="halo")),
}
#: ``--minibatch``: the samplers in both graph layouts.
MINIBATCH = {
    f"{sampler} {layout}": (["--mode", "minibatch", "--sampler", sampler, "--graph-layout",
                             layout], 1, MinibatchMode(sampler=sampler, graph_layout=layout))
    for sampler in ("sage", "ladies", "cluster") for layout in ("replicated", "partitioned")
    if not (sampler == "cluster" and layout == "partitioned")
}
#: The parts of the prediction held once the model is built (the setup phase).
HELD = ("graph_blocks", "graph_pattern", "features", "weights_adam")


def measure(graph: str, algo: str, extra: list[str], procs: int, args: argparse.Namespace,
            tmp: Path) -> dict:
    """One run's memory section, reduced to MiB per rank."""
    metrics = tmp / f"{algo.replace(' ', '-')}-{procs}.json"
    cmd = [mpiexec(), "-n", str(procs), *hpcgnn(
        "train", graph, *extra, "--epochs", str(args.epochs),
        "--hidden", str(args.hidden), "--quiet", "--threads", "1", "--metrics", str(metrics))]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    doc = json.loads(metrics.read_text())
    mem = doc["memory"]
    start = mem["phases"]["start"]
    peak = [(p - s) / MIB for p, s in zip(mem["peak_bytes"], start, strict=True)]
    setup = [(p - s) / MIB for p, s in zip(mem["phases"]["setup"], start, strict=True)]
    return {"grid": doc["config"]["grid"], "peak_mib": peak, "setup_mib": setup,
            "start_mib": [s / MIB for s in start],
            "predicted_mib": [b / MIB for b in mem["predicted_bytes"]]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--generator", choices=("sbm", "rmat"), default="sbm")
    p.add_argument("--nodes", type=int, default=150_000)
    p.add_argument("--degree", type=float, default=16.0)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--procs", default="1,2,4", help="rank counts, comma-separated")
    p.add_argument("--minibatch", action="store_true",
                   help="the minibatch samplers instead of the full-batch algorithms")
    p.add_argument("--name", default="bench_memory", help="results name in perf/results")
    args = p.parse_args()
    runs = MINIBATCH if args.minibatch else RUNS
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        graph = str(prepare(Path(tmp) / "g.h5", args.generator, args.nodes,
                            degree=args.degree, features=args.features))
        with GraphFile(graph) as gf:
            meta = gf.meta
        for procs in (int(x) for x in args.procs.split(",")):
            for algo, (extra, least, mode) in runs.items():
                if procs < least:
                    continue
                cfg = TrainConfig(hidden=args.hidden)
                if isinstance(mode, MinibatchMode):  # its samples, layers and layer
                    cfg = TrainConfig(hidden=args.hidden, model=mode.default_model)
                    mode = mode.for_run(cfg, procs)
                    cfg = mode.resolve(cfg, procs)
                est = mode.memory(cfg, meta, mode.grid_shape(procs))
                run = measure(graph, algo, extra, procs, args, Path(tmp))
                parts = {k: v / MIB for k, v in (est.parts or {}).items()}
                busiest = max(range(procs), key=lambda r: run["peak_mib"][r])
                held = sum(parts.get(k, 0.0) for k in HELD)
                results.append({
                    "algo": algo, "procs": procs, **run, "parts_mib": parts,
                    "model_mib": est.bytes / MIB,
                    "recorded_equals_model": all(
                        abs(x - est.bytes / MIB) < 1e-6 for x in run["predicted_mib"]),
                    "ratio": run["peak_mib"][busiest] / (est.bytes / MIB),
                    "training_mib": run["peak_mib"][busiest] - run["setup_mib"][busiest],
                    "predicted_training_mib": (
                        est.bytes / MIB - held - parts.get("temporaries", 0.0)),
                })
    rows = [[r["algo"], r["grid"], r["procs"], r["peak_mib"][i], r["model_mib"],
             r["ratio"], r["setup_mib"][i],
             sum(r["parts_mib"].get(k, 0.0) for k in (*HELD, "temporaries")),
             r["training_mib"], r["predicted_training_mib"]]
            for r in results
            for i in [max(range(r["procs"]), key=lambda k, r=r: r["peak_mib"][k])]]
    table = markdown(
        f"Peak memory per rank, measured vs predicted ({args.generator} {args.nodes} vertices,"
        f" degree {args.degree:g}, {args.features} features, hidden {args.hidden},"
        f" {args.epochs} epochs evaluated each; MiB above the process's start, busiest rank)",
        ["algo", "grid", "P", "measured", "predicted", "measured / predicted",
         "setup measured", "setup predicted", "training measured", "training predicted"],
        rows,
        ["setup: the graph's check, the blocks loaded and the model built (predicted: "
         "graph_blocks + features + weights_adam + temporaries); training: the peak above it "
         "(predicted: activations + attention + comm_buffers + heap_reuse). Every run's "
         "recorded `predicted_bytes` equals the model's: "
         f"{all(r['recorded_equals_model'] for r in results)}."],
    )
    save(args.name, {"args": vars(args), "results": results}, table)


if __name__ == "__main__":
    main()
