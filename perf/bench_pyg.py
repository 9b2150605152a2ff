"""One rank of hpcgnn vs PyTorch Geometric's GCNConv, side by side, epoch by epoch.

Same graph (an hpcgnn HDF5 file), same layers, hidden size, dtype, threads, dropout and
optimiser; both sides run full-batch epochs (forward, backward, Adam step). Each side
lives in its own process, as each tool runs for its users (``hpcgnn train`` keeps freed
memory for reuse, PyG keeps the allocator's default), and the two are *interleaved*: epoch
``e`` of one, then epoch ``e`` of the other, the order alternating, so both see the same
machine state. ``--repeats`` repetitions give one median ratio each; the table reports the
median of the ratios and their range, last. Writes ``perf/results/NAME.{json,md}``.
Needs the ``perf`` extra (``torch_geometric``).

Graphs: files given, ``--planetoid-root DIR`` (the real ``ind.NAME.*`` files of
``--planetoid``, converted with ``hpcgnn prepare planetoid``), ``--planetoid-like`` (files
of the same format and sizes, see ``planetoid_like.py``, where the real ones cannot be
downloaded), ``--rmat`` / ``--sbm`` vertex counts (generated).

    python perf/bench_pyg.py --planetoid-root data/Planetoid --planetoid cora,citeseer
    python perf/bench_pyg.py --planetoid-like cora,citeseer --sbm 20000 --rmat 100000
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from tables import hpcgnn, markdown, prepare, save


def hpcgnn_step(path: str, cfg) -> Callable[[], float]:
    """One full-batch epoch of hpcgnn's 1D model on one rank (what ``hpcgnn train`` runs).

    The layers of ``cfg.model`` (GCN, GraphSAGE, GIN or GAT).
    """
    from mpi4py import MPI

    from hpcgnn.grid import ProcessGrid
    from hpcgnn.models.block_row import BlockRowGCN
    from hpcgnn.nn.gcn import cross_entropy_sum
    from hpcgnn.nn.optim import make_optimizer

    grid = ProcessGrid.create(MPI.COMM_WORLD, "1d")
    model = BlockRowGCN.read(path, grid, cfg)
    opt = make_optimizer(model.weights, cfg, cfg.kind.weights_per_layer)
    n_train = int(model.masks["train"].sum())
    epoch = [0]

    def step() -> float:
        opt.zero_grad()
        loss = cross_entropy_sum(model.logits(epoch[0]), model.y, model.masks["train"]) / n_train
        loss.backward()
        model.reduce_gradients()
        opt.step()
        epoch[0] += 1
        return float(loss.detach())

    return step


def pyg_layers(cfg, dims: list[int]) -> torch.nn.ModuleList:
    """PyG's layers of ``cfg.model`` without bias, as hpcgnn's: ``GCNConv`` (cached
    normalisation), ``SAGEConv`` (mean, root weight), ``GINConv`` (``Linear, ReLU, Linear``,
    ``cfg.gin_eps``) or ``GATConv`` (``cfg.heads`` concatenated, ``cfg.output_heads``
    averaged on the last layer, ``cfg.attention_p`` on the coefficients)."""
    from torch_geometric import nn as pyg

    last = len(dims) - 2
    pairs = list(zip(dims[:-1], dims[1:], strict=True))

    def layer(k: int, i: int, o: int) -> torch.nn.Module:
        if cfg.model == "sage":
            return pyg.SAGEConv(i, o, aggr="mean", bias=False)
        if cfg.model == "gin":
            mlp = torch.nn.Sequential(torch.nn.Linear(i, o, bias=False), torch.nn.ReLU(),
                                      torch.nn.Linear(o, o, bias=False))
            return pyg.GINConv(mlp, eps=cfg.gin_eps)
        if cfg.model == "gat":
            heads = cfg.output_heads if k == last else cfg.heads
            width = o if k == last else o // heads
            return pyg.GATConv(i, width, heads=heads, concat=k != last, bias=False,
                               dropout=cfg.attention_p)
        return pyg.GCNConv(i, o, cached=True, bias=False)

    return torch.nn.ModuleList(layer(k, i, o) for k, (i, o) in enumerate(pairs))


def pyg_step(path: str, cfg, device: str = "cpu") -> Callable[[], float]:
    """One full-batch epoch of PyG's layers of ``cfg.model`` (:func:`pyg_layers`).

    The same graph, layers, hidden size, dropout, activations (ReLU; GAT: ELU) and Adam as
    hpcgnn's; returns the loss.
    """
    from hpcgnn.io import GraphFile

    dev = torch.device(device)
    with GraphFile(path) as gf:
        n = gf.meta.num_nodes
        a = gf.read_csr(0, n).tocoo()
        x = torch.from_numpy(gf.read_features(0, n)).to(dev)
        y = torch.from_numpy(gf.read_labels(0, n)).to(dev)
        train = torch.from_numpy(gf.read_mask("train", 0, n)).to(dev)
        f, c = gf.meta.num_features, gf.meta.num_classes
    # PyG's edge_index[0] = source, [1] = target; messages flow source -> target.
    edge_index = torch.from_numpy(np.vstack([a.row, a.col]).astype(np.int64)).to(dev)
    del a
    dims = [f] + [cfg.hidden] * (cfg.layers - 1) + [c]
    convs = pyg_layers(cfg, dims).to(dev)
    act = torch.nn.functional.elu if cfg.model == "gat" else torch.relu
    decayed = convs.parameters() if cfg.weight_decay_layers == "all" else convs[0].parameters()
    rest = [] if cfg.weight_decay_layers == "all" else list(convs[1:].parameters())
    opt = torch.optim.Adam([{"params": list(decayed), "weight_decay": cfg.weight_decay},
                            {"params": rest, "weight_decay": 0.0}], lr=cfg.lr)

    def step() -> float:
        opt.zero_grad()
        h = x
        for i, conv in enumerate(convs):
            h = torch.nn.functional.dropout(h, cfg.dropout, training=True)
            h = conv(h, edge_index)
            if i < len(convs) - 1:
                h = act(h)
        loss = torch.nn.functional.cross_entropy(h[train], y[train])
        loss.backward()
        opt.step()
        return float(loss.detach())

    return step


def _worker(side: str, path: str, cfg, threads: int, conn) -> None:
    """A side's process: build its model, then time one epoch per message until ``None``."""
    torch.set_num_threads(threads)
    if side == "hpcgnn":
        try:
            from hpcgnn.utils.memory import keep_freed_memory
        except ImportError:  # an hpcgnn from before it (PYTHONPATH=old checkout: a baseline)
            pass
        else:
            keep_freed_memory()  # as hpcgnn train does
    t0 = time.perf_counter()
    step = hpcgnn_step(path, cfg) if side == "hpcgnn" else pyg_step(path, cfg)
    conn.send(time.perf_counter() - t0)
    while conn.recv() is not None:
        t0 = time.perf_counter()
        step()
        conn.send(time.perf_counter() - t0)
    conn.close()


