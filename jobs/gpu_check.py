"""``make gpu-check``: prove the GPU path on one GPU node in a few minutes, with a table.

Run on a node with one GPU (``make gpu-check``, or ``python3 jobs/gpu_check.py``), or on
the emulated GPU anywhere (``HPCGNN_EMULATE_CUDA=1 make gpu-check``, as CI does). Steps:

1. **probe** — GPU and driver, torch, CuPy, NVRTC (a probe kernel compiled and run with
   the loader's options), every ``cuda/*.cu`` compiled, MPI (library, CUDA-awareness);
2. **kernels** — ``tests/kernels``: each kernel against its CPU twin (on the device where
   there is one; the host builds of the sources everywhere);
3. **rows** — the row kernels' 16-byte packing (``cuda/rows.cu``): gather and scatter-add of
   float32 and float64 rows, the packed (``hpcgnn_vec16``) and the scalar kernels, each
   equal to the CPU twin, and their bandwidth side by side (tiny on the emulated GPU);
4. **gpu tests** — ``pytest -m gpu`` over the rest of the suite, serially;
5. **matrix** — ``tests/test_device_matrix.py`` at 1, 2 and 4 ranks: every mode and model
   on the CPU and the GPU (emulated: identical ``params_sha256``; real: losses within
   float32 tolerance, equal bytes, two GPU runs identical);
6. **offload paths** — HongTu's device paths of ``--mode offload`` (in-place buffers,
   interleaved rounds, zero-copy loads from the pinned host tier, the merged transition +
   neighbour buffer: :data:`OFFLOAD_PATHS`)
   at 2 ranks, each equal to today's path on the GPU bit for bit and to the CPU path (on
   the emulated GPU bit for bit), with the same bytes; and the zero-copy kernel on its own;
7. **benchmark** — the Reddit-sized GPU benchmark, once it exists;
8. **spmm by width** — ``perf/bench_spmm.py --device cuda``: hpcgnn's SpMM (int32 indices)
   and torch's plain one (int64) at widths 16, 64, 128 and 256 against the gathered-row
   traffic at the device's copy bandwidth (a 500,000-vertex SBM graph; 2,000 emulated).

The summary table is printed last and written to ``perf/results/gpu-<date>.md``
(``--out``; ``gpu-emulated-<date>.md`` on the emulated GPU, which git ignores). The
node's own torch and CuPy are used: ``make gpu-check`` runs this script
in a venv that sees the node's packages (``build/gpu-env``), after adding from
``build/gpu-wheels`` (``make gpu-wheels PY=3.x`` on a machine with a package index) only
what the node lacks (``jobs/install_missing_wheels.py``); the project is imported from
this tree. Exit status 1 when a step failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The GPU benchmarks (Reddit-sized on a GPU, tiny on the emulated one) and their table.
BENCHMARK = ROOT / "perf" / "bench_gpu.py"
#: The SpMM-by-width benchmark, and its graph's vertices on a GPU and on the emulated one.
SPMM_BENCHMARK = ROOT / "perf" / "bench_spmm.py"
SPMM_NODES = {"gpu": 500_000, "gpu-emulated": 2_000}
RESULTS = ROOT / "perf" / "results"
#: The rows step's sizes: source rows, row ids, row width (a GPU; the emulated GPU).
ROWS_SIZES = {"gpu": (1 << 18, 1 << 19, 128), "emulated": (2_000, 4_000, 16)}
#: The offload paths step: the tests of HongTu's device paths (issue 43 items 5, 6, 7).
OFFLOAD_PATHS = ("tests/exchange/test_offload.py", "-k",
                 "in_place or interleaved or zero_copy or merged")
OFFLOAD_KERNEL = ("tests/kernels/test_rows.py", "-k", "copy_rows")


def _env() -> dict[str, str]:
    """The environment of the steps: this tree first on ``PYTHONPATH``, the cuda device."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HPCGNN_TEST_DEVICE"] = "cuda"
    env.setdefault("PYTHONUNBUFFERED", "1")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # Open MPI's mpiexec refuses root else
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")  # ranks may outnumber cores
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")  # containers lack CMA
    return env


