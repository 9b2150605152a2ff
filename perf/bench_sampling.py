"""Minibatch GraphSAGE: hpcgnn against PyG ``SAGEConv`` + its neighbour loader, side by side.

For each graph size it generates an SBM graph (``perf/tables.py``'s generator, features
and classes as ``perf/bench_pyg.py``), then trains, for every seed of ``--seeds``, with the
same global batch ``B``, fan-out, hidden width, layers, lr, weight decay, dropout, epochs
and threads:

* ours: ``hpcgnn train --mode minibatch --sampler sage --global-batch B`` under
  ``mpiexec -n P`` for each ``P`` of ``--procs`` (``B / P`` seeds per rank and step);
* the peer: PyG's ``SAGEConv`` layers (mean aggregation, root weight, bias) fed by PyG's
  ``NeighborLoader`` at batch ``B`` (``shuffle=True``, directional sampling without
  replacement), one process. Where the loader's kernel is missing (it needs pyg-lib or
  torch-sparse) it raises ``ImportError``; the loader then runs with
  :class:`peers.neighbor_sampler.TorchNeighborSampler`, PyG's sampler with that kernel in
  plain torch, and the table says so.

Both models drop out every layer's input and use ReLU between layers; each trains with its
own initialisation (ours Glorot with zero biases, PyG its ``Linear`` defaults) and is
evaluated on the full graph (full-neighbourhood mean) after the last epoch. A control run,
the PyG peer started from hpcgnn's weights for the same seed, separates the initialisation
from the rest. Reported per graph and run: final test and validation accuracy (mean and
spread over seeds), the validation accuracy at half the epochs (every run records its
validation curve, every ``--eval-every`` epochs, untimed), the test difference to PyG in
points with its standard error, median seconds per training epoch, optimizer steps per
second (one step = one global batch ``B``) and the ratios ours / PyG. Writes
``perf/results/bench_sampling.{json,md}`` and prints the table last.

The defaults compare converged models, not initialisations: both graphs' validation
curves plateau within the first half of the epochs (3K: by about 30 of 60; 20K: by about
15 of 30), after which a run's final accuracy still moves by about a point from epoch
to epoch (Adam at lr 0.01 on sampled batches with dropout), hence six seeds. The global
batch (200) divides both training sets (1800 and 12000 vertices) and is a multiple of
4 x 50, so every optimizer step trains a full global batch on 1 rank, on 4 ranks and in
PyG. With a ragged last batch the sides' last steps differ: at 1 rank and in PyG the
remainder is a step of its own, while at ``P`` ranks hpcgnn's contiguous bulk shares put
it in a step with full batches. That, not the distribution, made 4 ranks beat 1 rank at
``B = 256`` on the 3K graph (1800 = 7 x 256 + 8: every epoch ends with a full Adam step
on 8 seeds at 1 rank; 40 epochs, seeds 0-4, test accuracy: 1 rank 0.945, 4 ranks 0.958;
4 ranks with round-robin bulk shares, whose steps are the 1-rank run's global batches
seed for seed: 0.947; 1 rank at ``B = 225``, the same 8 steps all full: 0.961;
``B = 200``: 1 rank 0.961, 4 ranks 0.964). A step at ``P`` ranks has the gradient of the
serial mean loss over the same seeds (``tests/training/test_minibatch.py``).

    python perf/bench_sampling.py                       # 3K (60 epochs) and 20K (30) SBM
    python perf/bench_sampling.py --smoke               # a few seconds: the chain works
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from peers.neighbor_sampler import TorchNeighborSampler
from tables import hpcgnn, markdown, mpiexec, prepare, save
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import SAGEConv

ACCEPT_POINTS = 1.0


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def run_ours(graph: Path, procs: int, seed: int, args: argparse.Namespace, out: Path) -> dict:
    """``hpcgnn train --mode minibatch --sampler sage`` on ``procs`` ranks; its summary."""
    metrics = out / f"ours-p{procs}-s{seed}.json"
    cmd = [mpiexec(), "-n", str(procs), *hpcgnn(
        "train", str(graph), "--mode", "minibatch", "--sampler", "sage",
        "--fanout", args.fanout, "--global-batch", str(args.global_batch),
        "--layers", str(len(ints(args.fanout))), "--hidden", str(args.hidden),
        "--epochs", str(args.epochs), "--lr", str(args.lr),
        "--weight-decay", str(args.weight_decay), "--dropout", str(args.dropout),
        "--seed", str(seed), "--threads", str(args.threads),
        "--eval-every", str(args.eval_every), "--metrics", str(metrics), "--quiet")]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    doc = json.loads(metrics.read_text())
    epoch_s = statistics.median(e["time_s"] for e in doc["epochs"])
    steps = doc["sampling"]["optimizer_steps_per_epoch"]
    curve = {e["epoch"]: e["val_acc"] for e in doc["epochs"] if e["val_acc"] is not None}
    return {"test_acc": doc["final"]["test_acc"], "val_acc": doc["final"]["val_acc"],
            "epoch_s": epoch_s, "steps_per_epoch": steps, "steps_per_s": steps / epoch_s,
            "batches_per_epoch": doc["sampling"]["batches_per_epoch"],
            "global_batch": doc["sampling"]["global_batch"], "val_curve": curve}


class PygSage(torch.nn.Module):
    """PyG ``SAGEConv`` layers, dropout on every layer's input, ReLU between layers."""

    def __init__(self, dims: list[int], dropout: float) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList(
            SAGEConv(i, o, aggr="mean") for i, o in zip(dims[:-1], dims[1:], strict=True))
        self.p = dropout

    def load_hpcgnn_init(self, seed: int) -> None:
        """Set the weights to hpcgnn's for ``seed``: Glorot ``W_self, W_neigh``, zero biases."""
        from hpcgnn.kinds import SAGE
        from hpcgnn.nn.init import init_weights

        dims = [c.in_channels for c in self.convs] + [self.convs[-1].out_channels]
        mats = init_weights(dims, seed, np.float32, SAGE)
        with torch.no_grad():
            for i, conv in enumerate(self.convs):
                conv.lin_r.weight.copy_(mats[2 * i].T)  # root: W_self
                conv.lin_l.weight.copy_(mats[2 * i + 1].T)  # neighbours: W_neigh
                conv.lin_l.bias.zero_()

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x = torch.nn.functional.dropout(x, self.p, training=self.training)
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = torch.relu(x)
        return x