def interleaved(path: str, cfg, threads: int, epochs: int, warmup: int, repeats: int
                ) -> dict:
    """Both sides, epoch by epoch in alternating order; per-repetition medians and ratios."""
    ctx = mp.get_context("spawn")
    sides, pipes = ("hpcgnn", "pyg"), {}
    procs = []
    for side in sides:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(side, path, cfg, threads, child))
        proc.start()
        pipes[side] = parent
        procs.append(proc)
    setup = {side: pipes[side].recv() for side in sides}
    times: dict[str, list[list[float]]] = {side: [] for side in sides}
    for _ in range(repeats):
        rep: dict[str, list[float]] = {side: [] for side in sides}
        for e in range(warmup + epochs):
            for side in (sides if e % 2 == 0 else sides[::-1]):
                pipes[side].send(True)
                t = pipes[side].recv()
                if e >= warmup:
                    rep[side].append(t)
        for side in sides:
            times[side].append(rep[side])
    for side in sides:
        pipes[side].send(None)
    for proc in procs:
        proc.join()
    med = {side: [statistics.median(r) for r in times[side]] for side in sides}
    ratios = [a / b for a, b in zip(med["hpcgnn"], med["pyg"], strict=True)]
    return {
        "hpcgnn_epoch_median_s": statistics.median(med["hpcgnn"]),
        "pyg_epoch_median_s": statistics.median(med["pyg"]),
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
        "ratio_max": max(ratios), "ratios": ratios,
        "hpcgnn_setup_s": setup["hpcgnn"], "pyg_setup_s": setup["pyg"],
        "epoch_times_s": times,
    }


