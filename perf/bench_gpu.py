"""The GPU benchmarks, side by side in one run on one GPU, the ratio table printed last.

1. **epoch**: a full-batch GCN epoch (forward, backward, Adam) of hpcgnn on one rank
   against PyTorch Geometric's ``GCNConv`` on the same GPU, graph, layers and hidden size
   (goal: hpcgnn at most 0.5x PyG's epoch time);
2. **spmm**: hpcgnn's local SpMM (:func:`hpcgnn.kernels.spmm.spmm` on the GCN operator),
   achieved bytes/s against the measured device-to-device copy bandwidth (goal: at least
   30%). The bytes are the compulsory traffic: the CSR arrays, the dense input read once and
   the output written once (a cache re-reading gathered rows moves more);
3. **sampling**: GraphSAGE bulk sampling (fanouts 25, 10) in batches/s, hpcgnn's sampler as
   ``--device cuda`` runs it against PyG's ``NeighborLoader`` (goal: at least 5x) and
   against hpcgnn's CPU sampler;
4. **grids**: ``hpcgnn train --device cuda`` with 1d, 1.5d, 2d, 3d and halo at 1, 2 and 4
   ranks on the one GPU (``mpiexec``), epoch time and bytes per epoch, on a tenth of the
   graph (a grid that cannot fit says so and the rest go on);
5. **idle**: the share of hpcgnn's epoch the device is idle: one minus the device time of
   its kernels and copies per epoch (``torch.profiler``, two profiled epochs) over the
   unprofiled epoch's median wall time (PyG's alongside).

The graph is generated (``hpcgnn prepare synthetic``, SBM) at Reddit's size: 232,965
vertices, about 115M stored edges, 602 features, 41 classes. On the emulated GPU
(``HPCGNN_EMULATE_CUDA=1``, as CI runs ``make gpu-check``) or with ``--tiny`` everything
runs on a graph of 2,000 vertices, in seconds, to prove the script; a missing peer (PyG,
its sampler's ``pyg-lib``/``torch-sparse``) is reported, not fatal. Writes
``perf/results/bench_gpu.{json,md}`` (``bench_gpu_emulated`` on the emulated GPU, which git
ignores); ``make gpu-check`` runs it and copies the table into ``gpu-<date>.md``.

    python perf/bench_gpu.py                 # Reddit-sized, on the GPU
    HPCGNN_EMULATE_CUDA=1 python perf/bench_gpu.py    # tiny, on the emulated GPU
"""

from __future__ import annotations

import argparse
import json
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
from tables import hpcgnn, markdown, mpiexec, prepare, save

REDDIT = {"nodes": 232_965, "degree": 506.0, "features": 602, "classes": 41}
TINY = {"nodes": 2_000, "degree": 16.0, "features": 32, "classes": 8}
GRIDS = ("1d", "1.5d", "2d", "3d", "halo")
#: 3D grids for rank counts with no grid of every dimension >= 2 (the default needs 8).
GRID_3D = {2: "1x1x2", 4: "1x2x2"}
FANOUTS = (25, 10)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def median_seconds(step: Callable[[], object], epochs: int, warmup: int) -> float:
    """Median wall seconds of ``step`` (device synchronised around each call)."""
    out = []
    for i in range(warmup + epochs):
        _sync()
        t0 = time.perf_counter()
        step()
        _sync()
        if i >= warmup:
            out.append(time.perf_counter() - t0)
    return statistics.median(out)


#: The dropout kernels of ``cuda/dropout.cu`` (the entry stream's keep masks).
DROPOUT_KERNELS = ("hash_keep", "hash_pair_keep")


