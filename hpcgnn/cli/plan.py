"""``hpcgnn plan``: DGCL communication planning (SPST) vs direct p2p, on the cost model."""

from __future__ import annotations

import argparse
import json
import time


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``plan`` sub-command."""
    p = sub.add_parser(
        "plan",
        help="plan the embedding exchange on a topology (DGCL SPST) and compare with p2p",
        description=(
            "Build the communication relation of the graph split into --parts row blocks "
            "(the file's partition when it has exactly that many parts, else an even "
            "block split), plan it with SPST on --topology and report the modelled time "
            "of the planned and the direct p2p exchange per stage and per link."
        ),
    )
    p.add_argument("graph")
    p.add_argument("--parts", type=int, required=True, help="number of parts = topology ranks")
    p.add_argument("--topology", required=True, help="topology JSON (see docs/planning.md)")
    p.add_argument("--feature-dim", type=int, default=128, help="embedding width (float32)")
    p.add_argument("--seed", type=int, default=0, help="seed of the vertex order")
    p.add_argument(
        "--chunks", type=int, default=64,
        help="chunks per (source, destinations) group; 0 = plan every vertex alone",
    )
    p.add_argument("--max-stages", type=int, default=None, help="deepest stage (default K-1)")
    p.add_argument("--out", default=None, help="write the plan summary to this JSON file")
    p.add_argument(
        "--tables", action="store_true",
        help="also write the send/recv id tables to <out>.tables.npz",
    )
    p.set_defaults(func=run)


def _summary(topo, cost, plan) -> dict:
    stages = []
    for k in range(len(cost.stage_times)):
        links = [
            {
                "src": topo.links[li].src,
                "dst": topo.links[li].dst,
                "kind": topo.links[li].kind,
                "vertices": int(cost.link_counts[k, li]),
                "time_s": float(cost.link_times[k, li]),
            }
            for li in range(len(topo.links))
            if cost.link_counts[k, li]
        ]
        shared = {
            topo.resource_names[r]: int(cost.resource_counts[k, r])
            for r in range(len(topo.links), len(topo.resource_names))
            if cost.resource_counts[k, r]
        }
        stages.append(
            {"stage": k + 1, "time_s": float(cost.stage_times[k]), "links": links,
             "shared_vertices": shared}
        )
    return {
        "time_s": cost.time_s,
        "num_stages": plan.num_stages,
        "vertex_transfers": int(cost.link_counts.sum()),
        "stages": stages,
        "tables": [
            {"stage": k, "src": s, "dst": d, "count": c}
            for (k, s, d), c in plan.counts().items()
        ],
    }


def _print(label: str, topo, cost) -> None:
    print(f"{label}: {cost.time_s * 1e3:.4f} ms modelled")
    for k, t in enumerate(cost.stage_times):
        busy = [
            f"{topo.links[li].src}->{topo.links[li].dst}:{int(cost.link_counts[k, li])}"
            f"({cost.link_times[k, li] * 1e3:.3f}ms)"
            for li in range(len(topo.links))
            if cost.link_counts[k, li]
        ]
        print(f"  stage {k + 1}: {t * 1e3:.4f} ms, {len(busy)} links: {' '.join(busy)}")


def run(args: argparse.Namespace) -> int:
    """Plan on rank 0 and print the comparison."""
    from hpcgnn.cli.common import run_on_root

    run_on_root(lambda: _run(args))
    return 0


def _run(args: argparse.Namespace) -> None:
    import numpy as np

    from hpcgnn.errors import ConfigError
    from hpcgnn.io.reader import GraphFile
    from hpcgnn.layout.blocks import even_offsets
    from hpcgnn.planning.relation import MAX_PARTS, relation_from_file
    from hpcgnn.planning.spst import plan_cost, plan_p2p, plan_spst
    from hpcgnn.planning.topology import load_topology

    if not 1 <= args.parts <= MAX_PARTS:
        raise ConfigError(f"--parts must be in 1..{MAX_PARTS}, got {args.parts}")
    if args.feature_dim < 1:
        raise ConfigError(f"--feature-dim must be >= 1, got {args.feature_dim}")
    if args.chunks < 0:
        raise ConfigError(f"--chunks must be >= 0, got {args.chunks}")
    topo = load_topology(args.topology)
    if topo.num_ranks != args.parts:
        raise ConfigError(
            f"--parts {args.parts} does not match topology '{topo.name}' with "
            f"{topo.num_ranks} ranks"
        )
    t0 = time.perf_counter()
    with GraphFile(args.graph) as gf:
        meta = gf.meta
        po = meta.partition_offsets
        if po is not None and len(po) - 1 == args.parts:
            offsets, split = np.asarray(po, dtype=np.int64), "file partition"
        else:
            offsets, split = even_offsets(meta.num_nodes, args.parts), "even blocks"
        rel = relation_from_file(gf, offsets)
    t_rel = time.perf_counter() - t0
    bpv = 4 * args.feature_dim
    p2p = plan_p2p(topo, rel)
    t0 = time.perf_counter()
    spst = plan_spst(
        topo, rel, seed=args.seed, chunks=args.chunks or None, max_stages=args.max_stages
    )
    t_plan = time.perf_counter() - t0
    c_p2p = plan_cost(topo, p2p, bpv)
    c_spst = plan_cost(topo, spst, bpv)
    red = 1.0 - c_spst.time_s / c_p2p.time_s if c_p2p.time_s > 0 else 0.0
    print(
        f"{meta.name or args.graph}: n={meta.num_nodes} parts={args.parts} ({split}) "
        f"topology={topo.name} feature_dim={args.feature_dim} | "
        f"{int((rel.dest_mask != 0).sum())} boundary vertices, "
        f"{int(rel.pair_counts().sum())} (vertex, destination) pairs"
    )
    _print("p2p", topo, c_p2p)
    _print("planned (SPST)", topo, c_spst)
    print(
        f"reduction {red * 100:.1f}% | relation {t_rel:.2f} s, planning {t_plan:.2f} s "
        f"({len(spst.routes)} trees)"
    )
    if args.out:
        doc = {
            "graph": str(args.graph),
            "topology": topo.name,
            "parts": args.parts,
            "split": split,
            "offsets": offsets.tolist(),
            "feature_dim": args.feature_dim,
            "bytes_per_vertex": bpv,
            "seed": args.seed,
            "chunks": args.chunks,
            "relation_pairs": rel.pair_counts().tolist(),
            "p2p": _summary(topo, c_p2p, p2p),
            "planned": _summary(topo, c_spst, spst),
            "reduction": red,
            "planning_time_s": t_plan,
        }
        if args.tables:
            path = f"{args.out}.tables.npz"
            np.savez_compressed(
                path, **{f"s{k}_{s}_{d}": ids for (k, s, d), ids in spst.tables().items()}
            )
            doc["tables_file"] = path
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
