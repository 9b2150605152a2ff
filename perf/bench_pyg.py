"""One rank of hpcgnn vs PyTorch Geometric's GCNConv, side by side in one run.

Same graph (from an hpcgnn HDF5 file), same layers, hidden size, dtype, threads and
optimiser; both models run full-batch epochs (forward, backward, Adam step) and we
report median epoch times and their ratio (ours / PyG; < 1 means hpcgnn is faster).
Writes ``perf/results/bench_pyg.{json,md}`` and prints the ratio table last. Needs the
``perf`` extra (``torch_geometric``).

    python perf/bench_pyg.py inputs/rmat-1m.h5 --layers 2 --hidden 16 --threads 2
    python perf/bench_pyg.py --nodes 100000        # a generated RMAT graph
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from mpi4py import MPI
from tables import markdown, prepare, save


def time_epochs(step, epochs: int, warmup: int) -> list[float]:
    out = []
    for i in range(warmup + epochs):
        t0 = time.perf_counter()
        step()
        if i >= warmup:
            out.append(time.perf_counter() - t0)
    return out


def bench_hpcgnn(path: str, cfg, epochs: int, warmup: int) -> tuple[list[float], float]:
    from hpcgnn.grid import ProcessGrid
    from hpcgnn.models.block_row import BlockRowGCN
    from hpcgnn.nn.gcn import cross_entropy_sum
    from hpcgnn.train.loop import make_optimizer

    t0 = time.perf_counter()
    grid = ProcessGrid.create(MPI.COMM_WORLD, "1d")
    model = BlockRowGCN.read(path, grid, cfg)
    setup = time.perf_counter() - t0
    opt = make_optimizer(model.weights, cfg)
    n_train = int(model.masks["train"].sum())
    epoch = [0]

    def step() -> None:
        opt.zero_grad()
        loss = cross_entropy_sum(model.logits(epoch[0]), model.y, model.masks["train"]) / n_train
        loss.backward()
        model.reduce_gradients()
        opt.step()
        epoch[0] += 1

    times = time_epochs(step, epochs, warmup)
    grid.free()
    return times, setup


def pyg_gcn_step(path: str, cfg, device: str = "cpu") -> Callable[[], float]:
    """One full-batch epoch of PyG ``GCNConv`` layers (cached normalisation, no bias).

    The same graph, layers, hidden size, dropout and Adam as hpcgnn's; returns the loss.
    """
    from torch_geometric.nn import GCNConv

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
    convs = torch.nn.ModuleList(
        GCNConv(i, o, cached=True, bias=False) for i, o in zip(dims[:-1], dims[1:], strict=True)
    ).to(dev)
    opt = torch.optim.Adam(convs.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    def step() -> float:
        opt.zero_grad()
        h = x
        for i, conv in enumerate(convs):
            h = torch.nn.functional.dropout(h, cfg.dropout, training=True)
            h = conv(h, edge_index)
            if i < len(convs) - 1:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h[train], y[train])
        loss.backward()
        opt.step()
        return float(loss.detach())

    return step


def bench_pyg(path: str, cfg, epochs: int, warmup: int) -> tuple[list[float], float]:
    t0 = time.perf_counter()
    step = pyg_gcn_step(path, cfg)
    setup = time.perf_counter() - t0
    return time_epochs(step, epochs, warmup), setup


def main() -> None:
    from hpcgnn.config import TrainConfig

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph", nargs="?", help="graph file (default: a generated RMAT graph)")
    p.add_argument("--nodes", type=int, default=100_000, help="generated graph: vertices")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--name", default="bench_pyg", help="results name in perf/results")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cfg = TrainConfig(layers=args.layers, hidden=args.hidden, dropout=0.5)
    with tempfile.TemporaryDirectory() as tmp:
        graph = args.graph or str(prepare(Path(tmp) / "rmat.h5", "rmat", args.nodes))
        ours, ours_setup = bench_hpcgnn(graph, cfg, args.epochs, args.warmup)
        pyg, pyg_setup = bench_pyg(graph, cfg, args.epochs, args.warmup)
    m_ours, m_pyg = statistics.median(ours), statistics.median(pyg)
    result = {
        "graph": args.graph or f"generated RMAT, {args.nodes} vertices",
        "layers": args.layers, "hidden": args.hidden,
        "threads": args.threads, "epochs": args.epochs,
        "hpcgnn_epoch_median_s": m_ours, "pyg_epoch_median_s": m_pyg,
        "ratio_hpcgnn_over_pyg": m_ours / m_pyg,
        "hpcgnn_setup_s": ours_setup, "pyg_setup_s": pyg_setup,
    }
    table = markdown(
        f"Full-batch GCN epoch, one rank: hpcgnn vs PyG GCNConv ({result['graph']}, "
        f"{args.layers} layers, hidden {args.hidden}, {args.threads} thread(s))",
        ["run", "epoch median s", "setup s", "hpcgnn / PyG"],
        [["hpcgnn 1D", m_ours, ours_setup, m_ours / m_pyg], ["PyG GCNConv", m_pyg, pyg_setup, 1.0]],
        ["< 1 means hpcgnn is faster."],
    )
    save(args.name, result, table)


if __name__ == "__main__":
    main()
