"""One rank of hpcgnn vs PyTorch Geometric's GCNConv at its best, side by side, epoch by epoch.

Same graph (an hpcgnn HDF5 file), same layers, hidden size, dtype, threads, dropout and
optimiser; every side runs full-batch epochs (forward, backward, Adam step). PyG runs once
per way of giving it the graph (``--pyg-inputs``, :data:`PYG_INPUTS`: ``edge_index``, the
sparse ``adj_t`` and a sorted ``EdgeIndex``), and hpcgnn is compared with the fastest of
them (*PyG-best*); a bare-torch *floor* (:func:`floor_step`: the model's products alone)
runs alongside. Each side lives in its own process, as each tool runs for its users
(``hpcgnn train`` keeps freed memory for reuse, PyG keeps the allocator's default), and
the sides are *interleaved*: epoch ``e`` of each in turn, the order rotating, so all see
the same machine state. ``--repeats`` repetitions give one median ratio each; the table
reports the median of the ratios and their range, and the load average. Writes
``perf/results/NAME.{json,md}``. Needs the ``perf`` extra (``torch_geometric``).

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
import os
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
            mlp = torch.nn.Sequential(
                torch.nn.Linear(i, o, bias=False),
                torch.nn.ReLU(),
                torch.nn.Linear(o, o, bias=False),
            )
            return pyg.GINConv(mlp, eps=cfg.gin_eps)
        if cfg.model == "gat":
            heads = cfg.output_heads if k == last else cfg.heads
            width = o if k == last else o // heads
            return pyg.GATConv(
                i, width, heads=heads, concat=k != last, bias=False, dropout=cfg.attention_p
            )
        return pyg.GCNConv(i, o, cached=True, bias=False)

    return torch.nn.ModuleList(layer(k, i, o) for k, (i, o) in enumerate(pairs))


#: PyG's ways of giving a layer its graph (``--pyg-inputs``): ``edge_index`` (a ``[2, E]``
#: tensor, source then target), ``adj_t`` (the transposed adjacency, as PyG's
#: ``ToSparseTensor`` makes it: a ``torch_sparse.SparseTensor`` where torch_sparse is
#: installed, else torch's sparse CSR; GCNConv, SAGEConv and GINConv run one fused SpMM on
#: it, GATConv takes it but passes messages per edge) and ``EdgeIndex`` (PyG's
#: ``EdgeIndex`` sorted by target: aggregations over CSR segments).
PYG_INPUTS = ("edge_index", "adj_t", "EdgeIndex")


def pyg_adjacency(edge_index: torch.Tensor, n: int, how: str):
    """``edge_index`` (source, target) as PyG's input ``how`` (:data:`PYG_INPUTS`)."""
    import torch_geometric.typing as pyg_typing

    if how == "edge_index":
        return edge_index
    if how == "EdgeIndex":
        from torch_geometric import EdgeIndex

        return EdgeIndex(edge_index, sparse_size=(n, n)).sort_by("col")[0]
    if how != "adj_t":
        raise ValueError(f"unknown PyG input {how!r}; one of {', '.join(PYG_INPUTS)}")
    if pyg_typing.WITH_TORCH_SPARSE:
        from torch_sparse import SparseTensor

        return SparseTensor(row=edge_index[1], col=edge_index[0], sparse_sizes=(n, n))
    from torch_geometric.utils import to_torch_csr_tensor

    return to_torch_csr_tensor(edge_index.flip(0), size=(n, n))


def adj_t_kind() -> str:
    """What ``adj_t`` is here: ``torch_sparse.SparseTensor`` or torch's sparse CSR."""
    import torch_geometric.typing as pyg_typing

    return "torch_sparse.SparseTensor" if pyg_typing.WITH_TORCH_SPARSE else "torch sparse CSR"