def device_seconds(step: Callable[[], object], calls: int
                   ) -> tuple[float | None, list, float | None]:
    """Device seconds per call of ``step`` (kernels and copies, ``torch.profiler``).

    ``None`` where the profiler sees no CUDA device (the emulated GPU). Also the eight
    operations with the most device time, as ``[name, ms per call]``, and the dropout
    kernels' share of the device time (:data:`DROPOUT_KERNELS`; the 2026-11-26 run's
    dropout kernel took 33 of 62 ms before the entry stream replaced it).
    """
    if not torch.cuda.is_available():
        return None, [], None
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            step()
        _sync()

    from torch.autograd import DeviceType

    spans = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                   if e.device_type == DeviceType.CUDA)
    busy, end, by_name = 0.0, float("-inf"), {}
    for lo, hi, name in spans:  # the union of the device's intervals (streams may overlap)
        busy += max(0.0, hi - max(lo, end))
        end = max(end, hi)
        by_name[name] = by_name.get(name, 0.0) + (hi - lo)
    top = sorted(by_name.items(), key=lambda kv: kv[1], reverse=True)[:8]
    dropout = sum(v for k, v in by_name.items() if k.split("(")[0].strip() in DROPOUT_KERNELS)
    return (busy / 1e6 / calls, [[k[:60], v / 1e3 / calls] for k, v in top],
            dropout / busy if busy else None)


def one_rank_grid(kind: str, device: str, replication: int | None = None):
    """The process grid of this one-process run on ``device``, as ``hpcgnn train`` makes it."""
    from mpi4py import MPI

    from hpcgnn.grid.device import choose_device
    from hpcgnn.grid.process_grid import ProcessGrid
    from hpcgnn.kernels.prepare import prepare_kernels

    comm = MPI.COMM_WORLD
    return ProcessGrid.create(comm, kind, replication=replication,
                              device=choose_device(comm, device, prepare_kernels))


# -- 1 and 5: the epoch, hpcgnn against PyG --------------------------------------------------

def hpcgnn_epoch(path: str, cfg, device: str) -> dict:
    """One rank of ``hpcgnn train``'s full-batch path, in this process."""
    from hpcgnn.io.reader import GraphFile
    from hpcgnn.training.modes import FullBatchMode
    from hpcgnn.training.modes.base import Setup

    t0 = time.perf_counter()
    grid = one_rank_grid("1d", device)
    with GraphFile(path) as gf:
        meta = gf.meta
    trainer = FullBatchMode().build(Setup(path, grid, cfg, meta))
    setup = time.perf_counter() - t0
    epoch = [0]

    def step() -> float:
        epoch[0] += 1
        return trainer.step(epoch[0])

    out = {"setup_s": setup, "epoch_s": median_seconds(step, cfg.epochs, 1)}
    out["device_s"], out["top_ops"], out["dropout_share"] = device_seconds(step, 2)
    out["device"] = grid.device.name
    grid.free()
    return out


def pyg_epoch(path: str, cfg, device: str) -> dict:
    """PyG ``GCNConv`` on the same graph and device (:func:`bench_pyg.pyg_step`)."""
    try:
        from bench_pyg import pyg_step
        t0 = time.perf_counter()
        step = pyg_step(path, cfg, device)
    except ImportError as exc:
        return {"error": f"PyG not installed ({exc})"}
    out: dict = {"setup_s": time.perf_counter() - t0,
                 "epoch_s": median_seconds(step, cfg.epochs, 1)}
    out["device_s"], out["top_ops"], _ = device_seconds(step, 2)
    return out


# -- 2: SpMM against the copy bandwidth --------------------------------------------------------

def copy_bandwidth(device: str, nbytes: int, repeats: int = 5) -> float:
    """Device-to-device copy bytes/s, counting bytes read and written."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    t = median_seconds(lambda: dst.copy_(src), repeats, 1)
    return 2 * src.numel() * 4 / t


def spmm_rates(path: str, widths: list[int], device: str) -> list[dict]:
    """hpcgnn's local SpMM on the GCN operator ``Â^T`` at each width: seconds and bytes/s."""
    from hpcgnn.graph.normalize import operator_block
    from hpcgnn.io import GraphFile
    from hpcgnn.kernels.spmm import spmm, to_torch_csr
    from hpcgnn.kinds import GCN

    with GraphFile(path) as gf:
        n = gf.meta.num_nodes
        block = gf.read_csr(0, n, transpose=True)
        op = operator_block(block, 0, True, gf.read_indptr(0, n, transpose=True),
                            gf.read_indptr(0, n), GCN)
    a = to_torch_csr(op, torch.float32, device)
    nnz = op.nnz
    del block, op
    rows = []
    for w in widths:
        h = torch.rand((n, w), dtype=torch.float32, device=device)
        t = median_seconds(lambda h=h: spmm(a, h), 5, 1)
        nbytes = (n + 1) * 8 + nnz * (8 + 4) + 2 * n * w * 4
        rows.append({"width": w, "nnz": nnz, "seconds": t, "bytes": nbytes,
                     "bytes_per_s": nbytes / t})
        del h
    return rows


