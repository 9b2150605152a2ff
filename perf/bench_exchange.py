"""Partitioned exchange strategies side by side: DGCL halo exchange and HongTu offload.

Runs ``hpcgnn train`` under ``mpiexec`` once per configuration, on the same partitioned graph
with the same ranks and threads, and compares

* ``--algo halo --exchange p2p`` against ``--algo halo --exchange planned`` (a DGCL SPST plan
  run in stages) on one topology: ``--topology`` if given, ``configs/topologies/dgx1.json`` at
  ``--procs 8``, otherwise the uniform one-node topology of ``hpcgnn train``; and on two
  generated ones: ``halo-planned-direct`` (one node, every pair linked, a stage latency of
  ``STAGE_US``: the plan is the direct one and runs as one all-to-allv) and
  ``halo-planned-rail`` (``rail:2xP/2`` without latency: ranks on different rails of
  different nodes have no link, so the plan forwards), which show what the planned executor
  costs when it forwards nothing and a forwarding plan's gain or cost;
* ``--mode offload --chunks C`` with ``--dedup none``, ``inter`` and ``full``, and ``full``
  with ``--reorganize``; and ``full`` with ``--exchange planned`` (its device-to-device
  fetches along SPST plans on the same topology as the halo runs) against ``full`` (p2p).

Per run it prints the median epoch seconds, the seconds per epoch of each communication
category (from the ``time.phases`` of the metrics; the remaining phases summed as compute),
the measured and predicted bytes per epoch, and from the metrics' ``exchange`` section the
planner's modelled (p2p and executed) and probe-measured exchange times, stages and transfers
of the halo runs, and the vertex counts ``V_ori``, ``V_p2p``, ``V_ru``, the MB per tier and
the modelled cost ``C`` of the offload runs (and the planner's numbers of the planned
offload run). Then the ratios planned/p2p (modelled exchange time, probe-measured exchange
time, epoch time) and, for offload, host<->device bytes (h2d + d2h) and epoch time of each
dedup level relative to ``none``, and planned/p2p offload d2d bytes and epoch time. A graph
without a partition into ``--procs`` parts is first partitioned with METIS into a temporary
file.
Writes ``perf/results/bench_exchange.{json,md}`` and prints the ratio table last.

    python perf/bench_exchange.py inputs/rmat-1m.h5 --procs 8 --epochs 5 --chunks 8
    python perf/bench_exchange.py --nodes 4096 --procs 8 --epochs 20   # generated RMAT
    python perf/bench_exchange.py --procs 4 --runs off-full,off-full-planned \
        --name bench_exchange_offload_planned
    python perf/bench_exchange.py --nodes 3000 --procs 4 --hidden 32 --epochs 20 --rounds 3 \
        --runs halo-p2p,halo-planned,halo-planned-direct,halo-planned-rail --name bench_exchange

With ``--rounds R`` every configuration runs ``R`` times, round-robin; the ratios of epoch
times are also given per round (each run's median epoch) and as the median of those.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tables import hpcgnn, markdown, mpiexec, prepare, save

from hpcgnn.io import GraphFile
from hpcgnn.planning.topology import topology_spec

REPO = Path(__file__).resolve().parents[1]
DGX1 = REPO / "configs" / "topologies" / "dgx1.json"
TIERS = ("h2d", "d2d", "d2h", "ckpt")
#: Stage latency of ``halo-planned-direct``'s topology, microseconds: of the order of an
#: empty stage measured here (``hpcgnn plan --calibrate``: 155-198 us), so relaying never pays
STAGE_US = 150.0
#: The planned halo runs: name -> (ratio label, what its topology is)
PLANNED = {
    "halo-planned": "planned/p2p epoch time",
    "halo-planned-direct": "planned (direct plan)/p2p epoch time",
    "halo-planned-rail": "planned (rail, forwarding)/p2p epoch time",
}


def generated_topologies(procs: int, tmp: Path) -> dict[str, str]:
    """The generated topologies of the ``direct`` and ``rail`` planned halo runs.

    Parameters
    ----------
    procs
        Ranks (the rail topology needs an even number; otherwise it is left out).
    tmp
        Directory the topology files are written to.

    Returns
    -------
    dict
        ``"direct"`` and ``"rail"`` -> topology JSON path.
    """
    specs = {"direct": f"rail:1x{procs},nvlink_us=2,stage_us={STAGE_US:g}"}
    if procs % 2 == 0 and procs >= 4:
        specs["rail"] = f"rail:2x{procs // 2}"
    out = {}
    for name, spec in specs.items():
        path = tmp / f"{name}-{procs}.json"
        path.write_text(json.dumps(topology_spec(spec), indent=1) + "\n")
        out[name] = str(path)
    return out


def runs(
    chunks: int, topology: str | None, generated: dict[str, str] | None = None
) -> dict[str, tuple[str, list[str]]]:
    """The configurations to run, by name.

    Parameters
    ----------
    chunks
        Chunks per part of the offload runs.
    topology
        Topology JSON of the halo and planned offload runs, or ``None`` for the default
        uniform topology.
    generated
        :func:`generated_topologies`: a planned halo run on each.

    Returns
    -------
    dict
        ``name -> (kind, extra train arguments)`` with kind ``"halo"`` or ``"offload"``.
    """
    topo = ["--topology", topology] if topology else []
    off = ["--mode", "offload", "--chunks", str(chunks)]
    planned = ["--algo", "halo", "--exchange", "planned"]
    return {
        "halo-p2p": ("halo", ["--algo", "halo", "--exchange", "p2p", *topo]),
        "halo-planned": ("halo", [*planned, *topo]),
        **{f"halo-planned-{name}": ("halo", [*planned, "--topology", path])
           for name, path in (generated or {}).items()},
        "off-none": ("offload", [*off, "--dedup", "none"]),
        "off-inter": ("offload", [*off, "--dedup", "inter"]),
        "off-full": ("offload", [*off, "--dedup", "full"]),
        "off-full-reorg": ("offload", [*off, "--dedup", "full", "--reorganize"]),
        "off-full-planned": ("offload", [*off, "--dedup", "full", "--exchange", "planned", *topo]),
    }


def calibrated(
    topology: str | None, procs: int, launcher: str, tmp: Path, env: dict[str, str]
) -> tuple[str, dict[str, Any]]:
    """``topology`` with this machine's latencies: ``hpcgnn plan --calibrate`` at ``procs``.

    The measured topology itself stands for the uniform one (every pair linked directly,
    with its measured alpha and bandwidth); a topology file keeps its links and bandwidths
    and takes the measured per-message alpha (median of the measured links) for every link
    kind, the measured stage latency and the measured endpoint (per-rank message overhead
    and rate).

    Parameters
    ----------
    topology
        Topology JSON, or ``None`` for the uniform one.
    procs
        Ranks to calibrate (the runs' rank count).
    launcher
        The ``mpiexec`` to run under.
    tmp
        Directory for the measured and the calibrated topology files.
    env
        Environment of the calibration run.

    Returns
    -------
    tuple
        The calibrated topology's path and ``{"alpha_us", "stage_alpha_us"}`` measured
        (and ``endpoint_alpha_us``, ``endpoint_bandwidth_gbps``).
    """
    measured = tmp / "measured.json"
    subprocess.run([launcher, "-n", str(procs),
                    *hpcgnn("plan", "--calibrate", "--out", str(measured))], check=True, env=env)
    doc = json.loads(measured.read_text())
    alpha = float(sorted(link["alpha_us"] for link in doc["links"])[len(doc["links"]) // 2])
    found = {"alpha_us": alpha, "stage_alpha_us": float(doc["stage_alpha_us"])}
    found |= {f"endpoint_{k}": v for k, v in doc.get("endpoint", {}).items()}
    if topology is None:
        return str(measured), found
    topo = json.loads(Path(topology).read_text())
    kinds = {link["kind"] for link in topo.get("links", [])} | set(topo.get("alpha_us", {}))
    topo["alpha_us"] = {k: alpha for k in sorted(kinds)}
    topo["stage_alpha_us"] = found["stage_alpha_us"]
    if "endpoint" in doc:  # the ranks as endpoints are the job's, whatever the links
        topo["endpoint"] = doc["endpoint"]
    for link in topo.get("links", []):
        link.pop("alpha_us", None)
    topo["description"] = (f"{topo.get('description', '')} Latencies replaced by this "
                           f"machine's (hpcgnn plan --calibrate at {procs} ranks).").strip()
    out = tmp / f"{Path(topology).stem}-calibrated.json"
    out.write_text(json.dumps(topo, indent=1) + "\n")
    return str(out), found


def partitioned(graph: str, parts: int, tmp: Path) -> str:
    """A graph file partitioned into ``parts`` parts: ``graph`` itself, or a METIS copy.

    Parameters
    ----------
    graph
        Input graph file.
    parts
        Number of parts wanted (the rank count).
    tmp
        Directory for the partitioned copy.

    Returns
    -------
    str
        Path of a graph file whose partition has ``parts`` parts.
    """
    with GraphFile(graph) as f:
        offsets = f.meta.partition_offsets
    if offsets is not None and len(offsets) - 1 == parts:
        return graph
    out = tmp / f"{Path(graph).stem}-metis{parts}.h5"
    have = "no partition" if offsets is None else f"a partition into {len(offsets) - 1} parts"
    print(f"{graph} has {have}; partitioning into {parts} parts (metis) -> {out}", flush=True)
    subprocess.run(hpcgnn("partition", graph, "--parts", str(parts), "--method", "metis",
                          "--out", str(out), "--quiet"), check=True)
    return str(out)


def summarize(kind: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one run, from its metrics JSON.

    Parameters
    ----------
    kind
        ``"halo"`` or ``"offload"``.
    doc
        The metrics document written by ``hpcgnn train --metrics``.

    Returns
    -------
    dict
        Epoch time, phases, bytes per epoch and the parts of the ``exchange`` section that
        the tables show (the whole section under ``"exchange"``).
    """
    comm = doc["comm"]
    ex = doc.get("exchange") or {}
    out: dict[str, Any] = {
        "kind": kind,
        "config": doc["config"],
        "epoch_median_s": doc["time"]["epoch_median_s"],
        "phases_s": doc["time"]["phases"],
        "comm_categories": sorted(set(comm["measured_bytes"]) | set(comm["predicted_bytes"])),
        "measured_bytes": sum(comm["measured_bytes"].values()),
        "predicted_bytes": sum(comm["predicted_bytes"].values()),
        "exchange": ex,
    }
    if kind == "halo":
        pl = ex.get("planner", {})
        out["halo"] = {
            "topology": ex.get("topology"),
            "p2p_modelled_s": pl.get("p2p_modelled_s", math.nan),
            "modelled_s": pl.get("modelled_s", math.nan),
            "measured_s": pl.get("measured_s", math.nan),
            "num_stages": pl.get("num_stages", 0),
            "alltoallv": pl.get("alltoallv"),
            "transfers": ex.get("transfers", 0),
            "stage_ratios": stage_ratios(pl.get("stages", [])),
        }
    else:
        tiers = ex.get("bytes_per_tier", {})
        out["offload"] = {
            "V_ori": ex.get("V_ori", 0),
            "V_p2p": ex.get("V_p2p", 0),
            "V_ru": ex.get("V_ru", 0),
            "bytes_per_tier": {t: float(tiers.get(t, 0.0)) for t in TIERS},
            "C_s": ex.get("C_s", math.nan),
            "exchange": ex.get("exchange", "p2p"),
        }
        pl = ex.get("planner")
        if pl is not None:
            out["offload"]["planner"] = {
                "topology": ex.get("topology"),
                "num_stages": pl["num_stages"],
                "transfers": ex["transfers"]["forward"],
                "p2p_modelled_s": pl["p2p_modelled_s"],
                "modelled_s": pl["modelled_s"],
                "measured_s": pl["measured_s"],
            }
    return out


def stage_ratios(stages: list[dict[str, Any]]) -> list[float]:
    """Modelled / probe-measured time of every stage, forward then backward.

    Parameters
    ----------
    stages
        The ``stages`` of a metrics ``exchange.planner`` section.

    Returns
    -------
    list of float
        One ratio per stage and direction that was measured.
    """
    return [ratio(st[f"modelled{d}_s"], st[f"measured{d}_s"])
            for d in ("", "_backward") for st in stages if st.get(f"measured{d}_s")]


def ratio(a: float, b: float) -> float:
    """``a / b``, NaN when ``b`` is zero or either is missing.

    Parameters
    ----------
    a, b
        Numerator and denominator.

    Returns
    -------
    float
        The quotient or NaN.
    """
    try:
        return a / b if b else math.nan
    except TypeError:
        return math.nan


def print_plans(title: str, plans: dict[str, dict[str, Any]]) -> None:
    """Print the planner's numbers of some runs (nothing when there are none).

    Parameters
    ----------
    title
        Heading of the name column.
    plans
        ``name -> {topology, num_stages, transfers, p2p_modelled_s, modelled_s,
        measured_s}``.
    """
    if not plans:
        return
    print(f"\n{title:<17} {'topology':>12} {'stages':>6} {'transfers':>9}"
          f" {'p2p model ms':>12} {'model ms':>9} {'measured ms':>11}")
    for name, h in plans.items():
        print(f"{name:<17} {str(h['topology'])[:12]:>12} {h['num_stages']:>6}"
              f" {h['transfers']:>9} {h['p2p_modelled_s'] * 1e3:>12.4f}"
              f" {h['modelled_s'] * 1e3:>9.4f} {h['measured_s'] * 1e3:>11.3f}")


def print_tables(results: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Print the per-run tables and the ratios.

    Parameters
    ----------
    results
        ``name -> summary`` of the runs (see :func:`summarize`); failed runs hold ``error``.

    Returns
    -------
    dict
        The ratios printed, by name.
    """
    ok = {k: r for k, r in results.items() if "error" not in r}
    cats = sorted({c for r in ok.values() for c in r["comm_categories"]})
    short = [c.removeprefix("offload_") for c in cats]
    print(f"\n{'run':<15} {'epoch s':>8} " + " ".join(f"{s[:10]:>10}" for s in short)
          + f" {'comm s':>8} {'compute s':>9} {'MB meas':>9} {'MB pred':>9}")
    for name, r in results.items():
        if "error" in r:
            print(f"{name:<15} failed: {r['error']}")
            continue
        ph = r["phases_s"]
        comm_s = sum(ph.get(c, 0.0) for c in cats)
        other = sum(v for k, v in ph.items() if k not in cats)
        print(f"{name:<15} {r['epoch_median_s']:>8.4f} "
              + " ".join(f"{ph.get(c, 0.0):>10.4f}" for c in cats)
              + f" {comm_s:>8.4f} {other:>9.4f}"
              + f" {r['measured_bytes'] / 1e6:>9.3f} {r['predicted_bytes'] / 1e6:>9.3f}")

    halo = {k: r["halo"] for k, r in ok.items() if r["kind"] == "halo"}
    print_plans("halo run", halo)
    off = {k: r["offload"] for k, r in ok.items() if r["kind"] == "offload"}
    if off:
        print(f"\n{'offload run':<15} {'V_ori':>8} {'V_p2p':>8} {'V_ru':>8} "
              + " ".join(f"{t + ' MB':>9}" for t in TIERS) + f" {'C ms':>8}")
        for name, o in off.items():
            mb = o["bytes_per_tier"]
            print(f"{name:<15} {o['V_ori']:>8} {o['V_p2p']:>8} {o['V_ru']:>8} "
                  + " ".join(f"{mb[t] / 1e6:>9.3f}" for t in TIERS)
                  + f" {o['C_s'] * 1e3:>8.4f}")

    planned = {k: o["planner"] for k, o in off.items() if "planner" in o}
    print_plans("planned offload", planned)

    def d2d(name: str) -> float:
        o = off.get(name)
        return math.nan if o is None else o["bytes_per_tier"]["d2d"]

    def hd(name: str) -> float:
        o = off.get(name)
        return math.nan if o is None else o["bytes_per_tier"]["h2d"] + o["bytes_per_tier"]["d2h"]

    def epoch(name: str) -> float:
        return ok[name]["epoch_median_s"] if name in ok else math.nan

    def hget(name: str, key: str) -> float:
        return halo[name][key] if name in halo else math.nan

    def per_round(name: str) -> list[float]:
        """``name``'s median epoch / p2p's, round by round."""
        if name not in ok or "halo-p2p" not in ok:
            return []
        return [ratio(a, b) for a, b in zip(ok[name].get("round_medians_s", []),
                                            ok["halo-p2p"].get("round_medians_s", []), strict=True)]

    for name in PLANNED:
        if name in halo:
            halo[name]["epoch_ratio_per_round"] = per_round(name)
    ratios = {
        "planned/p2p modelled exchange time": ratio(hget("halo-planned", "modelled_s"),
                                                    hget("halo-p2p", "modelled_s")),
        "planned/p2p probe-measured exchange time": ratio(hget("halo-planned", "measured_s"),
                                                          hget("halo-p2p", "measured_s")),
        **{label: ratio(epoch(name), epoch("halo-p2p")) for name, label in PLANNED.items()},
        **{f"{label}, median of rounds": statistics.median(per_round(name) or [math.nan])
           for name, label in PLANNED.items()},
        **{f"{label.split('/')[0]}/p2p modelled exchange time": ratio(
            hget(name, "modelled_s"), hget(name, "p2p_modelled_s"))
           for name, label in PLANNED.items() if name != "halo-planned"},
        "planned modelled/probe-measured exchange time": ratio(
            hget("halo-planned", "modelled_s"), hget("halo-planned", "measured_s")
        ),
        "planned modelled/measured stage time, lowest": min(
            halo.get("halo-planned", {}).get("stage_ratios") or [math.nan]),
        "planned modelled/measured stage time, highest": max(
            halo.get("halo-planned", {}).get("stage_ratios") or [math.nan]),
        "offload h2d+d2h bytes inter/none": ratio(hd("off-inter"), hd("off-none")),
        "offload h2d+d2h bytes full/none": ratio(hd("off-full"), hd("off-none")),
        "offload h2d+d2h bytes full+reorg/none": ratio(hd("off-full-reorg"), hd("off-none")),
        "offload epoch time inter/none": ratio(epoch("off-inter"), epoch("off-none")),
        "offload epoch time full/none": ratio(epoch("off-full"), epoch("off-none")),
        "offload epoch time full+reorg/none": ratio(epoch("off-full-reorg"), epoch("off-none")),
        "offload full planned/p2p d2d bytes": ratio(d2d("off-full-planned"), d2d("off-full")),
        "offload full planned/p2p modelled fetch time": ratio(
            planned.get("off-full-planned", {}).get("modelled_s", math.nan),
            planned.get("off-full-planned", {}).get("p2p_modelled_s", math.nan),
        ),
        "offload full planned/p2p epoch time": ratio(epoch("off-full-planned"), epoch("off-full")),
    }
    print()
    for k, v in ratios.items():
        print(f"{k:<42} {v:>7.3f}")
    for name in PLANNED:
        if name in halo:
            rounds = " ".join(f"{v:.3f}" for v in halo[name]["epoch_ratio_per_round"])
            print(f"{name} / halo-p2p epoch time per round: {rounds or '-'}")
    return ratios


def main() -> None:
    """Parse the arguments, run every configuration and print the comparison."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("graph", nargs="?", help="graph file (partitioned with METIS first if it "
                                            "has no partition into --procs parts; default: a "
                                            "generated RMAT graph of --nodes)")
    p.add_argument("--nodes", type=int, default=4096, help="generated graph: vertices")
    p.add_argument("--procs", type=int, default=4)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--rounds", type=int, default=1,
                   help="run every configuration this many times, round-robin; epoch times "
                        "are the median over all rounds' epochs (exchange numbers: round 1)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--chunks", type=int, default=8, help="offload chunks per part")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--topology", default=None,
                   help="topology JSON of the halo and planned offload runs (default: "
                        "configs/topologies/dgx1.json "
                        "at --procs 8, otherwise the uniform one-node topology; 'none' forces "
                        "the uniform one)")
    p.add_argument("--calibrate", action="store_true",
                   help="measure this machine's alpha first (hpcgnn plan --calibrate) and give "
                        "the topology those latencies (the uniform one: the measured topology)")
    p.add_argument("--mpiexec", default=mpiexec())
    p.add_argument("--name", default="bench_exchange", help="results name in perf/results")
    p.add_argument("--runs", default=None,
                   help="comma-separated configurations to run (default: all), e.g. "
                        "halo-p2p,halo-planned")
    args = p.parse_args()
    topology = args.topology
    if topology is None and args.procs == 8:
        topology = str(DGX1)
    if topology is not None and topology.lower() == "none":
        topology = None
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    results: dict[str, dict[str, Any]] = {}
    measured_alpha: dict[str, Any] | None = None
    topo_name = Path(topology).stem if topology else "uniform"
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        if args.calibrate:
            topology, measured_alpha = calibrated(topology, args.procs, args.mpiexec, tmp, env)
            topo_name += " calibrated"
            print(f"calibrated: {measured_alpha} -> {topology}", flush=True)
        source = args.graph or str(prepare(tmp / "rmat.h5", "rmat", args.nodes))
        graph = partitioned(source, args.procs, tmp)
        configs = runs(args.chunks, topology, generated_topologies(args.procs, tmp))
        wanted = list(configs) if args.runs is None else args.runs.split(",")
        unknown = sorted(set(wanted) - set(configs))
        if unknown:
            p.error(f"unknown --runs {unknown}; choose from {sorted(configs)}")
        epochs: dict[str, list[float]] = {}
        round_medians: dict[str, list[float]] = {}
        for rnd in range(args.rounds):  # round-robin: drift of the machine hits every run
            for name in wanted:
                if "error" in results.get(name, {}):
                    continue
                kind, extra = configs[name]
                metrics = tmp / f"{name}-{rnd}.json"
                cmd = [args.mpiexec, "-n", str(args.procs), *hpcgnn(
                    "train", graph, *extra, "--epochs", str(args.epochs), "--hidden",
                    str(args.hidden), "--layers", str(args.layers), "--quiet", "--eval-every",
                    "0", "--threads", str(args.threads), "--metrics", str(metrics))]
                print(f"[{name} round {rnd + 1}] {' '.join(cmd)}", flush=True)
                try:
                    subprocess.run(cmd, check=True, env=env)
                    doc = json.loads(metrics.read_text())
                    times = [e["time_s"] for e in doc["epochs"]]
                    epochs.setdefault(name, []).extend(times)
                    round_medians.setdefault(name, []).append(statistics.median(times))
                    if rnd == 0:
                        results[name] = summarize(kind, doc)
                    results[name]["epoch_median_s"] = statistics.median(epochs[name])
                    results[name]["round_medians_s"] = round_medians[name]
                    results[name]["epochs_timed"] = len(epochs[name])
                except (subprocess.CalledProcessError, OSError, KeyError, ValueError) as err:
                    print(f"[{name}] failed: {err}", file=sys.stderr, flush=True)
                    results[name] = {"kind": kind, "error": str(err)}
    label = args.graph or f"RMAT {args.nodes}"
    print(f"\n{label}: {args.procs} ranks, {args.threads} thread(s) each, "
          f"{args.epochs} epochs x {args.rounds} round(s), hidden {args.hidden}, "
          f"{args.layers} layers, "
          f"{args.chunks} offload chunks, halo topology {topo_name}")
    ratios = print_tables(results)
    doc = {"graph": label, "procs": args.procs, "threads": args.threads,
           "epochs": args.epochs, "rounds": args.rounds, "topology": topo_name,
           "calibration": measured_alpha,
           "runs": results,
           "ratios": {k: None if math.isnan(v) else v for k, v in ratios.items()}}
    table = markdown(
        f"Exchange: planned vs p2p, deduplicated vs not ({label}, {args.procs} ranks, "
        f"{args.threads} thread(s)/rank, topology {topo_name})",
        ["ratio", "value"], [[k, v] for k, v in ratios.items() if not math.isnan(v)],
        ["< 1: the first is faster or moves fewer bytes. Per-run phases in the JSON."],
    )
    save(args.name, doc, table)
    if any("error" in r for r in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