def load_data(graph: Path) -> tuple[Data, dict[str, torch.Tensor], int]:
    """The graph file as a PyG ``Data`` (``edge_index[0]`` the source) with its masks."""
    from hpcgnn.io import GraphFile

    with GraphFile(str(graph)) as gf:
        n = gf.meta.num_nodes
        a = gf.read_csr(0, n).tocoo()
        masks = {k: torch.from_numpy(gf.read_mask(k, 0, n)) for k in ("train", "val", "test")}
        data = Data(x=torch.from_numpy(gf.read_features(0, n)),
                    y=torch.from_numpy(gf.read_labels(0, n)).long(),
                    edge_index=torch.from_numpy(np.vstack([a.row, a.col]).astype(np.int64)),
                    num_nodes=n)
    return data, masks, gf.meta.num_classes


def make_loader(
    data: Data, fanout: list[int], train: torch.Tensor, batch: int
) -> tuple[NeighborLoader, str]:
    """PyG's ``NeighborLoader``; with the torch kernel when PyG's own raises ImportError."""
    kwargs = {"num_neighbors": fanout, "input_nodes": train, "batch_size": batch,
              "shuffle": True}
    with warnings.catch_warnings():  # "without pyg-lib is deprecated": reported below
        warnings.simplefilter("ignore")
        loader = NeighborLoader(data, **kwargs)
    try:
        loader.collate_fn(torch.arange(min(2, len(train))))  # PyG samples in collate_fn
        return loader, "PyG NeighborLoader (PyG's own sampling kernel)"
    except ImportError as err:
        sampler = TorchNeighborSampler(data, fanout)
        why = f"PyG NeighborLoader + TorchNeighborSampler (PyG's kernel: ImportError: {err})"
        return NeighborLoader(data, neighbor_sampler=sampler, **kwargs), why