# -- 3: sampling ------------------------------------------------------------------------------

def hpcgnn_sampling(path: str, device: str, batch: int, batches: int) -> dict:
    """hpcgnn's bulk GraphSAGE sampler (replicated layout), batches/s, as ``device`` runs it."""
    from hpcgnn.sampling.bulk import BulkSampler, read_train_ids
    from hpcgnn.sampling.shuffle import minibatches
    from hpcgnn.sampling.spec import SamplerSpec

    grid = one_rank_grid("1.5d", device, replication=1)
    spec = SamplerSpec(sampler="sage", sizes=FANOUTS, batch_size=batch, bulk=8)
    sampler = BulkSampler(spec, grid, path, "replicated")
    seeds = minibatches(read_train_ids(path), batch, 0, 0)[:batches]
    t0 = time.perf_counter()
    for first in range(0, len(seeds), spec.bulk):
        for _ in sampler.sample(0, seeds[first:first + spec.bulk], first):
            pass
    if sampler.device == "cuda":
        _sync()  # the last hop's kernels
    seconds = time.perf_counter() - t0
    grid.free()
    return {"batches": len(seeds), "seconds": seconds, "batches_per_s": len(seeds) / seconds,
            "sampled_on": sampler.device}


def pyg_sampling(path: str, batch: int, batches: int) -> dict:
    """PyG ``NeighborLoader`` (fanouts 25, 10) on the same graph, batches/s."""
    try:
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader
    except ImportError as exc:
        return {"error": f"PyG not installed ({exc})"}
    from hpcgnn.io import GraphFile

    with GraphFile(path) as gf:
        n = gf.meta.num_nodes
        a = gf.read_csr(0, n).tocoo()
        train = torch.from_numpy(gf.read_mask("train", 0, n))
    data = Data(edge_index=torch.from_numpy(np.vstack([a.row, a.col]).astype(np.int64)),
                num_nodes=n)
    try:
        loader = NeighborLoader(data, num_neighbors=list(FANOUTS), batch_size=batch,
                                input_nodes=train, shuffle=True)
        t0 = time.perf_counter()
        count = 0
        for _ in loader:
            count += 1
            if count == batches:
                break
    except (ImportError, RuntimeError) as exc:  # no pyg-lib / torch-sparse sampler
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"}
    seconds = time.perf_counter() - t0
    return {"batches": count, "seconds": seconds, "batches_per_s": count / seconds}


# -- 4: the grids on the one GPU ----------------------------------------------------------------

def _launch_env() -> dict[str, str]:
    """This process's environment as it started, for a nested ``mpiexec``.

    ``os.environ``, not the C environment that a child inherits by default: this process
    has initialised MPI (a singleton), and Open MPI's singleton sets variables there
    (``PMIX_*``, ``OMPI_*``) that make a nested ``mpiexec`` exit 1 without a word; any such
    variable from a launcher around this process goes too.
    """
    drop = ("PMIX_", "PMI_", "OMPI_COMM_WORLD", "OMPI_MCA_ess", "OMPI_MCA_orte", "OMPI_MCA_pmix",
            "OMPI_UNIVERSE", "HYDRA_", "MPI_LOCALRANKID")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def grid_runs(path: str, ranks: list[int], epochs: int, tmp: Path) -> list[dict]:
    """``hpcgnn train --device cuda`` for every algorithm and rank count: time, bytes."""
    out = []
    for p in ranks:
        for algo in GRIDS:
            metrics = tmp / f"{algo}-{p}.json"
            shape = ["--grid", GRID_3D[p]] if algo == "3d" and p in GRID_3D else []
            cmd = [mpiexec(), "-n", str(p), *hpcgnn(
                "train", path, "--algo", algo, *shape, "--device", "cuda", "--epochs",
                str(epochs), "--eval-every", "0", "--quiet", "--threads", "1", "--metrics",
                str(metrics))]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=_launch_env())
            row: dict = {"algo": algo, "ranks": p}
            if proc.returncode != 0:
                last = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
                row["error"] = last[-1][:120] if last else f"exit {proc.returncode}"
                print(f"bench_gpu: {' '.join(cmd)} failed:\n{proc.stdout[-800:]}"
                      f"{proc.stderr[-800:]}", flush=True)
            else:
                doc = json.loads(metrics.read_text())
                row.update(grid=doc["config"].get("grid"), epoch_s=doc["time"]["epoch_median_s"],
                           mb_per_epoch=sum(doc["comm"]["measured_bytes"].values()) / 1e6,
                           path=doc["comm"].get("path"))
            out.append(row)
    return out


