"""GIST against ordinary full-batch training of the same global model, side by side.

For each graph size it generates an SBM graph (``hpcgnn prepare synthetic``), then runs under
``mpiexec -n P`` with the same threads, seed, width and depth:

* ordinary full-batch training for ``E`` epochs (``--algo``, all ``P`` ranks);
* GIST with ``M`` sub-GCNs (``--subnets M``) for each ``M`` of ``--subnets`` and ``K`` local
  iterations per round: with ``--work budget`` (the default, the paper's) ``--epochs E`` is
  the total budget, each sub-GCN runs ``E / M`` iterations (``ceil(E / (M K))`` rounds);
  with ``--work full`` ``E / K`` rounds, so every sub-GCN runs ``E`` iterations.

It reports final test and best validation accuracy, the wall-clock seconds per epoch of
total work (training steps; a GIST round counts ``K`` epochs) and the sub-model traffic
against the all-reduce bytes data parallelism would move, writes
``perf/results/bench_gist.json`` and ``.md`` and prints the ratio table last.

With ``--sampler sage`` (or ``ladies``) the groups train sampled minibatches instead: the
baseline is ``--mode minibatch`` of the same global model for ``E`` epochs, and GIST with
``M`` sub-models runs ``E`` rounds of ``K`` = the optimizer steps of one epoch of a group
of ``P / M`` ranks, so each round is one epoch of every group (one epoch of work). The
results go to ``perf/results/bench_gist_sampler.json`` and ``.md``.

    python perf/bench_gist.py --sizes 3000,100000 --procs 4 --epochs 40 --hidden 256
    python perf/bench_gist.py --sizes 3000 --procs 4 --epochs 10 --sampler sage --subnets 1,2,4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from tables import RESULTS, hpcgnn, markdown, mpiexec, prepare, save

from hpcgnn.sampling.spec import optimizer_steps


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


COLUMNS = ("test acc", "Δ acc (points)", "s/epoch of work", "speed-up", "sub-model MB/round",
           "data-parallel MB/round")


def cells(r: dict) -> list[str]:
    """The :data:`COLUMNS` of a row, against its baseline ``r["base"]`` (itself if none)."""
    base = r.get("base", r)
    return [
        f"{r['test_acc']:.4f}", f"{100 * (r['test_acc'] - base['test_acc']):+.1f}",
        f"{r['s_per_epoch_of_work']:.4f}",
        f"{base['s_per_epoch_of_work'] / r['s_per_epoch_of_work']:.2f}x",
        f"{r['submodel_mb_per_round']:.3f}", f"{r['data_parallel_mb_per_round']:.3f}",
    ]


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
    ap.add_argument("--work", choices=["budget", "full"], default="budget",
                    help="budget: --epochs is the total, E/M per sub-GCN (the paper's); "
                         "full: every sub-GCN trains E iterations")
    ap.add_argument("--rescale", action="store_true", help="GIST runs with --gist-rescale")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sampler", choices=["sage", "ladies"], default=None,
                    help="compare GIST with sampled groups against --mode minibatch")
    ap.add_argument("--fanout", default=None, help="sage fanouts (default: 10 per layer)")
    ap.add_argument("--layer-size", default="512", help="ladies vertices per layer")
    ap.add_argument("--batch-size", type=int, default=256, help="seeds per minibatch per rank")
    ap.add_argument("--out", default=None,
                    help="results name (default: perf/results/bench_gist[_sampler])")
    args = ap.parse_args()
    if args.sampler is not None:
        sampled(args)
        return
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
                rounds = [] if args.work == "budget" else [
                    "--rounds", str(max(1, args.epochs // k))]
                doc = one(graph, Path(tmp) / f"gist{m}.json", args.procs,
                          [*common, "--epochs", str(args.epochs)],
                          ["--mode", "gist", "--subnets", str(m), "--local-iters", str(k),
                           *rounds, *(["--gist-rescale"] if args.rescale else [])])
                work = doc["gist"].get("subnet_epochs_of_work")
                rows.append({"vertices": n, "run": f"gist M={m} K={k} ({work:g} epochs each)"
                             if work is not None else f"gist M={m} K={k}",
                             **summarise(doc, k), "base": base})
    table = markdown(
        f"GIST vs full-batch ({args.procs} ranks, {args.algo}, hidden {args.hidden}, "
        f"{args.layers} layers, {args.epochs} epochs"
        f"{' of budget' if args.work == 'budget' else ' per sub-GCN'},"
        f" {args.threads} thread(s)/rank)",
        ["vertices", "run", *COLUMNS],
        [[r["vertices"], r["run"], *cells(r)] for r in rows],
    )
    out = Path(args.out or RESULTS / "bench_gist")
    save(out.name, {"args": vars(args), "rows": rows}, table, out.parent)


def sampled(args: argparse.Namespace) -> None:
    """GIST with ``--sampler`` against ``--mode minibatch`` of the same global model."""
    sizes = args.fanout or ",".join(["10"] * args.layers)
    flags = ["--fanout", sizes] if args.sampler == "sage" else [
        "--layer-size", args.layer_size, "--layers", str(args.layers)]
    common = ["--hidden", str(args.hidden), "--threads", str(args.threads), "--seed", "0",
              "--eval-every", "1", "--sampler", args.sampler, *flags,
              "--batch-size", str(args.batch_size), "--epochs", str(args.epochs)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            graph = prepare(Path(tmp) / f"sbm-{n}.h5", "sbm", n)
            doc = one(graph, Path(tmp) / "mb.json", args.procs, common, ["--mode", "minibatch"])
            base = summarise(doc, 1)
            batches, bulk = doc["sampling"]["batches_per_epoch"], doc["sampling"]["bulk"]
            rows.append({"vertices": n, "run": "minibatch",
                         "steps": doc["sampling"]["optimizer_steps_per_epoch"], **base})
            for m in (int(s) for s in args.subnets.split(",")):
                k = optimizer_steps(batches, bulk, args.procs // m)
                doc = one(graph, Path(tmp) / f"gist{m}.json", args.procs, common,
                          ["--mode", "gist", "--subnets", str(m), "--local-iters", str(k),
                           "--rounds", str(args.epochs)])
                rows.append({"vertices": n, "run": f"gist M={m} K={k}", "steps": k,
                             **summarise(doc, 1), "base": base})
    table = markdown(
        f"GIST with {args.sampler} minibatches vs minibatch training ({args.procs} ranks,"
        f" {args.sampler} {' '.join(flags[1::2])}, batch {args.batch_size}/rank, hidden"
        f" {args.hidden}, {args.epochs} epochs, {args.threads} thread(s)/rank)",
        ["vertices", "run", "steps/epoch", *COLUMNS],
        [[r["vertices"], r["run"], r["steps"], *cells(r)] for r in rows],
        notes=["An epoch of work: one pass over the training set by every group (a GIST round"
               " of K steps, K = a group's steps per epoch); minibatch: one epoch on all ranks."
               " Sub-model MB/round includes the replicated biases' all-reduce.",
               f"Load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
               " (times on a shared machine are only as steady as that)."],
    )
    out = Path(args.out or RESULTS / "bench_gist_sampler")
    save(out.name, {"args": vars(args), "rows": rows}, table, out.parent)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
