"""Local SpMM throughput against this machine's copy bandwidth, per vertex order.

For each graph file (e.g. the same graph before and after ``hpcgnn partition --method
metis``) we time ``Â^T H`` with the kernel the training uses and report the achieved
bandwidth over the compulsory traffic (CSR arrays + H read once + output written once)
and over the gathered traffic (one H row per nonzero), each as a fraction of the
measured copy bandwidth. Writes ``perf/results/bench_spmm.{json,md}`` and prints the
table last.

    python perf/bench_spmm.py inputs/rmat-1m.h5 inputs/rmat-1m-metis.h5 --width 16
    python perf/bench_spmm.py --nodes 200000    # a generated RMAT graph, as is and METIS-ordered
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from tables import markdown, prepare, save


def copy_bandwidth(nbytes: int = 1 << 29, repeats: int = 5) -> float:
    """Bytes per second of a large memory copy (read + write counted), the best of NumPy's
    copy and torch's multi-threaded one (what the SpMM kernel competes with)."""
    best = float("inf")
    for lib in (np, torch):
        src = lib.ones(nbytes // 4, dtype=lib.float32)
        dst = lib.empty_like(src)
        for _ in range(repeats):
            t0 = time.perf_counter()
            dst[:] = src
            best = min(best, time.perf_counter() - t0)
        del src, dst
    return 2 * nbytes / best


def load(path: str, width: int) -> tuple:
    """The normalised ``Â^T`` of a file as a torch CSR tensor, and a dense ``H``."""
    from hpcgnn.io import GraphFile
    from hpcgnn.kernels.spmm import to_torch_csr
    from hpcgnn.models.serial import load_normalized

    with GraphFile(path) as gf:
        a_t, _ = load_normalized(gf, np.float32)
    h = torch.randn(a_t.shape[0], width, generator=torch.Generator().manual_seed(0))
    return to_torch_csr(a_t, torch.float32), h, a_t.nnz


def spmm_rates(paths: list[str], width: int, repeats: int) -> list[dict]:
    """Median SpMM time per graph, timed round-robin so drift hits every graph alike."""
    from hpcgnn.kernels.spmm import spmm

    mats = [load(p, width) for p in paths]
    times: list[list[float]] = [[] for _ in paths]
    for _ in range(repeats + 1):
        for k, (a, h, _) in enumerate(mats):
            t0 = time.perf_counter()
            spmm(a, h)
            times[k].append(time.perf_counter() - t0)
    rows = []
    for path, (a, _, nnz), ts in zip(paths, mats, times, strict=True):
        t = statistics.median(ts[1:])
        n = a.shape[0]
        compulsory = 8 * (n + 1) + 8 * nnz + 4 * nnz + 2 * 4 * n * width
        gathered = 8 * (n + 1) + 8 * nnz + 4 * nnz + 4 * nnz * width + 4 * n * width
        rows.append({"graph": path, "n": n, "nnz": nnz, "width": width, "seconds": t,
                     "compulsory_GBps": compulsory / t / 1e9, "gathered_GBps": gathered / t / 1e9})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graphs", nargs="*", help="graph files (default: a generated RMAT graph, "
                                               "as generated and METIS-ordered)")
    p.add_argument("--nodes", type=int, default=200_000, help="generated graph: vertices")
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--name", default="bench_spmm", help="results name in perf/results")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    bw = copy_bandwidth()
    with tempfile.TemporaryDirectory() as tmp:
        graphs = args.graphs
        if not graphs:
            metis = prepare(Path(tmp) / "rmat-metis.h5", "rmat", args.nodes, parts=8)
            graphs = [str(metis.with_name("rmat-metis-raw.h5")), str(metis)]
        rows = spmm_rates(graphs, args.width, args.repeats)
    for r in rows:
        r["compulsory_over_copy"] = r["compulsory_GBps"] * 1e9 / bw
        r["gathered_over_copy"] = r["gathered_GBps"] * 1e9 / bw
    doc = {"threads": args.threads, "copy_GBps": bw / 1e9, "spmm": rows}
    table = markdown(
        f"Local SpMM (width {args.width}, {args.threads} thread(s)) against copy bandwidth "
        f"{bw / 1e9:.1f} GB/s",
        ["graph", "n", "nnz", "ms", "compulsory GB/s", "/ copy", "gathered GB/s", "/ copy"],
        [[Path(r["graph"]).name, r["n"], r["nnz"], 1e3 * r["seconds"], r["compulsory_GBps"],
          r["compulsory_over_copy"], r["gathered_GBps"], r["gathered_over_copy"]]
         for r in rows],
    )
    save(args.name, doc, table)


if __name__ == "__main__":
    main()