def evaluate(model: PygSage, data: Data, masks: dict[str, torch.Tensor]) -> dict[str, float]:
    """Accuracy per mask on the full graph (full-neighbourhood mean, no dropout)."""
    model.eval()
    with torch.no_grad():
        pred = model(data.x, data.edge_index).argmax(1)
    return {k: float((pred[m] == data.y[m]).float().mean()) for k, m in masks.items()}


def run_pyg(graph: Path, seed: int, args: argparse.Namespace, init: str = "pyg") -> dict:
    """Train the PyG peer for ``args.epochs`` epochs in this process; its summary.

    ``init="hpcgnn"`` starts from hpcgnn's weights for ``seed`` instead of PyG's defaults.
    """
    torch.set_num_threads(args.threads)
    data, masks, classes = load_data(graph)
    train = masks["train"].nonzero().flatten()
    torch.manual_seed(seed)
    fanout = ints(args.fanout)
    loader, loader_name = make_loader(data, fanout, train, args.global_batch)
    dims = [data.num_features] + [args.hidden] * (len(fanout) - 1) + [classes]
    model = PygSage(dims, args.dropout)
    if init == "hpcgnn":
        model.load_hpcgnn_init(seed)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    epochs, steps, curve = [], 0, {}
    for epoch in range(1, args.epochs + 1):
        model.train()
        t0, steps = time.perf_counter(), 0
        for batch in loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)[: batch.batch_size]
            loss = torch.nn.functional.cross_entropy(out, batch.y[: batch.batch_size])
            loss.backward()
            opt.step()
            steps += 1
        epochs.append(time.perf_counter() - t0)
        if args.eval_every and (epoch % args.eval_every == 0 or epoch == args.epochs):
            curve[epoch] = evaluate(model, data, masks)["val"]
    acc = evaluate(model, data, masks)
    epoch_s = statistics.median(epochs)
    return {"test_acc": acc["test"], "val_acc": acc["val"], "epoch_s": epoch_s,
            "steps_per_epoch": steps, "steps_per_s": steps / epoch_s,
            "batches_per_epoch": steps, "global_batch": args.global_batch,
            "loader": loader_name, "val_curve": curve}