def pyg_step(
    path: str, cfg, device: str = "cpu", adjacency: str = "edge_index"
) -> Callable[[], float]:
    """One full-batch epoch of PyG's layers of ``cfg.model`` (:func:`pyg_layers`).

    The same graph, layers, hidden size, dropout, activations (ReLU; GAT: ELU) and Adam as
    hpcgnn's, the graph given as ``adjacency`` (:data:`PYG_INPUTS`); returns the loss.
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
    graph = pyg_adjacency(edge_index, n, adjacency)
    dims = [f] + [cfg.hidden] * (cfg.layers - 1) + [c]
    convs = pyg_layers(cfg, dims).to(dev)
    act = torch.nn.functional.elu if cfg.model == "gat" else torch.relu
    decayed = convs.parameters() if cfg.weight_decay_layers == "all" else convs[0].parameters()
    rest = [] if cfg.weight_decay_layers == "all" else list(convs[1:].parameters())
    opt = torch.optim.Adam(
        [
            {"params": list(decayed), "weight_decay": cfg.weight_decay},
            {"params": rest, "weight_decay": 0.0},
        ],
        lr=cfg.lr,
    )

    def step() -> float:
        opt.zero_grad()
        h = x
        for i, conv in enumerate(convs):
            h = torch.nn.functional.dropout(h, cfg.dropout, training=True)
            h = conv(h, graph)
            if i < len(convs) - 1:
                h = act(h)
        loss = torch.nn.functional.cross_entropy(h[train], y[train])
        loss.backward()
        opt.step()
        return float(loss.detach())

    return step


def _torch_csr(m) -> torch.Tensor:
    """A SciPy matrix as torch's float32 sparse CSR."""
    m = m.tocsr()
    return torch.sparse_csr_tensor(
        torch.from_numpy(m.indptr.astype(np.int64)),
        torch.from_numpy(m.indices.astype(np.int64)),
        torch.from_numpy(m.data.astype(np.float32)),
        m.shape,
    )


