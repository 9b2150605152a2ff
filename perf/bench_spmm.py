"""Local SpMM by width: hpcgnn's kernel and torch's plain CSR SpMM against the gathered rows.

For each graph file (default: the SBM graph of ``make run``, 20,000 vertices, generated when
``inputs/sbm-20k.h5`` is missing) and each width of ``H`` we time ``Â^T H`` two ways, side
by side: **ours**, :func:`hpcgnn.kernels.spmm.spmm` on the block :func:`to_torch_csr` makes
(column blocks of ``H`` on the host, int32 indices on a GPU), and **torch**,
``torch.sparse.mm`` on the same matrix with int64 indices in one call. The yardstick is the
**gathered-row traffic** (the CSR arrays, one row of ``H`` per nonzero, the output written
once) moved at this machine's copy bandwidth (read + write counted), measured in the same
run. Everything is timed round-robin (copy, then each width's two kernels, which goes
first alternating by round) so drift and other load hit all alike; each product is timed
right after an untimed run of itself (the copy evicts the caches); medians are reported,
with the load average before and after. Writes ``perf/results/<name>.{json,md}`` and
prints the table last.

    python perf/bench_spmm.py                          # SBM-20k, widths 16 64 128 256
    python perf/bench_spmm.py --threads 1,2 --repeats 21
    python perf/bench_spmm.py --device cuda --nodes 500000 --name bench_spmm_gpu
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from tables import markdown, prepare, save

ROOT = Path(__file__).resolve().parents[1]
#: The graph of ``make run`` (the Makefile's ``GRAPH``).
DEFAULT_GRAPH = ROOT / "inputs" / "sbm-20k.h5"
WIDTHS = (16, 64, 128, 256)
#: Acceptance: our time at most this multiple of the gathered-row traffic's time.
GOAL = 2.0


def _sync(device: str) -> None:
    if device != "cpu" and torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(step: Callable[[], object], device: str) -> float:
    """Wall seconds of one call of ``step``, the device synchronised around it."""
    _sync(device)
    t0 = time.perf_counter()
    step()
    _sync(device)
    return time.perf_counter() - t0


def load(path: str, device: str) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The normalised ``Â^T`` of a file as hpcgnn's CSR tensor and as torch's (int64)."""
    from hpcgnn.io import GraphFile
    from hpcgnn.kernels.spmm import to_torch_csr
    from hpcgnn.models.serial import load_normalized

    with GraphFile(path) as gf:
        a_t, _ = load_normalized(gf, np.float32)
    ours = to_torch_csr(a_t, torch.float32, device)
    plain = torch.sparse_csr_tensor(
        torch.from_numpy(a_t.indptr.astype(np.int64)),
        torch.from_numpy(a_t.indices.astype(np.int64)),
        torch.from_numpy(a_t.data.astype(np.float32)),
        size=a_t.shape,
        check_invariants=False,
    ).to(device)
    return ours, plain, int(a_t.nnz)


def gathered_bytes(a: torch.Tensor, nnz: int, width: int) -> int:
    """The CSR arrays, one ``H`` row per nonzero and the output once (float32 values)."""
    n = a.shape[0]
    index = a.crow_indices().element_size()
    return index * (n + 1) + (index + 4) * nnz + 4 * nnz * width + 4 * n * width