# -- the run ------------------------------------------------------------------------------------

def _ratio(a: float | None, b: float | None) -> float | str:
    return a / b if a is not None and b else "-"


def main() -> None:
    from hpcgnn.backend import emulation
    from hpcgnn.config import TrainConfig

    emulated = emulation.requested()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", default=emulated,
                   help="a 2,000-vertex graph (the default on the emulated GPU)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--batches", type=int, default=16, help="sampled minibatches per sampler")
    p.add_argument("--ranks", default="1,2" if emulated else "1,2,4",
                   help="rank counts of the grids benchmark (default 1,2,4; 1,2 emulated)")
    p.add_argument("--name", default="bench_gpu_emulated" if emulated else "bench_gpu")
    args = p.parse_args()
    if emulated:
        emulation.activate()
    elif not torch.cuda.is_available():
        sys.exit("bench_gpu: no GPU (set HPCGNN_EMULATE_CUDA=1 for the emulated one)")
    size = TINY if args.tiny else REDDIT
    cfg = TrainConfig(layers=args.layers, hidden=args.hidden, epochs=args.epochs, dropout=0.5)
    doc: dict = {"size": size, "layers": args.layers, "hidden": args.hidden,
                 "epochs": args.epochs, "emulated": emulated}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)

        def done(section: str) -> None:  # progress, and what a killed run leaves behind
            print(f"bench_gpu: {section} done at {time.perf_counter() - t_all:.0f} s: "
                  f"{json.dumps(doc.get(section), default=str)[:1500]}", flush=True)

        def gen(name: str, nodes: int, degree: float) -> str:
            t0 = time.perf_counter()
            out = str(prepare(tmp / name, "sbm", nodes, degree=degree,
                              features=size["features"], classes=size["classes"]))
            doc.setdefault("generate_s", {})[name] = time.perf_counter() - t0
            return out

        big = gen("graph.h5", size["nodes"], size["degree"])
        ours = hpcgnn_epoch(big, cfg, "cuda")
        doc["gpu"] = ours.pop("device")
        theirs = pyg_epoch(big, cfg, "cuda")
        doc["epoch"] = {"hpcgnn": ours, "pyg": theirs}
        done("epoch")
        copy = copy_bandwidth("cuda", 1 << (24 if args.tiny else 30))
        doc["spmm"] = {"copy_bytes_per_s": copy,
                       "rows": spmm_rates(big, sorted({args.hidden, size["features"]}), "cuda")}
        done("spmm")
        doc["sampling"] = {
            "hpcgnn_cuda": hpcgnn_sampling(big, "cuda", args.batch_size, args.batches),
            "hpcgnn_cpu": hpcgnn_sampling(big, "cpu", args.batch_size, args.batches),
            "pyg": pyg_sampling(big, args.batch_size, args.batches),
        }
        done("sampling")
        small = big if args.tiny else gen("tenth.h5", size["nodes"] // 10, size["degree"] / 10)
        doc["grids"] = {"graph_nodes": size["nodes"] if args.tiny else size["nodes"] // 10,
                        "runs": grid_runs(small, [int(r) for r in args.ranks.split(",") if r],
                                          args.epochs, tmp)}
    doc["total_s"] = time.perf_counter() - t_all
    save(args.name, doc, tables(doc))


def tables(doc: dict) -> str:
    """The per-benchmark tables, then the ratio table (last)."""
    e, s, sp = doc["epoch"], doc["sampling"], doc["spmm"]
    what = (f"{doc['size']['nodes']} vertices, {doc['size']['features']} features, "
            f"{doc['layers']} layers, hidden {doc['hidden']}, on {doc['gpu']}"
            + (" (emulated)" if doc["emulated"] else ""))

    def idle(r: dict) -> float | str:  # profiled device time over unprofiled wall time
        return max(0.0, 1 - r["device_s"] / r["epoch_s"]) if r.get("device_s") else "-"

    parts = [markdown(
        f"1, 5. Full-batch GCN epoch, one rank ({what})",
        ["run", "epoch s", "device s/epoch", "idle share", "setup s"],
        [[name, r["epoch_s"], r.get("device_s") or "-", idle(r), r["setup_s"]]
         if "error" not in r else [name, r["error"], "-", "-", "-"]
         for name, r in (("hpcgnn 1d", e["hpcgnn"]), ("PyG GCNConv", e["pyg"]))],
        ["Top device operations of hpcgnn's epoch (ms): " + ", ".join(
            f"{k} {v:.3g}" for k, v in e["hpcgnn"].get("top_ops", []))]
        if e["hpcgnn"].get("top_ops") else ())]
    parts.append(markdown(
        "2. Local SpMM (Â^T H) against the device-to-device copy",
        ["width", "nnz", "ms", "GB/s (compulsory bytes)", "share of copy bandwidth"],
        [[r["width"], r["nnz"], 1e3 * r["seconds"], r["bytes_per_s"] / 1e9,
          r["bytes_per_s"] / sp["copy_bytes_per_s"]] for r in sp["rows"]],
        [f"Copy: {sp['copy_bytes_per_s'] / 1e9:.4g} GB/s (read + written)."]))
    parts.append(markdown(
        f"3. GraphSAGE sampling, fanouts {FANOUTS}, batches/s",
        ["sampler", "sampled on", "batches", "batches/s"],
        [[name, r.get("sampled_on", "cpu" if name.startswith("PyG") else "-"),
          r.get("batches", "-"), r.get("batches_per_s", r.get("error", "-"))]
         for name, r in (("hpcgnn --device cuda", s["hpcgnn_cuda"]),
                         ("hpcgnn --device cpu", s["hpcgnn_cpu"]),
                         ("PyG NeighborLoader", s["pyg"]))]))
    parts.append(markdown(
        f"4. Grids on the one GPU ({doc['grids']['graph_nodes']} vertices)",
        ["algo", "ranks", "grid", "epoch ms", "MB/epoch", "wire"],
        [[r["algo"], r["ranks"], r.get("grid", "-"),
          1e3 * r["epoch_s"] if "epoch_s" in r else r.get("error", "-"),
          r.get("mb_per_epoch", "-"), r.get("path", "-")] for r in doc["grids"]["runs"]]))
    spmm_best = max(r["bytes_per_s"] for r in sp["rows"]) / sp["copy_bytes_per_s"]
    ours_s, pyg_s = e["hpcgnn"]["epoch_s"], e["pyg"].get("epoch_s")
    sample_ratio = _ratio(s["hpcgnn_cuda"]["batches_per_s"], s["pyg"].get("batches_per_s"))
    rows = [
        ["hpcgnn epoch / PyG epoch", _ratio(ours_s, pyg_s), "<= 0.5"],
        ["SpMM bytes/s / copy bytes/s (best width)", spmm_best, ">= 0.3"],
        ["hpcgnn sampling / PyG NeighborLoader (batches/s)", sample_ratio, ">= 5"],
        ["hpcgnn sampling cuda / cpu (batches/s)",
         _ratio(s["hpcgnn_cuda"]["batches_per_s"], s["hpcgnn_cpu"]["batches_per_s"]), "-"],
        ["device idle share of hpcgnn's epoch", idle(e["hpcgnn"]), "-"],
        ["dropout kernels' share of hpcgnn's device time",
         e["hpcgnn"].get("dropout_share") or "-", "-"],
    ]
    parts.append(markdown(f"GPU benchmark ratios ({what}; {doc['total_s']:.0f} s)",
                          ["ratio", "measured", "goal"], rows))
    return "\n".join(parts)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