def _aggregation(a, model: str, cfg, heads: int, rng: np.random.Generator) -> list:
    """The SciPy matrices ``M`` with ``out = M z`` of ``model``'s aggregation (``a[i, j]``:
    edge ``i -> j``): GCN ``D^-1/2 (A^T + I) D^-1/2``, SAGE ``D^-1 A^T``, GIN
    ``A^T + (1 + eps) I``, GAT one ``A^T + I`` with random coefficients per head."""
    import scipy.sparse as sp

    n = a.shape[0]
    at = sp.csr_matrix(a.T, dtype=np.float64)
    eye = sp.identity(n, format="csr")
    if model == "gat":
        pattern = (at + eye).tocsr()
        return [
            sp.csr_matrix(
                (rng.random(pattern.nnz), pattern.indices, pattern.indptr), shape=pattern.shape
            )
            for _ in range(heads)
        ]
    if model == "gin":
        return [(at + (1.0 + cfg.gin_eps) * eye).tocsr()]
    if model == "sage":
        deg = np.maximum(np.asarray(at.sum(axis=1)).ravel(), 1.0)
        return [(sp.diags(1.0 / deg) @ at).tocsr()]
    with_loops = (at + eye).tocsr()
    s = sp.diags(1.0 / np.sqrt(np.asarray(with_loops.sum(axis=1)).ravel()))
    return [(s @ with_loops @ s).tocsr()]


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b``: an SpMM where ``a`` is sparse CSR."""
    return torch.sparse.mm(a, b) if a.layout == torch.sparse_csr else a @ b


def floor_step(path: str, cfg) -> Callable[[], float]:
    """The products of one epoch of ``cfg.model``, bare torch: its floor on this machine.

    Per layer (input width ``i``, output ``o``; ``o < i`` in the benches' models, so the
    dense transform comes first): forward ``Z = H W`` and the aggregation ``M Z`` (torch
    CSR SpMM, ``M`` of :func:`_aggregation`; SAGE adds ``H W_root``, GIN its MLP's second
    ``R W_2``, GAT one SpMM per head); backward ``M^T dY`` (and GAT's SDDMM of the
    coefficients' gradient, ``torch.sparse.sampled_addmm``), ``dW = H^T dZ`` and
    ``dH = dZ W^T`` (not for the first layer). The input features are CSR where hpcgnn keeps
    them so (``cfg.sparse_input``). No dropout, activation, loss, autograd or optimiser:
    the output gradients are fixed random matrices. Returns 0.
    """
    from hpcgnn.io import GraphFile

    rng = np.random.default_rng(0)
    with GraphFile(path) as gf:
        n = gf.meta.num_nodes
        a = gf.read_csr(0, n)
        x_np = gf.read_features(0, n)
        f, c = gf.meta.num_features, gf.meta.num_classes
    x = torch.from_numpy(x_np)
    xt = x.t()
    if cfg.sparse_input(int(np.count_nonzero(x_np)), x_np.size):
        x, xt = x.to_sparse_csr(), xt.contiguous().to_sparse_csr()
    dims = [f] + [cfg.hidden] * (cfg.layers - 1) + [c]
    layers = []
    for k, (i, o) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        last = k == len(dims) - 2
        heads = (cfg.output_heads if last else cfg.heads) if cfg.model == "gat" else 1
        width = o if last else o // heads  # per head
        ms = _aggregation(a, cfg.model, cfg, heads, rng)
        layers.append(
            {
                "m": [_torch_csr(m) for m in ms],
                "mt": [_torch_csr(m.T) for m in ms],
                "width": width,
                "w": torch.randn(i, heads * width),
                "dy": torch.randn(heads, n, width),
                "w2": torch.randn(o, o) if cfg.model == "gin" else None,
                "w_root": torch.randn(i, o) if cfg.model == "sage" else None,
            }
        )

    def step() -> float:
        h, ht = x, xt
        for lay in layers:
            lay["h"], lay["ht"], w = h, ht, lay["width"]
            lay["z"] = z = _mm(h, lay["w"])
            outs = [torch.sparse.mm(m, z[:, j * w : (j + 1) * w]) for j, m in enumerate(lay["m"])]
            h = outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)
            if lay["w_root"] is not None:
                _mm(lay["h"], lay["w_root"])
            if lay["w2"] is not None:
                lay["r"], h = h, h @ lay["w2"]
            ht = h.t()
        for k in range(len(layers) - 1, -1, -1):
            lay = layers[k]
            dy, w = lay["dy"], lay["width"]
            if lay["w2"] is not None:
                _ = lay["r"].t() @ dy[0]
                dy = (dy[0] @ lay["w2"].t()).unsqueeze(0)
            grads = [torch.sparse.mm(mt, dy[j]) for j, mt in enumerate(lay["mt"])]
            dz = grads[0] if len(grads) == 1 else torch.cat(grads, dim=1)
            if cfg.model == "gat":
                for j, m in enumerate(lay["m"]):
                    torch.sparse.sampled_addmm(
                        m, dy[j], lay["z"][:, j * w : (j + 1) * w].t(), beta=0.0
                    )
            _mm(lay["ht"], dz)
            if lay["w_root"] is not None:
                _mm(lay["ht"], dy[0])
            if k > 0:
                _ = dz @ lay["w"].t()
                if lay["w_root"] is not None:
                    _ = dy[0] @ lay["w_root"].t()
        return 0.0

    return step


def make_step(side: str, path: str, cfg) -> Callable[[], float]:
    """The epoch of a side: ``hpcgnn``, ``floor`` (:func:`floor_step`) or ``pyg:INPUT``."""
    if side == "hpcgnn":
        return hpcgnn_step(path, cfg)
    if side == "floor":
        return floor_step(path, cfg)
    return pyg_step(path, cfg, adjacency=side.removeprefix("pyg:"))


#: The clocks an epoch can be timed with (``--clock``): ``wall`` (``time.perf_counter``) or
#: ``cpu`` (``time.process_time``, the process's CPU time: on a loaded machine it leaves
#: out the time spent waiting for a core, which grows with an epoch's length).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _worker(side: str, path: str, cfg, threads: int, conn, clock: str = "wall") -> None:
    """A side's process: build its model, then time one epoch per message until ``None``."""
    now = CLOCKS[clock]
    torch.set_num_threads(threads)
    if side == "hpcgnn":
        try:
            from hpcgnn.utils.memory import keep_freed_memory
        except ImportError:  # an hpcgnn from before it (PYTHONPATH=old checkout: a baseline)
            pass
        else:
            keep_freed_memory()  # as hpcgnn train does
    t0 = now()
    step = make_step(side, path, cfg)
    conn.send(now() - t0)
    while conn.recv() is not None:
        t0 = now()
        step()
        conn.send(now() - t0)
    conn.close()


def _range(ratios: list[float]) -> dict:
    return {
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ratios": ratios,
    }


def interleaved(
    path: str,
    cfg,
    threads: int,
    epochs: int,
    warmup: int,
    repeats: int,
    pyg_inputs: tuple[str, ...] = PYG_INPUTS,
    floor: bool = True,
    clock: str = "wall",
) -> dict:
    """Every side (hpcgnn, PyG with each of ``pyg_inputs``, the bare-torch ``floor``), each
    in its own process, epoch by epoch in rotating order; per-repetition medians and ratios.

    PyG-best is, per repetition, the fastest PyG input's median epoch; ``ratio_*`` are
    hpcgnn's over it, ``pyg_inputs`` each input's own, ``floor_ratio_*`` hpcgnn's over the
    floor's. Epochs are timed by ``clock`` (:data:`CLOCKS`).
    """
    ctx = mp.get_context("spawn")
    pyg_sides = [f"pyg:{how}" for how in pyg_inputs]
    sides = ["hpcgnn", *pyg_sides] + (["floor"] if floor else [])
    pipes, procs = {}, []
    for side in sides:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(side, path, cfg, threads, child, clock))
        proc.start()
        pipes[side] = parent
        procs.append(proc)
    setup = {side: pipes[side].recv() for side in sides}
    times: dict[str, list[list[float]]] = {side: [] for side in sides}
    for _ in range(repeats):
        rep: dict[str, list[float]] = {side: [] for side in sides}
        for e in range(warmup + epochs):
            turn = e % len(sides)
            for side in sides[turn:] + sides[:turn]:
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
    best = [min(med[s][r] for s in pyg_sides) for r in range(repeats)]
    by_input = {
        side.removeprefix("pyg:"): {
            "epoch_median_s": statistics.median(med[side]),
            **_range([a / b for a, b in zip(med["hpcgnn"], med[side], strict=True)]),
        }
        for side in pyg_sides
    }
    out = {
        "hpcgnn_epoch_median_s": statistics.median(med["hpcgnn"]),
        "pyg_epoch_median_s": statistics.median(best),
        "pyg_best_input": min(by_input, key=lambda k: by_input[k]["epoch_median_s"]),
        **_range([a / b for a, b in zip(med["hpcgnn"], best, strict=True)]),
        "pyg_inputs": by_input,
        "adj_t": adj_t_kind(),
        "clock": clock,
        "setup_s": setup,
        "epoch_times_s": times,
    }
    if floor:
        out["floor_epoch_median_s"] = statistics.median(med["floor"])
        floor_ratios = _range([a / b for a, b in zip(med["hpcgnn"], med["floor"], strict=True)])
        out.update({f"floor_{k}": v for k, v in floor_ratios.items()})
    return out


