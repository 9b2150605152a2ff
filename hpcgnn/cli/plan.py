"""``hpcgnn plan``: DGCL communication planning (SPST) vs direct p2p, on the cost model."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hpcgnn.comm.calibrate import Calibration
    from hpcgnn.planning.baselines import MethodCost
    from hpcgnn.planning.spst import Cost
    from hpcgnn.planning.topology import Topology


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``plan`` sub-command."""
    p = sub.add_parser(
        "plan",
        help="plan the embedding exchange on a topology (DGCL SPST) and compare with p2p",
        description=(
            "Build the communication relation of the graph split into --parts row blocks "
            "(the file's partition when it has exactly that many parts, else an even "
            "block split), plan it with SPST on --topology and report the modelled time "
            "of the planned and the direct p2p exchange per stage and per link. With "
            "--calibrate (under mpiexec -n P) measure this machine's latency and bandwidth "
            "between every pair of ranks instead and write them as a topology file; with "
            "--write-topology write a generated (rail) topology file."
        ),
    )
    p.add_argument("graph", nargs="?",
                   help="graph file to plan for (not with --calibrate or --write-topology)")
    p.add_argument("--parts", type=int, default=None, help="number of parts = topology ranks")
    p.add_argument("--topology", default=None, help="topology JSON (see docs/planning.md)")
    p.add_argument("--calibrate", action="store_true",
                   help="ping-pong every pair of the job's ranks and write the measured alpha "
                        "and beta as a topology file to --out (run under mpiexec -n P)")
    p.add_argument("--out-machine", metavar="M.json", default=None,
                   help="with --calibrate: also write the measured alpha and beta (medians "
                        "over the pairs within a host and across hosts, and a fit to "
                        "broadcast rounds timed with every rank busy, for this job "
                        "size P) as a machine file for hpcgnn model --machine M.json; an "
                        "existing machine file keeps its fits at other job sizes")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="with --calibrate: where the measured buffers live (cuda: each rank's "
                        "GPU, through the MPI path the job would use). Default: $HPCGNN_DEVICE, "
                        "else cuda when a GPU and CuPy are visible, else cpu")
    p.add_argument("--write-topology", metavar="SPEC", default=None,
                   help="write the topology of SPEC to --out instead of planning: "
                        "rail:NODESxGPUS[,key=value...] with keys nvlink_gbps, net_gbps, "
                        "nic_gbps, nvlink_us, net_us, stage_us, endpoint_us "
                        "(see docs/planning.md)")
    p.add_argument("--feature-dim", type=int, default=128,
                   help="embedding width (float32; default: 128)")
    p.add_argument("--seed", type=int, default=0, help="seed of the vertex order")
    p.add_argument(
        "--chunks", type=int, default=64,
        help="chunks per (source, destinations) group; 0 = plan every vertex alone"
             " (default: 64)",
    )
    p.add_argument("--max-stages", type=int, default=None, help="deepest stage (default K-1)")
    p.add_argument(
        "--baselines", action="store_true",
        help="also model DGCL's baselines Swap, Replication and DGCL-R beside p2p and SPST "
             "(bytes and time per layer, set-up bytes and time of replication; "
             "see docs/planning.md)",
    )
    p.add_argument("--host-gbps", type=float, default=None,
                   help="with --baselines: each rank's link to host memory for Swap, GB/s "
                        "per direction (default: 12)")
    p.add_argument("--out", default=None, help="write the plan summary to this JSON file")
    p.add_argument(
        "--tables", action="store_true",
        help="also write the send/recv id tables to <out>.tables.npz",
    )
    p.set_defaults(func=run)


#: Busy links listed per stage on the terminal (the slowest first beyond it; --out has all).
SHOWN_LINKS = 32


def _print(label: str, topo: Topology, cost: Cost) -> None:
    print(f"{label}: {cost.time_s * 1e3:.4f} ms modelled")
    for k, t in enumerate(cost.stage_times):
        busy = np.flatnonzero(cost.link_counts[k])
        more = ""
        if len(busy) > SHOWN_LINKS:
            slow = np.argsort(-cost.link_times[k, busy], kind="stable")[:SHOWN_LINKS]
            busy, more = np.sort(busy[slow]), f" ... {len(busy) - SHOWN_LINKS} more"
        shown = " ".join(
            f"{topo.links[li].src}->{topo.links[li].dst}:{int(cost.link_counts[k, li])}"
            f"({cost.link_times[k, li] * 1e3:.3f}ms)"
            for li in busy
        )
        n = int(np.count_nonzero(cost.link_counts[k]))
        print(f"  stage {k + 1}: {t * 1e3:.4f} ms, {n} links: {shown}{more}")