def mpiexec() -> str | None:
    """The ``mpiexec`` to launch with: beside this Python (a venv's MPICH wheel), or on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def probe() -> list[tuple[str, str, bool]]:
    """What the node has: one row (item, value, usable) each."""
    rows: list[tuple[str, str, bool]] = []

    def row(item: str, fn) -> None:
        try:
            value = fn()
            rows.append((item, str(value), True))
        except Exception as exc:  # a probe reports, it does not stop
            rows.append((item, f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}", False))

    import torch

    from hpcgnn.backend import emulation

    emulated = emulation.requested()
    rows.append(("python", sys.version.split()[0], True))
    rows.append(("torch", f"{torch.__version__} (CUDA {torch.version.cuda})", True))
    if emulated:
        rows.append(("gpu", "emulated (HPCGNN_EMULATE_CUDA=1): host memory", True))
        row("host compiler", lambda: subprocess.run(
            [os.environ.get("CXX", "c++"), "--version"], capture_output=True, text=True,
            check=True).stdout.splitlines()[0])
    else:
        row("gpu", lambda: f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")
        row("driver", lambda: subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=True).stdout.strip())
        row("cupy", lambda: __import__("cupy").__version__)
        row("nvrtc", lambda: ".".join(map(str, __import__("cupy").cuda.nvrtc.getVersion())))

    def kernels() -> str:
        from hpcgnn.backend import get_device
        from hpcgnn.kernels.prepare import prepare_kernels, sources

        t0 = time.perf_counter()
        prepare_kernels(get_device("cuda"))
        return f"probe + {len(sources())} sources compiled in {time.perf_counter() - t0:.1f} s"

    row("kernels", kernels)

    def mpi() -> str:
        from hpcgnn.comm.wire import library_cuda_aware, library_version

        lib = library_version()
        return f"mpi4py {__import__('mpi4py').__version__}, {lib}; CUDA-aware: " \
               f"{library_cuda_aware()}"

    row("mpi", mpi)
    return rows


def _median_seconds(call, sync, repeats: int) -> float:
    """The median wall seconds of ``call()`` (``sync()`` after each), after one warm-up."""
    call()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def row_packing(emulated: bool, repeats: int = 5) -> tuple[dict, list[str]]:
    """The rows step: packed and scalar row kernels against the CPU twins, and their GB/s.

    Gather (``gather_rows``) and general scatter-add (``scatter_add_rows`` with a prebuilt
    :class:`~hpcgnn.kernels.rows.ScatterMap`, as the exchanges call it) of rows of
    ``ROWS_SIZES`` width, which pack; bytes: the rows read and written plus the row ids.
    Returns the step's summary and its Markdown table.
    """
    import torch

    from hpcgnn.backend import get_device
    from hpcgnn.kernels import rows as rk

    t_start = time.perf_counter()
    dev = get_device("cuda")
    n_src, n_ids, f = ROWS_SIZES["emulated" if emulated else "gpu"]
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, n_src, (n_ids,), generator=gen)
    inverse = rk.scatter_map(idx.to(dev.torch_device))
    lines = ["| kernel | dtype | width | packed GB/s | scalar GB/s | packed / scalar | "
             "both equal the CPU |", "|---|---|---|---|---|---|---|"]
    ok = True
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(n_src, f, dtype=dtype, generator=gen)
        rows = torch.randn(n_ids, f, dtype=dtype, generator=gen)
        dx, drows, didx = (t.to(dev.torch_device) for t in (x, rows, idx))
        row_bytes, m = f * x.element_size(), len(inverse.targets)
        target = dx.clone()  # the timed scatter-adds accumulate into it
        cases = {  # kernel: (one call, the CPU twin's result, the bytes it moves)
            "gather_rows": (
                functools.partial(rk.gather_rows, dx, didx),
                rk.gather_rows(x, idx),
                2 * n_ids * row_bytes + n_ids * 8,
            ),
            "scatter_add_segments": (
                functools.partial(rk.scatter_add_rows, target, inverse, drows),
                rk.scatter_add_rows(x.clone(), idx, rows),
                (n_ids + 2 * m) * row_bytes + (2 * n_ids + 2 * m) * 8,
            ),
        }
        for kernel, (call, want, nbytes) in cases.items():
            rate, equal = {}, True
            for packed in (True, False):
                if kernel == "gather_rows":
                    got = call(packed=packed)
                else:  # a fresh target for the check
                    got = rk.scatter_add_rows(dx.clone(), inverse, drows, packed=packed)
                equal &= got.cpu().numpy().tobytes() == want.numpy().tobytes()
                timed = functools.partial(call, packed=packed)
                rate[packed] = nbytes / _median_seconds(timed, dev.synchronize, repeats) / 1e9
            ok &= equal
            lines.append(
                f"| {kernel} | {str(dtype).removeprefix('torch.')} | {f} | "
                f"{rate[True]:.1f} | {rate[False]:.1f} | "
                f"{rate[True] / rate[False]:.2f}x | {equal} |"
            )
    result = f"{n_ids} ids x {f} columns from {n_src} rows; packed = scalar = CPU: {ok}"
    return ({"step": "rows", "ok": ok, "result": result,
             "seconds": time.perf_counter() - t_start}, lines)


def run_step(name: str, cmd: list[str], env: dict[str, str], timeout: float) -> dict:
    """Run one step's command, echo its output, and summarise its closing pytest line."""
    print(f"\n== gpu-check: {name}: {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)
        out, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out, rc = f"{exc.stdout or ''}{exc.stderr or ''}\ntimed out after {timeout:.0f} s", 124
    seconds = time.perf_counter() - t0
    print(out[-4000:], flush=True)
    words = (" passed", " failed", " skipped", "no tests ran")
    closing = [ln.strip("= ") for ln in out.splitlines() if any(w in ln for w in words)
               and " in " in ln]
    result = closing[-1] if closing else f"exit {rc}"
    ok = rc == 0 or (rc == 5 and "no tests ran" in out)
    return {"step": name, "ok": ok, "result": result, "seconds": seconds}


def matrix_table(path: Path) -> list[str]:
    """The matrix's rows as Markdown (one line per entry and rank count)."""
    if not path.exists():
        return ["(no matrix rows)"]
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = ["| entry | ranks | params cpu = cuda | loss rel. diff | bytes equal | "
             "two GPU runs equal | s |", "|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["entry"], r["ranks"])):
        rep = "-" if r.get("repeat_identical") is None else str(r["repeat_identical"])
        lines.append(f"| {r['entry']} | {r['ranks']} | {r['same_params']} | "
                     f"{r['loss_rel_diff']:.1e} | {r['same_bytes']} | {rep} | {r['seconds']} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the steps and print (and write) the summary; 0 when every step passed."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="1,2,4", help="rank counts of the matrix")
    kind = "gpu-emulated" if os.environ.get("HPCGNN_EMULATE_CUDA", "").strip() == "1" else "gpu"
    p.add_argument("--out", type=Path,
                   default=ROOT / "perf" / "results" / f"{kind}-{dt.date.today().isoformat()}.md")
    p.add_argument("--step-timeout", type=float, default=300.0)
    p.add_argument("--bench-timeout", type=float, default=420.0)
    p.add_argument("--steps", default="kernels,rows,gpu,matrix,offload,benchmark,spmm",
                   help="which steps after the probe (a rerun of the failed ones)")
    args = p.parse_args(argv)
    t_start = time.perf_counter()

    work = Path(tempfile.mkdtemp(prefix="hpcgnn-gpu-check-"))
    sys.path.insert(0, str(ROOT))
    env = _env()

    probes = probe()
    steps = [{"step": "probe", "ok": all(ok for _, _, ok in probes),
              "result": "; ".join(f"{k}: {'ok' if ok else 'FAILED'}" for k, _, ok in probes),
              "seconds": 0.0}]
    chosen = set(args.steps.split(","))
    py = [sys.executable, "-m", "pytest", "-q", "--color=no", "-p", "no:cacheprovider"]
    if "kernels" in chosen:
        steps.append(run_step("kernels", [*py, "tests/kernels"], env, args.step_timeout))
    rows_table: list[str] = []
    if "rows" in chosen:
        try:
            step, rows_table = row_packing(kind == "gpu-emulated")
        except Exception as exc:  # a step reports, it does not stop the others
            step = {"step": "rows", "ok": False, "seconds": 0.0,
                    "result": f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"}
        steps.append(step)
    if "gpu" in chosen:
        steps.append(run_step("gpu tests", [*py, "-m", "gpu", "tests", "--ignore=tests/kernels"],
                              env, args.step_timeout))
    rows = work / "matrix.jsonl"
    launcher = mpiexec()
    ranks = [int(r) for r in args.ranks.split(",") if r] if "matrix" in chosen else []
    for n in ranks:
        if launcher is None:
            steps.append({"step": f"matrix {n} ranks", "ok": False, "result": "no mpiexec",
                          "seconds": 0.0})
            continue
        cmd = [launcher, "-n", str(n), sys.executable, "-m", "mpi4py", *py[1:], "--only-mpi",
               "tests/test_device_matrix.py"]
        steps.append(run_step(f"matrix {n} ranks", cmd, {**env, "HPCGNN_MATRIX_OUT": str(rows)},
                              args.step_timeout))
    if "offload" in chosen:
        steps.append(run_step("offload kernel", [*py, *OFFLOAD_KERNEL], env, args.step_timeout))
        if launcher is None:
            steps.append({"step": "offload paths", "ok": False, "result": "no mpiexec",
                          "seconds": 0.0})
        else:
            cmd = [launcher, "-n", "2", sys.executable, "-m", "mpi4py", *py[1:], "--only-mpi",
                   *OFFLOAD_PATHS]
            steps.append(run_step("offload paths 2 ranks", cmd, env, args.step_timeout))
    bench_name = f"bench_{kind.replace('-', '_')}"  # the table the benchmark writes
    bench_table = RESULTS / f"{bench_name}.md"
    if "benchmark" in chosen and BENCHMARK.exists():
        bench_table.unlink(missing_ok=True)
        bench = [sys.executable, str(BENCHMARK), "--name", bench_name]
        steps.append(run_step("benchmark", bench, env, args.bench_timeout))
    elif "benchmark" in chosen:
        steps.append({"step": "benchmark", "ok": True, "seconds": 0.0,
                      "result": f"skipped: {BENCHMARK.relative_to(ROOT)} does not exist yet"})
    spmm_name = f"bench_spmm_{kind.replace('-', '_')}"
    spmm_table = RESULTS / f"{spmm_name}.md"
    if "spmm" in chosen:
        spmm_table.unlink(missing_ok=True)
        quick = ["--repeats", "2", "--copy-mib", "16"] if kind == "gpu-emulated" else []
        bench = [sys.executable, str(SPMM_BENCHMARK), "--device", "cuda", "--nodes",
                 str(SPMM_NODES[kind]), "--name", spmm_name, *quick]
        steps.append(run_step("spmm by width", bench, env, args.step_timeout))

    total = time.perf_counter() - t_start
    lines = [f"# gpu-check {dt.datetime.now().isoformat(timespec='seconds')}", "",
             f"Total {total:.0f} s on {sys.executable}.", "",
             "| probe | value | ok |", "|---|---|---|",
             *[f"| {k} | {v} | {ok} |" for k, v, ok in probes], "",
             "| step | result | s | ok |", "|---|---|---|---|",
             *[f"| {s['step']} | {s['result']} | {s['seconds']:.0f} | {s['ok']} |" for s in steps],
             "", *matrix_table(rows)]
    if rows_table:
        lines += ["", "## Row kernels: 16-byte packs and scalars (cuda/rows.cu)", "",
                  *rows_table]
    if bench_table.exists():
        lines += ["", "## Benchmarks (perf/bench_gpu.py)", "", bench_table.read_text()]
    if spmm_table.exists():
        lines += ["", "## SpMM by width (perf/bench_spmm.py)", "", spmm_table.read_text()]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print("\n" + text + f"written to {args.out}")
    return 0 if all(s["ok"] for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
