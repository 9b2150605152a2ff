"""LADIES in the graph-partitioned layout: our row all-gather against the paper's all-reduce.

Issue 25: the last step of the sparsity-aware 1.5D SpGEMM (:mod:`hpcgnn.sampling.
spgemm_1p5d`) all-gathers the fetched rows of ``S`` across the process row; the paper
all-reduces the ``c`` partial products of ``P = Q (S .* S)`` instead (and then runs the row
extraction ``R S`` as a second SpGEMM). Each run trains one epoch with ``--sampler ladies
--graph-layout partitioned`` and reads, from its metrics, the measured bytes of ours
(``bytes_sparsity_aware``: the stage loop's fetch; ``bytes_row_combine``: the frontier
gather and the row all-gather, ``sample_combine`` being the latter) and what the paper's
all-reduce would have moved (``bytes_partial_products``, computed from local sizes). The
table goes to ``perf/results/ladies_partial_products.{json,md}`` with every command.

With ``--measured`` every configuration at ``c > 1`` also trains with ``--ladies-reduction
partial-products`` (the paper's scheme run: ``P``'s partial products reduced over the
process row, ``sample_partial_products``, and ``R S`` as a second SpGEMM), and the measured
bytes of both schemes go to ``perf/results/ladies_reduction_measured.{json,md}``.

    python perf/ladies_partial_products.py                   # graphs in /tmp/ladies
    python perf/ladies_partial_products.py --quick           # one graph, 4 ranks
    python perf/ladies_partial_products.py --measured --graphs sbm2k_d8,sbm20k_d8 --ranks 4
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
from pathlib import Path

from tables import hpcgnn, markdown, mpiexec, save

#: name -> (generator, vertices, average degree)
GRAPHS = {
    "sbm2k_d8": ("sbm", 2000, 8), "sbm2k_d16": ("sbm", 2000, 16),
    "sbm20k_d8": ("sbm", 20000, 8), "sbm20k_d16": ("sbm", 20000, 16),
    "rmat16k_d16": ("rmat", 16384, 16),
}


def prepare_cmd(path: Path, generator: str, nodes: int, degree: int) -> list[str]:
    """``hpcgnn prepare synthetic`` for one of :data:`GRAPHS` (16 features, 4 classes)."""
    return hpcgnn("prepare", "synthetic", "--generator", generator, "--num-nodes", str(nodes),
                  "--avg-degree", str(degree), "--feature-dim", "16", "--classes", "4",
                  "--seed", "0", "--out", str(path), "--quiet")


def train_cmd(path: Path, ranks: int, c: int, size: int, batch: int, metrics: Path,
              reduction: str = "rows") -> list[str]:
    """One epoch of LADIES minibatch training, partitioned layout, two layers of ``size``."""
    return [mpiexec(), "-n", str(ranks), *hpcgnn(
        "train", str(path), "--mode", "minibatch", "--sampler", "ladies", "--layer-size",
        f"{size},{size}", "--batch-size", str(batch), "--graph-layout", "partitioned",
        "--replication", str(c), "--epochs", "1", "--hidden", "8", "--threads", "1",
        "--quiet", "--metrics", str(metrics), "--ladies-reduction", reduction)]


def row(graph: str, doc: dict) -> list[object]:
    """A table row from a metrics document."""
    s, measured = doc["sampling"], doc["comm"]["measured_bytes"]
    combine = int(measured.get("sample_combine", 0))
    fetch, partial = s["bytes_sparsity_aware"], s["bytes_partial_products"]
    ours = fetch + s["bytes_row_combine"]
    paper = s["bytes_row_combine"] + 2 * fetch + partial  # a lower bound, see the notes
    return [graph, doc["world_size"], doc["config"]["grid"], s["sizes"][0],
            s["batch_size"], s["batches_per_epoch"], fetch, s["bytes_row_combine"], combine,
            partial, f"{partial / combine:.2f}" if combine else "-", ours, paper,
            f"{paper / ours:.2f}" if ours else "-"]


def measured_row(graph: str, ours: dict, paper: dict) -> list[object]:
    """A row of the measured table: both schemes run (``rows`` and ``partial-products``)."""
    s, t = ours["sampling"], paper["sampling"]
    mine = s["bytes_sparsity_aware"] + s["bytes_row_combine"]
    fetch, combine = t["bytes_sparsity_aware"], t["bytes_row_combine"]
    partial = t["bytes_partial_products"]
    theirs = fetch + combine + partial
    same = ours["params_sha256"] == paper["params_sha256"]
    return [graph, ours["world_size"], ours["config"]["grid"], s["sizes"][0], s["batch_size"],
            mine, fetch, combine, partial, s["bytes_partial_products"], theirs,
            f"{theirs / mine:.2f}" if mine else "-", f"{partial / mine:.2f}" if mine else "-",
            "yes" if same else "NO"]


def run(cmd: list[str], metrics: Path, reuse: bool) -> dict:
    """Run ``cmd`` unless ``reuse`` and ``metrics`` exist; its metrics document."""
    if not (reuse and metrics.exists()):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(metrics.read_text())


def main() -> None:
    """Run every configuration, then write the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", type=Path, default=Path("/tmp/ladies"), help="graphs and metrics")
    p.add_argument("--quick", action="store_true", help="sbm2k_d8 at 4 ranks only")
    p.add_argument("--graphs", default=",".join(GRAPHS), help="comma-separated graph names")
    p.add_argument("--reuse", action="store_true",
                   help="read the metrics of a run whose file exists instead of running it")
    p.add_argument("--ranks", default="4,8", help="comma-separated rank counts")
    p.add_argument("--measured", action="store_true",
                   help="also run --ladies-reduction partial-products at c > 1 and write "
                        "ladies_reduction_measured")
    args = p.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    graphs = ["sbm2k_d8"] if args.quick else args.graphs.split(",")
    procs = (4,) if args.quick else tuple(int(r) for r in args.ranks.split(","))
    measured: list[list[object]] = []
    configs = [(ranks, c, size, batch) for ranks in procs
               for c in (1, 2) for size in (64, 512) for batch in (256, 1024)
               if c == 2 or (size, batch) == (512, 1024)]  # c = 1: no process-row step
    commands, rows, docs = [], [], []
    for graph in graphs:
        path = args.dir / f"{graph}.h5"
        cmd = prepare_cmd(path, *GRAPHS[graph])
        commands.append(shlex.join(cmd))
        if not path.exists():
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        for ranks, c, size, batch in configs:
            metrics = args.dir / f"{graph}-p{ranks}-c{c}-s{size}-b{batch}.json"
            cmd = train_cmd(path, ranks, c, size, batch, metrics)
            commands.append(shlex.join(cmd))
            doc = run(cmd, metrics, args.reuse)
            if args.measured and c > 1:
                paper = metrics.with_name(metrics.stem + "-paper.json")
                cmd = train_cmd(path, ranks, c, size, batch, paper, "partial-products")
                commands.append(shlex.join(cmd))
                measured.append(measured_row(graph, doc, run(cmd, paper, args.reuse)))
            docs.append({"graph": graph, "command": commands[-1], "sampling": doc["sampling"],
                         "measured_bytes": doc["comm"]["measured_bytes"]})
            rows.append(row(graph, doc))
    header = ["graph", "P", "grid", "layer size", "batch", "batches", "fetch",
              "row_combine", "sample_combine", "partial_products", "partial / combine",
              "ours", "paper >=", "paper / ours"]
    notes = [
        "Bytes summed over ranks, one epoch, two LADIES layers. fetch = "
        "`bytes_sparsity_aware` (stage loop, the same in both schemes); row_combine = "
        "`bytes_row_combine` (`sample_frontier + sample_combine`), sample_combine our row "
        "all-gather alone; partial_products = `bytes_partial_products`, the paper's "
        "all-reduce of the partial products of P (an all-gather of every replica's partial "
        "rows to the others: 8 bytes per row, 16 per nonzero). ours = fetch + row_combine; "
        "paper >= row_combine + 2 fetch + partial_products: the paper's row extraction R S "
        "runs Algorithm 2 again (the same rows fetched again) and all-reduces rows of S "
        "(at least our sample_combine); control bytes left out of both.",
        "",
        "Commands:",
        "",
        "```",
        *commands,
        "```",
    ]
    table = markdown("LADIES, partitioned layout: row all-gather (ours) vs all-reduce of "
                     "partial products (paper)", header, rows, notes)
    if not args.measured:
        save("ladies_partial_products", {"runs": docs}, table)
        return
    header = ["graph", "P", "grid", "layer size", "batch", "ours", "paper fetch",
              "paper frontier + combine", "paper partial_products", "counted all-gather",
              "paper", "paper / ours", "partial / ours", "same weights"]
    notes = [
        "Bytes summed over ranks, one epoch, two LADIES layers, both schemes run. ours = "
        "`bytes_sparsity_aware + bytes_row_combine` of `--ladies-reduction rows`; paper = "
        "the same of `--ladies-reduction partial-products` (fetch twice: P's SpGEMM and R S's; "
        "the frontiers gathered whole, `sample_frontier`, and R S's row all-gather, "
        "`sample_combine`) plus `bytes_partial_products`, measured "
        "(`sample_partial_products`: the chained reduction of P's partial products, 16 bytes "
        "per entry). counted all-gather: the default run's estimate of P's all-reduce (an "
        "all-gather of every partial product, 8 bytes per row and 16 per entry). same "
        "weights: equal `params_sha256`. Control bytes left out of both.",
        "",
        "Commands:",
        "",
        "```",
        *commands,
        "```",
    ]
    table = markdown("LADIES, partitioned layout: both schemes measured", header, measured,
                     notes)
    save("ladies_reduction_measured", {"rows": measured, "commands": commands}, table)


if __name__ == "__main__":
    main()