def measure(
    paths: list[str],
    widths: list[int],
    threads: list[int],
    repeats: int,
    device: str,
    copy_bytes: int,
) -> tuple[list[dict], list[float]]:
    """Median seconds of ours and torch's per (graph, threads, width); the copy's bytes/s."""
    from hpcgnn.kernels.spmm import spmm

    mats = [load(p, device) for p in paths]
    gen = torch.Generator().manual_seed(0)
    hs = {
        w: torch.randn(max(a.shape[1] for a, _, _ in mats), w, generator=gen).to(device)
        for w in widths
    }
    src = torch.ones(copy_bytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    copy: list[float] = []
    times: dict[tuple, list[float]] = {}
    same: dict[tuple, bool] = {}
    for rep in range(repeats + 1):  # round 0 warms up
        for t in threads:
            torch.set_num_threads(t)
            seconds = timed(lambda: dst.copy_(src), device)
            if rep:
                copy.append(2 * copy_bytes / seconds)
            for k, (ours, plain, _) in enumerate(mats):
                for w in widths:
                    h = hs[w][: ours.shape[1]]
                    kernels = [
                        ("ours", lambda a=ours, h=h: spmm(a, h)),
                        ("torch", lambda a=plain, h=h: torch.sparse.mm(a, h)),
                    ]
                    for name, fn in kernels[:: 1 if rep % 2 else -1]:
                        fn()  # the steady state: operands in cache as far as they fit
                        s = timed(fn, device)
                        if rep:
                            times.setdefault((k, t, w, name), []).append(s)
                    if not rep:
                        same[(k, t, w)] = bool(
                            torch.equal(spmm(ours, h), torch.sparse.mm(plain, h))
                        )
    bw = statistics.median(copy)
    rows = []
    for k, (path, (ours, _, nnz)) in enumerate(zip(paths, mats, strict=True)):
        for t in threads:
            for w in widths:
                nbytes = gathered_bytes(ours, nnz, w)
                ideal = nbytes / bw
                mine = statistics.median(times[(k, t, w, "ours")])
                theirs = statistics.median(times[(k, t, w, "torch")])
                rows.append(
                    {
                        "graph": Path(path).name,
                        "n": ours.shape[0],
                        "nnz": nnz,
                        "threads": t,
                        "width": w,
                        "gathered_bytes": nbytes,
                        "ideal_s": ideal,
                        "ours_s": mine,
                        "torch_s": theirs,
                        "ours_over_ideal": mine / ideal,
                        "torch_over_ideal": theirs / ideal,
                        "ours_GBps": nbytes / mine / 1e9,
                        "torch_GBps": nbytes / theirs / 1e9,
                        "identical": same[(k, t, w)],
                    }
                )
    return rows, copy


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "graphs",
        nargs="*",
        help=f"graph files (default: {DEFAULT_GRAPH.name}, generated when missing, or --nodes)",
    )
    p.add_argument(
        "--nodes",
        type=int,
        help="a generated SBM graph of this many vertices "
        "(average degree 16) instead of the default",
    )
    p.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    p.add_argument(
        "--threads",
        default=str(torch.get_num_threads()),
        help="torch thread counts, comma-separated (each timed in every round)",
    )
    p.add_argument("--repeats", type=int, default=15, help="timed rounds (one more warms up)")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (a GPU or the emulated one)")
    p.add_argument("--copy-mib", type=int, default=256, help="size of the timed copy")
    p.add_argument("--name", default="bench_spmm", help="results name in perf/results")
    args = p.parse_args()
    if args.device != "cpu":
        from hpcgnn.backend import emulation

        if emulation.requested():
            emulation.activate()
    widths = [int(w) for w in args.widths.split(",") if w]
    threads = [int(t) for t in args.threads.split(",") if t]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        graphs = args.graphs
        if not graphs and args.nodes:
            graphs = [str(prepare(Path(tmp) / f"sbm-{args.nodes}.h5", "sbm", args.nodes))]
        elif not graphs:
            path = DEFAULT_GRAPH
            if not path.exists():
                path = prepare(Path(tmp) / DEFAULT_GRAPH.name, "sbm", 20_000)
            graphs = [str(path)]
        rows, copy = measure(
            graphs, widths, threads, args.repeats, args.device, args.copy_mib << 20
        )
    load_after = os.getloadavg()
    bw = statistics.median(copy)
    doc = {
        "device": args.device,
        "threads": threads,
        "repeats": args.repeats,
        "copy_GBps": bw / 1e9,
        "copy_best_GBps": max(copy) / 1e9,
        "load_before": load_before,
        "load_after": load_after,
        "goal_over_ideal": GOAL,
        "spmm": rows,
    }
    met = all(r["ours_over_ideal"] <= GOAL for r in rows)
    table = markdown(
        f"Local SpMM by width on {args.device}: ours against torch's plain CSR SpMM and "
        f"the gathered-row traffic at the copy bandwidth {bw / 1e9:.1f} GB/s",
        [
            "graph",
            "threads",
            "width",
            "gathered MB",
            "ideal ms",
            "ours ms",
            "torch ms",
            "ours / ideal",
            "torch / ideal",
            "ours GB/s",
            "torch GB/s",
            "identical",
        ],
        [
            [
                r["graph"],
                r["threads"],
                r["width"],
                r["gathered_bytes"] / 1e6,
                1e3 * r["ideal_s"],
                1e3 * r["ours_s"],
                1e3 * r["torch_s"],
                r["ours_over_ideal"],
                r["torch_over_ideal"],
                r["ours_GBps"],
                r["torch_GBps"],
                r["identical"],
            ]
            for r in rows
        ],
        [
            f"Medians of {args.repeats} interleaved rounds; copy bandwidth the median of one "
            f"{args.copy_mib} MiB copy per round (best {max(copy) / 1e9:.1f} GB/s), read + "
            f"written. Load average (1, 5, 15 min) {_load(load_before)} before, "
            f"{_load(load_after)} after. Goal: ours / ideal <= {GOAL:g} at every width: "
            f"{'met' if met else 'NOT met'}."
        ],
    )
    save(args.name, doc, table)


def _load(avg: tuple[float, float, float]) -> str:
    return "/".join(f"{v:.2f}" for v in avg)


if __name__ == "__main__":
    main()