def add_timing_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of the interleaved timing both PyG benches share (:func:`interleaved`)."""
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument(
        "--pyg-inputs",
        default=",".join(PYG_INPUTS),
        help=f"PyG's graph inputs to time (of {','.join(PYG_INPUTS)}); PyG-best is the fastest",
    )
    p.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time epochs by wall-clock or by CPU time (a loaded machine; with --threads 1)",
    )


def load_average() -> str:
    """``uptime``'s load averages (1, 5, 15 minutes), as text."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def pyg_versions() -> dict:
    """The installed versions of torch_geometric, torch_sparse and pyg-lib (``None``: absent)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in ("torch_geometric", "torch_sparse", "pyg_lib"):
        try:
            out[name] = version(name.replace("_", "-"))
        except PackageNotFoundError:
            out[name] = None
    return out


def time_header(pyg_inputs: tuple[str, ...]) -> list[str]:
    """The columns of :func:`time_cells`."""
    return [
        "hpcgnn ms",
        *(f"PyG {how} ms" for how in pyg_inputs),
        "PyG-best ms",
        "floor ms",
        "hpcgnn / PyG-best (median)",
        "range",
        "hpcgnn / floor",
    ]


def time_cells(r: dict) -> list:
    """A timing row of :func:`interleaved`'s result ``r``: epochs in ms and the ratios."""
    return [
        1e3 * r["hpcgnn_epoch_median_s"],
        *(1e3 * v["epoch_median_s"] for v in r["pyg_inputs"].values()),
        f"{1e3 * r['pyg_epoch_median_s']:.4g} ({r['pyg_best_input']})",
        1e3 * r["floor_epoch_median_s"],
        r["ratio_median"],
        f"{r['ratio_min']:.3f}-{r['ratio_max']:.3f}",
        r["floor_ratio_median"],
    ]


def time_notes(pyg_inputs: tuple[str, ...], loads: tuple[str, str], clock: str) -> list[str]:
    """The notes under a timing table: what PyG-best and the floor are, versions, load."""
    v = pyg_versions()
    timed = {"wall": "wall-clock time", "cpu": "each process's CPU time (time.process_time)"}
    return [
        f"Epochs timed by {timed[clock]}.",
        "< 1 means hpcgnn is faster. Medians of per-repetition epoch medians; the ratio is"
        " the median of the repetitions' ratios (hpcgnn over the fastest PyG input of the"
        " repetition), the range their smallest and largest.",
        f"PyG inputs: {', '.join(pyg_inputs)}; adj_t is {adj_t_kind()} (PyG"
        f" {v['torch_geometric']}, torch_sparse {v['torch_sparse'] or 'not installed'},"
        f" pyg-lib {v['pyg_lib'] or 'not installed'}). Every layer here accepts all three:"
        " GCNConv (cached normalisation), SAGEConv and GINConv aggregate adj_t by one SpMM"
        " (torch.sparse.mm); GATConv takes adj_t but has no fused path (messages per edge).",
        "floor: the model's products alone in bare torch (CSR SpMMs, dense matmuls, GAT's"
        " SDDMM; forward and backward) without dropout, activations, softmax, loss, autograd"
        " or optimiser: what an epoch computing these products in this torch costs at least.",
        f"Load average (1, 5, 15 min) at the start: {loads[0]}; at the end: {loads[1]}"
        " (2 cores, shared with other work: absolute times are noisy, the interleaved"
        " ratios less so).",
    ]