def spread(values: list[float]) -> dict:
    """Mean, sample standard deviation (0 for one value), min and max."""
    return {"mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values), "values": values}


def points_apart(a: dict, b: dict) -> tuple[float, float]:
    """``a - b`` of two :func:`spread` means in points, and its standard error."""
    se = (a["std"] ** 2 / len(a["values"]) + b["std"] ** 2 / len(b["values"])) ** 0.5
    return 100 * (a["mean"] - b["mean"]), 100 * se


def mean_curve(rs: list[dict]) -> dict[int, float]:
    """The validation accuracy per evaluated epoch, averaged over the seeds' runs."""
    return {e: statistics.fmean(r["val_curve"][e] for r in rs) for e in rs[0]["val_curve"]}


def halfway(curve: dict[int, float], epochs: int) -> float | None:
    """The curve at the last evaluated epoch up to half of ``epochs`` (``None``: none)."""
    early = [e for e in curve if e <= epochs // 2]
    return curve[max(early)] if early else None


RUNS = {"pyg": "PyG SAGEConv", "pyg_hpcgnn_init": "PyG SAGEConv, hpcgnn's init"}


def training_vertices(graph: Path) -> int:
    """The size of the graph's training set."""
    from hpcgnn.io import GraphFile

    with GraphFile(str(graph)) as gf:
        return int(gf.read_mask("train", 0, gf.meta.num_nodes).sum())


def bench_graph(graph: Path, args: argparse.Namespace, out: Path) -> dict:
    """Every run of one graph over the seeds, summarised."""
    runs: dict[str, list[dict]] = {name: [] for name in RUNS}
    for seed in ints(args.seeds):
        runs["pyg"].append(run_pyg(graph, seed, args))
        runs["pyg_hpcgnn_init"].append(run_pyg(graph, seed, args, init="hpcgnn"))
        for p in ints(args.procs):
            runs.setdefault(f"ours_p{p}", []).append(run_ours(graph, p, seed, args, out))
    summary: dict = {}
    for name, rs in runs.items():
        summary[name] = {k: spread([r[k] for r in rs])
                         for k in ("test_acc", "val_acc", "epoch_s", "steps_per_s")}
        summary[name]["steps_per_epoch"] = rs[0]["steps_per_epoch"]
        summary[name]["batches_per_epoch"] = rs[0]["batches_per_epoch"]
        summary[name]["val_curve"] = curve = mean_curve(rs)
        summary[name]["val_acc_halfway"] = halfway(curve, args.epochs)
    for name in runs:
        if name.startswith("ours"):
            test = summary[name]["test_acc"]
            points, se = points_apart(test, summary["pyg"]["test_acc"])
            summary[name]["test_points_vs_pyg"] = points
            summary[name]["test_points_vs_pyg_se"] = se
            summary[name]["within_1_point"] = abs(points) <= ACCEPT_POINTS
            summary[name]["test_points_vs_pyg_same_init"] = points_apart(
                test, summary["pyg_hpcgnn_init"]["test_acc"])[0]
    summary["loader"] = runs["pyg"][0]["loader"]
    return {"runs": runs, "summary": summary}


def table(result: dict) -> str:
    """One row per graph and run: accuracy, speed, ratios against PyG."""
    rows = []
    for g in result["graphs"]:
        s = g["summary"]
        pyg = s["pyg"]
        for name in [*RUNS, *(f"ours_p{p}" for p in result["procs"])]:
            r = s[name]
            ours = name.startswith("ours")
            rows.append([
                g["nodes"], g["epochs"], RUNS.get(name, f"hpcgnn, {name[6:]} rank(s)"),
                f"{r['test_acc']['mean']:.4f} ± {r['test_acc']['std']:.4f}",
                f"{r['val_acc']['mean']:.4f} ± {r['val_acc']['std']:.4f}",
                "-" if r["val_acc_halfway"] is None else f"{r['val_acc_halfway']:.4f}",
                f"{r['test_points_vs_pyg']:+.2f} ± {r['test_points_vs_pyg_se']:.2f}"
                if ours else "-",
                ("yes" if r["within_1_point"] else "no") if ours else "-",
                f"{r['test_points_vs_pyg_same_init']:+.2f}" if ours else "-",
                r["steps_per_epoch"], r["epoch_s"]["mean"], r["steps_per_s"]["mean"],
                r["steps_per_s"]["mean"] / pyg["steps_per_s"]["mean"],
            ])
    loaders = sorted({g["summary"]["loader"] for g in result["graphs"]})
    ragged = [f"{g['nodes']} vertices: {g['train_vertices']} training vertices, a last step "
              f"of {g['last_step_seeds']}" for g in result["graphs"] if g["last_step_seeds"]]
    full = ("Every step trains a full global batch on every side (the training set is a "
            "multiple of it), so 1 rank, P ranks and PyG take the same steps on the same "
            "number of seeds." if not ragged else
            "Not every step is a full global batch (" + "; ".join(ragged) + "): the last step "
            "of an epoch trains the rest alone at 1 rank and in PyG, while at P ranks it "
            "joins the last bulk's steps, so the sides' last steps differ.")
    return markdown(
        f"Minibatch GraphSAGE: hpcgnn vs PyG SAGEConv + NeighborLoader (SBM, global batch "
        f"{result['global_batch']}, fan-out {result['fanout']}, hidden {result['hidden']}, "
        f"{result['threads']} thread(s) per process, seeds {result['seeds']})",
        ["vertices", "epochs", "run", "test acc (mean ± std)", "val acc",
         "val acc at half the epochs", "test Δ vs PyG (pt, ± s.e.)",
         f"within {ACCEPT_POINTS:g} pt", "Δ vs PyG same init (pt)", "steps/epoch", "epoch s",
         "steps/s", "steps/s vs PyG"],
        rows,
        [f"PyG loader: {name}." for name in loaders]
        + ["Both sides: SAGEConv-mean layers (root weight, bias), dropout on every layer's input, "
           "ReLU between layers, Adam with L2 weight decay, the mean cross-entropy over the "
           "step's seeds (hpcgnn: over every rank's), "
           "accuracy after the last epoch on the full graph (full-neighbourhood mean). "
           "\"PyG SAGEConv\" starts from PyG's Linear defaults, \"hpcgnn's init\" from "
           "hpcgnn's Glorot weights and zero biases for the same seed (isolates the "
           "initialisation). One optimizer step = one global batch (PyG: one loader batch; "
           "hpcgnn at P ranks: B/P seeds per rank, gradients summed). steps/s vs PyG > 1 "
           "means hpcgnn is faster; the 2-core machine was shared and 4 ranks oversubscribe "
           "it, so read the times as one run's ratios.", full,
           "\"val acc at half the epochs\": the mean validation curve (every "
           f"{result['eval_every']} epochs, in the JSON) at half the epochs, against the "
           "final val acc: training has plateaued when they agree."],
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="3000,20000", help="SBM vertex counts, one graph each")
    p.add_argument("--procs", default="1,4", help="hpcgnn rank counts")
    p.add_argument("--global-batch", type=int, default=200,
                   help="seeds per optimizer step (default: the 60%% training sets of the "
                        "default sizes are multiples of it, and of 4 x 50)")
    p.add_argument("--fanout", default="10,5", help="per hop, the seeds' hop first")
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--epochs", default="60,30",
                   help="epochs per graph of --sizes (one value: every graph)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--seeds", default="0,1,2,3,4,5")
    p.add_argument("--eval-every", type=int, default=5,
                   help="validation accuracy every K epochs (the curves in the JSON; 0: off)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--smoke", action="store_true",
                   help="a 1000-vertex graph, 2 epochs, one seed, 1 and 2 ranks (not saved "
                        "unless --name is given)")
    p.add_argument("--name", default=None, help="results name in perf/results "
                                                 "(default: bench_sampling)")
    args = p.parse_args()
    if args.smoke:
        args.sizes, args.procs, args.epochs, args.seeds = "1000", "1,2", "2", "0"
    t0 = time.perf_counter()
    epochs = ints(args.epochs)
    result = {"global_batch": args.global_batch, "fanout": args.fanout, "hidden": args.hidden,
              "layers": len(ints(args.fanout)), "lr": args.lr,
              "weight_decay": args.weight_decay, "dropout": args.dropout,
              "threads": args.threads, "seeds": args.seeds, "procs": ints(args.procs),
              "eval_every": args.eval_every,
              "graphs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in ints(args.sizes):
            graph = prepare(Path(tmp) / f"sbm-{n}.h5", "sbm", n)
            args.epochs = epochs[min(len(result["graphs"]), len(epochs) - 1)]
            train = training_vertices(graph)
            result["graphs"].append({"nodes": n, "epochs": args.epochs, "train_vertices": train,
                                     "last_step_seeds": train % args.global_batch,
                                     "graph": f"generated SBM, {n} vertices, mean degree 16, "
                                              "64 features, 8 classes",
                                     **bench_graph(graph, args, Path(tmp))})
    result["seconds"] = time.perf_counter() - t0
    name = args.name or (None if args.smoke else "bench_sampling")
    if name is None:
        print(table(result))
    else:
        save(name, result, table(result))


if __name__ == "__main__":
    main()