def _print_methods(methods: list[MethodCost]) -> None:
    """The methods' modelled bytes and times, one line each (per layer; set-up once)."""
    print("methods (one layer's exchange, modelled; set-up once, before training):")
    print(f"  {'method':<12} {'bytes':>12} {'ms':>10} {'stages':>6} "
          f"{'set-up bytes':>13} {'set-up ms':>10} {'replicated rows':>15}")
    for m in methods:
        print(f"  {m.method:<12} {m.exchange_bytes:>12.0f} {m.exchange_s * 1e3:>10.4f} "
              f"{m.stages:>6} {m.setup_bytes:>13.0f} {m.setup_s * 1e3:>10.4f} "
              f"{m.replicated_rows:>15}")


def run(args: argparse.Namespace) -> int:
    """Plan on rank 0 and print the comparison (or calibrate on every rank)."""
    from hpcgnn.cli.common import run_on_root
    from hpcgnn.errors import ConfigError

    if args.write_topology is not None:
        if args.graph or args.parts or args.topology or args.calibrate or not args.out:
            raise ConfigError("--write-topology takes --out T.json and no graph, --parts, "
                              "--topology or --calibrate")
        run_on_root(lambda: _write_topology(args.write_topology, args.out))
        return 0
    if args.out_machine is not None and not args.calibrate:
        raise ConfigError("--out-machine writes what --calibrate measures (add --calibrate)")
    if args.device is not None and not args.calibrate:
        raise ConfigError("--device: plan measures buffers only with --calibrate")
    if args.calibrate:
        if args.graph or args.parts or args.topology or not args.out:
            raise ConfigError("--calibrate takes --out T.json and no graph, --parts or --topology")
        _calibrate(args.out, args.out_machine, args.device)
        return 0
    if not args.graph or args.parts is None or not args.topology:
        raise ConfigError("plan needs a graph, --parts and --topology (or --calibrate --out)")
    run_on_root(lambda: _run(args))
    return 0


def _write_topology(spec: str, out: str) -> None:
    """Write the topology document of ``spec`` to ``out`` (validated first)."""
    from hpcgnn.planning.topology import parse_topology, topology_spec
    from hpcgnn.utils.files import atomic_write, check_output
    from hpcgnn.utils.json_text import dumps

    doc = topology_spec(spec)
    topo = parse_topology(doc, out)
    check_output(out, "--out")
    atomic_write(out, dumps(doc) + "\n", "--out")
    print(f"wrote {out}: {topo.name}, {topo.num_ranks} ranks on {len(topo.node_names)} "
          f"node(s), {len(topo.links) // 2} links")


def _calibrate(out: str, out_machine: str | None = None, device: str | None = None) -> None:
    """Measure every pair of the job's ranks; rank 0 writes the topology (collective).

    ``out_machine``: also a machine file of the pairs' medians
    (:func:`hpcgnn.cost.machine.measured_machine`). ``device``: ``--device``, where the
    measured buffers live (a GPU's memory with ``cuda``, through the job's wire).
    """
    from pathlib import Path

    from mpi4py import MPI

    from hpcgnn.comm import Comm, collective
    from hpcgnn.comm.calibrate import calibrate
    from hpcgnn.cost.machine import fit_link, measured_machine
    from hpcgnn.grid.device import choose_device
    from hpcgnn.planning.contention import PairTiming, shared_buses
    from hpcgnn.planning.topology import measured_topology, parse_topology
    from hpcgnn.utils.files import atomic_write, check_output
    from hpcgnn.utils.json_text import dumps

    world = Comm.world(device=choose_device(MPI.COMM_WORLD, device))
    try:
        with collective(world):
            check_output(out, "--out")
            if out_machine is not None:
                check_output(out_machine, "--out-machine")
        cal = calibrate(world)
        timings = [PairTiming(*t) for t in cal.contention]
        with collective(world):
            if world.rank == 0:
                doc = measured_topology(
                    f"measured-{world.size}", cal.hosts, cal.pairs, cal.stage_alpha_s,
                    f"ping-pong of {cal.small_bytes} and {cal.large_bytes} bytes, "
                    "all-to-all of every rank for the endpoint, buffers on"
                    f" {world.device.kind}", cal.endpoint, cal.cores, cal.nics,
                    shared_buses(timings, cal.large_bytes, _oversubscribed(cal)), timings,
                )
                parse_topology(doc, out, world.size)  # what is written reads back
                atomic_write(out, dumps(doc, indent=1) + "\n", "--out")
                alphas = ", ".join(f"{k} {v} us" for k, v in doc["alpha_us"].items())
                end = doc.get("endpoint")
                end = (f", endpoint {end['alpha_us']} us per message at "
                       f"{end['bandwidth_gbps']} GB/s" if end else "")
                inside = "".join(
                    f", {sh['name']} shared by {_bus_pairs(doc, sh['name'])} pairs at "
                    f"{sh['bandwidth_gbps']} GB/s" for sh in doc.get("shared", [])
                    if sh.get("within")
                )
                print(f"calibrated {world.size} ranks on {len(doc['nodes'])} node(s): "
                      f"alpha {alphas or 'n/a'}, stage {doc['stage_alpha_us']} us{end}"
                      f"{inside} -> {out}")
                if out_machine is not None:
                    fits = {q: fit_link(s) for q, s in cal.collectives.items()}
                    fit = fits.pop(world.size, None)
                    machine = measured_machine(
                        Path(out_machine).stem, cal.hosts, cal.pairs,
                        f"ping-pong of {cal.small_bytes} and {cal.large_bytes} bytes; "
                        f"collectives with every rank busy; buffers on {world.device.kind}",
                        fit, _previous(out_machine), fits,
                    )
                    atomic_write(out_machine, dumps(machine, indent=1) + "\n", "--out-machine")
                    sizes = ", ".join(machine.get("collectives", {})) or "none"
                    this = "" if fit is None else (
                        f"; at P = {world.size} alpha {fit.alpha * 1e6:.3g} us,"
                        f" {1e-9 / fit.beta:.3g} GB/s per byte received" + "".join(
                            f", groups of {q} {1e-9 / g.beta:.3g} GB/s"
                            for q, g in sorted(fits.items())))
                    print(f"machine file -> {out_machine} (collectives fitted at P = {sizes}"
                          f"{this})")
    finally:
        world.free()