def _names(text: str | None) -> list[str]:
    return [n for n in (text or "").split(",") if n]


def planetoid_file(root: Path | str, name: str, out: Path) -> str:
    """The real Planetoid set ``name`` of ``root`` as an hpcgnn file ``out``."""
    subprocess.run(
        hpcgnn(
            "prepare",
            "planetoid",
            "--root",
            str(root),
            "--name",
            name,
            "--out",
            str(out),
            "--quiet",
        ),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return str(out)


def graphs(args: argparse.Namespace, tmp: Path) -> list[tuple[str, str]]:
    """``(label, path)`` of every graph the flags name."""
    from planetoid_like import write_planetoid_like

    out = [(Path(g).stem, g) for g in args.graph]
    if args.planetoid_root:
        out += [
            (n, planetoid_file(args.planetoid_root, n, tmp / f"{n}.h5"))
            for n in _names(args.planetoid)
        ]
    for n in _names(args.planetoid_like):
        root = write_planetoid_like(tmp / "planetoid", n)
        out.append((f"{n} (shaped stand-in)", planetoid_file(root, n, tmp / f"{n}-like.h5")))
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
    p.add_argument(
        "--planetoid",
        default="cora,citeseer",
        help="with --planetoid-root: the data sets (default cora,citeseer)",
    )
    p.add_argument(
        "--planetoid-like",
        default=None,
        help="shaped stand-ins of these Planetoid sets (cora, citeseer)",
    )
    p.add_argument("--rmat", default=None, help="generated RMAT graphs: vertex counts")
    p.add_argument("--sbm", default=None, help="generated SBM graphs: vertex counts")
    p.add_argument("--nodes", type=int, default=None, help="same as --rmat N")
    p.add_argument("--features", type=int, default=64, help="generated graphs: features")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--epochs", type=int, default=20, help="timed epochs per repetition")
    add_timing_arguments(p)
    p.add_argument("--name", default="bench_pyg", help="results name in perf/results")
    args = p.parse_args()
    pyg_inputs = tuple(_names(args.pyg_inputs))
    start_load = load_average()
    if args.nodes:
        args.rmat = ",".join(filter(None, [args.rmat, str(args.nodes)]))
    cfg = TrainConfig(layers=args.layers, hidden=args.hidden, dropout=0.5)
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        todo = graphs(args, Path(tmp))
        if not todo:
            todo = [
                (
                    f"RMAT-100k ({args.features} features)",
                    str(prepare(Path(tmp) / "rmat.h5", "rmat", 100_000, features=args.features)),
                )
            ]
        for label, path in todo:
            r = interleaved(
                path,
                cfg,
                args.threads,
                args.epochs,
                args.warmup,
                args.repeats,
                pyg_inputs,
                clock=args.clock,
            )
            results.append({"graph": label, **r})
            print(f"{label}: hpcgnn / PyG-best {r['ratio_median']:.3f}", file=sys.stderr)
            report(args, pyg_inputs, start_load, results, len(todo))  # partial results


def report(
    args: argparse.Namespace,
    pyg_inputs: tuple[str, ...],
    start_load: str,
    results: list[dict],
    rows: int,
) -> None:
    """Save the ``results`` so far (of ``rows`` graphs)."""
    loads = (start_load, load_average())
    doc = {
        "layers": args.layers,
        "hidden": args.hidden,
        "threads": args.threads,
        "epochs": args.epochs,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "pyg_inputs": list(pyg_inputs),
        "clock": args.clock,
        "load_average": {"start": loads[0], "end": loads[1]},
        "graphs": results,
        "numpy": np.__version__,
        "torch": torch.__version__,
        **pyg_versions(),
    }
    partial = [] if len(results) == rows else [f"Partial: {len(results)} of {rows} graphs so far."]
    table = markdown(
        f"Full-batch GCN epoch, one rank: hpcgnn vs PyG GCNConv at its best ({args.layers}"
        f" layers, hidden {args.hidden}, {args.threads} thread(s); interleaved,"
        f" {args.repeats} x {args.epochs} epochs)",
        ["graph", *time_header(pyg_inputs)],
        [[r["graph"], *time_cells(r)] for r in results],
        [*time_notes(pyg_inputs, loads, args.clock), *partial],
    )
    save(args.name, doc, table)


if __name__ == "__main__":
    main()