def _names(text: str | None) -> list[str]:
    return [n for n in (text or "").split(",") if n]


def _planetoid(root: Path | str, name: str, out: Path) -> str:
    subprocess.run(hpcgnn("prepare", "planetoid", "--root", str(root), "--name", name,
                          "--out", str(out), "--quiet"), check=True, stdout=subprocess.DEVNULL)
    return str(out)


def graphs(args: argparse.Namespace, tmp: Path) -> list[tuple[str, str]]:
    """``(label, path)`` of every graph the flags name."""
    from planetoid_like import write_planetoid_like

    out = [(Path(g).stem, g) for g in args.graph]
    if args.planetoid_root:
        out += [(n, _planetoid(args.planetoid_root, n, tmp / f"{n}.h5"))
                for n in _names(args.planetoid)]
    for n in _names(args.planetoid_like):
        root = write_planetoid_like(tmp / "planetoid", n)
        out.append((f"{n} (shaped stand-in)", _planetoid(root, n, tmp / f"{n}-like.h5")))
    for gen, sizes in (("sbm", args.sbm), ("rmat", args.rmat)):
        for n in _names(sizes):
            path = prepare(tmp / f"{gen}-{n}.h5", gen, int(n), features=args.features)
            out.append((f"{gen.upper()}-{int(n) // 1000}k ({args.features} features)", str(path)))
    return out


def main() -> None:
    from hpcgnn.config import TrainConfig

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph", nargs="*", help="graph files")
    p.add_argument("--planetoid-root", help="folder of the real ind.NAME.* Planetoid files")
    p.add_argument("--planetoid", default="cora,citeseer",
                   help="with --planetoid-root: the data sets (default cora,citeseer)")
    p.add_argument("--planetoid-like", default=None,
                   help="shaped stand-ins of these Planetoid sets (cora, citeseer)")
    p.add_argument("--rmat", default=None, help="generated RMAT graphs: vertex counts")
    p.add_argument("--sbm", default=None, help="generated SBM graphs: vertex counts")
    p.add_argument("--nodes", type=int, default=None, help="same as --rmat N")
    p.add_argument("--features", type=int, default=64, help="generated graphs: features")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--epochs", type=int, default=20, help="timed epochs per repetition")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--name", default="bench_pyg", help="results name in perf/results")
    args = p.parse_args()
    if args.nodes:
        args.rmat = ",".join(filter(None, [args.rmat, str(args.nodes)]))
    cfg = TrainConfig(layers=args.layers, hidden=args.hidden, dropout=0.5)
    rows, results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        todo = graphs(args, Path(tmp))
        if not todo:
            todo = [(f"RMAT-100k ({args.features} features)",
                     str(prepare(Path(tmp) / "rmat.h5", "rmat", 100_000,
                                 features=args.features)))]
        for label, path in todo:
            r = interleaved(path, cfg, args.threads, args.epochs, args.warmup, args.repeats)
            results.append({"graph": label, **r})
            rows.append([label, 1e3 * r["hpcgnn_epoch_median_s"], 1e3 * r["pyg_epoch_median_s"],
                         r["ratio_median"], f"{r['ratio_min']:.3f}-{r['ratio_max']:.3f}"])
            print(f"{label}: hpcgnn / PyG {r['ratio_median']:.3f}", file=sys.stderr, flush=True)
    doc = {"layers": args.layers, "hidden": args.hidden, "threads": args.threads,
           "epochs": args.epochs, "warmup": args.warmup, "repeats": args.repeats,
           "graphs": results, "numpy": np.__version__, "torch": torch.__version__}
    table = markdown(
        f"Full-batch GCN epoch, one rank: hpcgnn vs PyG GCNConv ({args.layers} layers, hidden"
        f" {args.hidden}, {args.threads} thread(s); interleaved, {args.repeats} x"
        f" {args.epochs} epochs)",
        ["graph", "hpcgnn ms", "PyG ms", "hpcgnn / PyG (median)", "range"],
        rows,
        ["< 1 means hpcgnn is faster. Medians of per-repetition epoch medians; the ratio is"
         " the median of the repetitions' ratios, the range their smallest and largest."],
    )
    save(args.name, doc, table)


if __name__ == "__main__":
    main()