def _oversubscribed(cal: Calibration) -> set[str]:
    """Hosts whose ranks outnumber their cores (no bus is inferred there).

    Pairs there slow each other down by sharing cores, which the endpoint's core pools
    charge already.
    """
    return {h for h in set(cal.hosts) if cal.cores and cal.cores.get(h, 0) < cal.hosts.count(h)}


def _bus_pairs(doc: dict, name: str) -> int:
    """How many pairs' links of a topology document pass through shared resource ``name``."""
    return sum(name in ln.get("via", []) for ln in doc["links"])


def _previous(path: str) -> dict | None:
    """The machine file ``path`` if it is one (its fits at other job sizes are kept)."""
    from hpcgnn.cost.machine import parse_machine
    from hpcgnn.errors import ConfigError
    from hpcgnn.utils.json_text import read_json

    try:
        doc = read_json(path)
        parse_machine(doc, path)
    except (ConfigError, OSError, ValueError):
        return None
    return doc


def _run(args: argparse.Namespace) -> None:
    from hpcgnn.errors import ConfigError
    from hpcgnn.planning.compare import compare_plans

    if args.max_stages is not None and args.max_stages < 1:
        raise ConfigError(f"--max-stages must be >= 1, got {args.max_stages}")
    if args.host_gbps is not None and not args.baselines:
        raise ConfigError("--host-gbps sets Swap's host link (add --baselines)")
    if args.host_gbps is not None and not (0 < args.host_gbps < float("inf")):
        raise ConfigError(f"--host-gbps must be a positive finite number, got {args.host_gbps}")
    cmp = compare_plans(
        args.graph, args.topology, args.parts, feature_dim=args.feature_dim, seed=args.seed,
        chunks=args.chunks, max_stages=args.max_stages,
    )
    topo = cmp.topology
    print(
        f"{cmp.name}: n={cmp.num_nodes} parts={args.parts} ({cmp.split}) "
        f"topology={topo.name} feature_dim={args.feature_dim} | "
        f"{cmp.boundary_vertices} boundary vertices, "
        f"{cmp.pairs} (vertex, destination) pairs"
    )
    _print("p2p", topo, cmp.p2p_cost)
    _print("planned (SPST)", topo, cmp.spst_cost)
    print(
        f"reduction {cmp.reduction * 100:.1f}% | relation {cmp.relation_time_s:.2f} s, "
        f"planning {cmp.planning_time_s:.2f} s ({len(cmp.spst.routes)} trees)"
    )
    methods = []
    if args.baselines:
        from hpcgnn.planning.baselines import DEFAULT_HOST_GBPS

        methods = cmp.baselines(args.host_gbps or DEFAULT_HOST_GBPS)
        _print_methods(methods)
    if args.out:
        doc = cmp.as_dict()
        if methods:
            doc["baselines"] = [m.as_dict() for m in methods]
        if args.tables:
            path = f"{args.out}.tables.npz"
            cmp.write_tables(path)
            doc["tables_file"] = path
        from hpcgnn.utils.files import atomic_write
        from hpcgnn.utils.json_text import dumps

        atomic_write(args.out, dumps(doc, indent=1) + "\n", "--out")
