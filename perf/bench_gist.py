"""GIST against ordinary full-batch training of the same global model, side by side.

For each graph size it generates an SBM graph (``hpcgnn prepare synthetic``), then runs under
``mpiexec -n P`` with the same threads, seed, width and depth:

* ordinary full-batch training for ``E`` epochs (``--algo``, all ``P`` ranks);
* GIST with ``M`` sub-GCNs (``--subnets M``) for each ``M`` of ``--subnets``, ``K`` local
  iterations per round and ``E / K`` rounds, so every sub-GCN runs ``E`` iterations.

It reports final test and best validation accuracy, the wall-clock seconds per epoch of
total work (training steps; a GIST round counts ``K`` epochs) and the sub-model traffic
against the all-reduce bytes data parallelism would move, writes
``perf/results/bench_gist.json`` and ``.md`` and prints the ratio table last.

    python perf/bench_gist.py --sizes 3000,100000 --procs 4 --epochs 40 --hidden 256
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from tables import RESULTS, hpcgnn, markdown, mpiexec, prepare, save


def one(graph: Path, out: Path, procs: int, common: list[str], extra: list[str]) -> dict:
    """Run ``hpcgnn train`` once and return its metrics."""
    subprocess.run([mpiexec(), "-n", str(procs), *hpcgnn(
        "train", str(graph), *common, *extra, "--metrics", str(out), "--quiet")],
        check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def summarise(doc: dict, iters_per_epoch: int) -> dict:
    """Accuracy, seconds per epoch of work and bytes of one run."""
    vals = [e["val_acc"] for e in doc["epochs"] if e["val_acc"] is not None]
    steps = [e["time_s"] for e in doc["epochs"]]
    gist = doc.get("gist", {})
    return {
        "test_acc": doc["final"]["test_acc"], "best_val_acc": max(vals) if vals else None,
        "s_per_epoch_of_work": sum(steps) / (len(steps) * iters_per_epoch),
        "submodel_mb_per_round": gist.get("submodel_bytes_per_round", {}).get("measured", 0) / 1e6,
        "data_parallel_mb_per_round": gist.get("data_parallel_allreduce_bytes_per_round", 0) / 1e6,
        "comm_mb_per_epoch": sum(doc["comm"]["measured_bytes"].values()) / 1e6 / iters_per_epoch,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="3000,100000", help="SBM vertex counts")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--subnets", default="2,4")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--local-iters", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--algo", default="1d")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(RESULTS / "bench_gist"))
    args = ap.parse_args()
    k = args.local_iters
    common = ["--hidden", str(args.hidden), "--layers", str(args.layers), "--algo", args.algo,
              "--threads", str(args.threads), "--seed", "0", "--eval-every", "1"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            graph = prepare(Path(tmp) / f"sbm-{n}.h5", "sbm", n)
            base = summarise(one(graph, Path(tmp) / "full.json", args.procs,
                                 [*common, "--epochs", str(args.epochs)], []), 1)
            rows.append({"vertices": n, "run": "full-batch", **base})
            for m in (int(s) for s in args.subnets.split(",")):
                doc = one(graph, Path(tmp) / f"gist{m}.json", args.procs,
                          [*common, "--epochs", str(args.epochs)],
                          ["--mode", "gist", "--subnets", str(m), "--local-iters", str(k),
                           "--rounds", str(max(1, args.epochs // k))])
                rows.append({"vertices": n, "run": f"gist M={m} K={k}", **summarise(doc, k),
                             "base": base})
    table = markdown(
        f"GIST vs full-batch ({args.procs} ranks, {args.algo}, hidden {args.hidden}, "
        f"{args.layers} layers, {args.epochs} epochs, {args.threads} thread(s)/rank)",
        ["vertices", "run", "test acc", "Δ acc (points)", "s/epoch of work", "speed-up",
         "sub-model MB/round", "data-parallel MB/round"],
        [[r["vertices"], r["run"], f"{r['test_acc']:.4f}",
          f"{100 * (r['test_acc'] - r.get('base', r)['test_acc']):+.1f}",
          f"{r['s_per_epoch_of_work']:.4f}",
          f"{r.get('base', r)['s_per_epoch_of_work'] / r['s_per_epoch_of_work']:.2f}x",
          f"{r['submodel_mb_per_round']:.3f}", f"{r['data_parallel_mb_per_round']:.3f}"]
         for r in rows],
    )
    out = Path(args.out)
    save(out.name, {"args": vars(args), "rows": rows}, table, out.parent)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
