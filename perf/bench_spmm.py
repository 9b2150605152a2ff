"""Local SpMM throughput against this machine's copy bandwidth, per vertex order.

For each graph file (e.g. the same graph before and after ``hpcgnn partition --method
metis``) we time ``Â^T H`` with the kernel the training uses and report the achieved
bandwidth over the compulsory traffic (CSR arrays + H read once + output written once)
and over the gathered traffic (one H row per nonzero), each as a fraction of the
measured copy bandwidth.

    python perf/bench_spmm.py inputs/rmat-1m.h5 inputs/rmat-1m-metis.h5 --width 16
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch


def copy_bandwidth(nbytes: int = 1 << 29, repeats: int = 5) -> float:
    """Bytes per second of a large memory copy (read + write counted)."""
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best


def torch_copy_bandwidth(nbytes: int = 1 << 29, repeats: int = 5) -> float:
    """The same with torch's multi-threaded copy (what the SpMM kernel competes with)."""
    src = torch.ones(nbytes // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best


def spmm_rate(path: str, width: int, repeats: int) -> dict:
    from hpcgnn.io import GraphFile
    from hpcgnn.kernels.spmm import spmm, to_torch_csr
    from hpcgnn.train.serial import load_normalized

    with GraphFile(path) as gf:
        a_t, _ = load_normalized(gf, np.float32)
        n = gf.meta.num_nodes
    a = to_torch_csr(a_t, torch.float32)
    h = torch.randn(n, width)
    spmm(a, h)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        spmm(a, h)
        times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    nnz = a_t.nnz
    compulsory = 8 * (n + 1) + 8 * nnz + 4 * nnz + 2 * 4 * n * width
    gathered = 8 * (n + 1) + 8 * nnz + 4 * nnz + 4 * nnz * width + 4 * n * width
    return {"graph": path, "n": n, "nnz": nnz, "width": width, "seconds": t,
            "compulsory_GBps": compulsory / t / 1e9, "gathered_GBps": gathered / t / 1e9}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graphs", nargs="+")
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--json", default=None)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    bw = max(copy_bandwidth(), torch_copy_bandwidth())
    rows = [spmm_rate(g, args.width, args.repeats) for g in args.graphs]
    for r in rows:
        r["compulsory_over_copy"] = r["compulsory_GBps"] * 1e9 / bw
        r["gathered_over_copy"] = r["gathered_GBps"] * 1e9 / bw
    doc = {"threads": args.threads, "copy_GBps": bw / 1e9, "spmm": rows}
    print(json.dumps(doc, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=2)


if __name__ == "__main__":
    main()
