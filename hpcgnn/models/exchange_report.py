"""The ``exchange`` section of the metrics: vertex counts, bytes per tier, modelled costs.

Two kinds of partitioned training report it:

* ``--mode offload`` (HongTu): ``V_ori``, ``V_p2p``, ``V_ru`` of the schedule, the bytes of
  each tier per epoch (measured and predicted), the modelled cost ``C`` of eq. 4, and the
  reorganisation's before/after volumes.
  With ``--exchange planned`` also the SPST plans of its device-to-device fetches and
  gradient pushes (one per batch table): per stage modelled and probe-measured times,
  forward and backward, and their sums next to the direct exchange's modelled time.
* ``--algo halo`` (DGCL): the same counts for one chunk per part (``V_ori = n + pairs``,
  ``V_p2p = V_ru = n``), the modelled time of the direct p2p and of the executed exchange on
  the topology, and per stage the planner's modelled time next to the measured time of a
  probe exchange of ``F``-wide rows (``F`` the widest aggregation), forward and backward.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from mpi4py import MPI

from hpcgnn.exchange.offload import CKPT, D2D, D2H, H2D
from hpcgnn.exchange.staged import StagedExchange
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.planning.dedup import DEFAULT_TIER_GBPS, DedupVolumes
from hpcgnn.planning.methods import method_vertices
from hpcgnn.planning.spst import counts_cost
from hpcgnn.planning.topology import Topology
from hpcgnn.spmm.halo import HaloAggregation

TIERS = {H2D: "h2d", D2D: "d2d", D2H: "d2h", CKPT: "ckpt"}
#: Probe runs per exchange; each starts from a barrier (no rank's lateness is counted as
#: exchange time) and the median counts.
PROBE_REPEATS = 5


def _tiers(bytes_by_category: dict[str, float]) -> dict[str, float]:
    return {t: float(bytes_by_category.get(c, 0.0)) for c, t in TIERS.items()}


def _cost(
    volumes: DedupVolumes, widths: list[int], itemsize: int, gbps: dict, dedup: str = "full",
    d2d_rows: int | None = None,
) -> float:
    """``C`` summed over the neighbour loads of an epoch, one of width ``f`` per entry.

    ``d2d_rows``: the rows each load moves between devices (default: the paper's
    ``V_ori - V_p2p``).
    """
    return sum(volumes.cost(f * itemsize, gbps, dedup, d2d_rows) for f in widths)


def _load_widths(model: Any) -> list[int]:
    """Widths of an offload epoch's loads: every exchange's input, again if it reloads."""
    return list(model.load_widths)


def _batch_rows(t: Any) -> int:
    """Device rows of a batch's loaded rows: ``|N_ij| + |T_ij|``, merged the size of their union."""
    if t.merged is None:
        return len(t.neigh) + len(t.trans)
    return len(np.union1d(t.neigh, t.trans))


def offload_report(
    model: Any, measured: dict[str, float], predicted: dict[str, float],
    gbps: dict[str, float] | None,
) -> dict[str, Any]:
    """``exchange`` section of an offload run (collective: device peak, plan probes)."""
    gbps = {**DEFAULT_TIER_GBPS, **(gbps or {})}
    itemsize = model.cfg.itemsize
    peak = max(
        (_batch_rows(t) + (b - a))
        for t, (a, b) in zip(model.exchange.tables, model.chunk_rows, strict=True)
    )
    peak = max(model.comm.allgather_obj(peak))
    reorg = model.reorganization
    opts = model.opts
    return {
        "strategy": "offload",
        "dedup": model.opts.dedup,
        "chunks": model.opts.chunks,
        **model.volumes.as_dict(),
        "remote_rows": {"forward": model.remote[0], "backward": model.remote[1]},
        "tier_gbps": gbps,
        "C_s": _cost(model.volumes, _load_widths(model), itemsize, gbps, model.opts.dedup),
        # the same equation with the rows this run moves between devices per load (the
        # remote rows, or every transfer of the planned exchange's forwarding)
        "C_moved_s": _cost(model.volumes, _load_widths(model), itemsize, gbps,
                           model.opts.dedup, model.transfers[0]),
        "aggregates": ["cached" if c else "recomputed" for c in model.cached],
        "cache_budget_bytes": model.opts.cache_budget,
        "bytes_per_tier": _tiers(measured),
        "predicted_bytes_per_tier": _tiers(predicted),
        "device_peak_rows": int(peak),
        "reorganization": None if reorg is None else reorg.as_dict(),
        "exchange": model.opts.exchange,
        "transfers": {"forward": model.transfers[0], "backward": model.transfers[1]},
        # HongTu's device paths (exchange.offload.DevicePaths): rounds per device-to-device
        # exchange of a batch (1: one all-to-allv), device buffers allocated for batches
        "device_paths": {"in_place": opts.in_place, "interleave": opts.interleave,
                         "zero_copy": opts.zero_copy, "merged": opts.merged},
        "rounds": model.comm.size - 1 if opts.interleave else 1,
        "device_buffers_allocated": max(model.comm.allgather_obj(
            model.exchange.allocated + model.reload.allocated)),
        "device_buffer_bytes": max(model.comm.allgather_obj(
            model.exchange.buffer_bytes + model.reload.buffer_bytes)),
        **({} if model.topology is None else _offload_plans(model)),
    }


def _offload_plans(model: Any) -> dict[str, Any]:
    """Topology and planner section of a planned offload run (collective probes).

    One entry per distinct table: ``fetch+push`` (``inter``: the forward fetches and the
    backward pushes share it), ``fetch`` and ``push`` (``full``: the pushes carry only the
    rows leaving the device). The totals are per layer of ``F``-wide rows: the fetches'
    forward stages, the pushes' backward (reverse) stages.
    """
    comm, topo = model.comm, model.topology
    width = model.exchange_width
    bpv = width * model.cfg.itemsize
    tables = []
    for j, t in enumerate(model.exchange.tables):
        rows = t.capacity or len(t.trans)  # the source buffer (in place: its write positions)
        if t.push is t.fetch:
            tables.append((j, "fetch+push", t.fetch, rows))
        else:
            tables += [(j, "fetch", t.fetch, rows), (j, "push", t.push, rows)]
    direct = np.zeros((len(tables), comm.size, comm.size), dtype=np.int64)
    deepest = max((tb.staged.num_stages for _, _, tb, _ in tables), default=0)
    probed = np.zeros((len(tables), 2, deepest))
    for i, (_, _, tb, rows) in enumerate(tables):
        direct[i, comm.rank] = tb.send_counts
        direct[i, comm.rank, comm.rank] = 0
        x = comm.device.zeros((rows, width), model.cfg.torch_dtype)
        fwd, bwd = _probe_staged(tb.staged, x)
        probed[i, :, : len(fwd)] = fwd, bwd
    comm.allreduce(direct, "control")
    comm.allreduce(probed, "control", MPI.MAX)  # the slowest rank sets each stage's time
    entries, total = [], np.zeros(4)  # p2p, modelled, measured: forward; then backward
    for i, (j, use, tb, _) in enumerate(tables):
        p2p = {(1, s, d): int(c) for (s, d), c in np.ndenumerate(direct[i]) if c}
        sec = _plan_section(topo, tb.staged.counts, p2p, bpv, *probed[i])
        entries.append({"batch": j, "use": use, **sec})
        if use != "push":
            total[:3] += sec["p2p_modelled_s"], sec["modelled_s"], sec["measured_s"]
        if use != "fetch":
            total[3] += sec["modelled_backward_s"]
    return {
        "topology": topo.name,
        "planner": {
            "feature_dim": width,
            "bytes_per_vertex": bpv,
            "num_stages": deepest,
            "p2p_modelled_s": float(total[0]),
            "modelled_s": float(total[1]),
            "measured_s": float(total[2]),
            "modelled_backward_s": float(total[3]),
            "tables": entries,
        },
    }


def _reversed(counts: dict, stages: int) -> dict:
    return {(stages + 1 - k, d, s): c for (k, s, d), c in counts.items()}


def _plan_section(
    topo: Topology, counts: dict, p2p_counts: dict, bpv: float, fwd: np.ndarray,
    bwd: np.ndarray,
) -> dict[str, Any]:
    """Per stage the vertices, modelled and measured seconds of a plan, both directions."""
    stages = max((k for k, _, _ in counts), default=0)
    modelled_f = counts_cost(topo, counts, bpv).stage_times if stages else np.zeros(0)
    modelled_b = (
        counts_cost(topo, _reversed(counts, stages), bpv).stage_times[::-1]
        if stages else np.zeros(0)
    )
    per_stage = [
        {
            "stage": k + 1,
            "vertices": int(sum(c for (st, _, _), c in counts.items() if st == k + 1)),
            "modelled_s": float(modelled_f[k]),
            "measured_s": float(fwd[k]) if k < len(fwd) else 0.0,
            "modelled_backward_s": float(modelled_b[k]),
            "measured_backward_s": float(bwd[k]) if k < len(bwd) else 0.0,
        }
        for k in range(stages)
    ]
    return {
        "num_stages": stages,
        "transfers": int(sum(counts.values())),
        "p2p_modelled_s": counts_cost(topo, p2p_counts, bpv).time_s if p2p_counts else 0.0,
        "modelled_s": float(modelled_f.sum()),
        "measured_s": float(np.sum(fwd[:stages])),
        "modelled_backward_s": float(modelled_b.sum()),
        "measured_backward_s": float(np.sum(bwd[:stages])),
        "stages": per_stage,
    }


def _probe_staged(ex: StagedExchange, x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Measured seconds per stage of forward and backward runs of ``ex`` on ``x`` (median).

    The stages run in sequence (:attr:`StagedExchange.sequential`: a barrier, then the
    stage's messages alone), as the modelled stage times assume; training overlaps them.
    """
    fwd, bwd = [], []
    ex.sequential = True
    try:
        for _ in range(PROBE_REPEATS):
            ex.comm.barrier("control")
            ex.reset_timers()
            halo = ex.gather(x)
            ex.scatter_add(halo, x.clone())
            fwd.append(ex.fwd_stage_seconds.copy())
            bwd.append(ex.bwd_stage_seconds.copy())
    finally:
        ex.sequential = False
    return np.median(fwd, axis=0), np.median(bwd, axis=0)


def _probe(agg: HaloAggregation, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Measured seconds per stage of one forward and one backward exchange (median)."""
    x = agg.comm.device.zeros((agg.owned, width), agg.dtype)
    ex = agg.fwd_exchange
    if isinstance(ex, StagedExchange):
        return _probe_staged(ex, x)
    clock = agg.comm.stats.clock
    times = []
    for _ in range(PROBE_REPEATS):
        agg.comm.barrier("control")
        t0 = clock()
        halo = ex.gather(x)
        t1 = clock()
        ex.scatter_add(halo, x.clone())
        times.append((t1 - t0, clock() - t1))
    med = np.median(np.array(times), axis=0)
    return med[:1], med[1:]


def halo_report(
    model: Any, grid: ProcessGrid, topo: Topology, measured: dict[str, float],
    gbps: dict[str, float] | None,
) -> dict[str, Any]:
    """``exchange`` section of a halo run (collective: counts and probe timings)."""
    gbps = {**DEFAULT_TIER_GBPS, **(gbps or {})}
    agg: HaloAggregation = model.aggregation
    comm = model.comm
    itemsize = model.cfg.itemsize
    sets = agg.fwd_sets
    direct = np.zeros((comm.size, comm.size), dtype=np.int64)
    direct[comm.rank] = sets.send_counts
    comm.allreduce(direct, "control")
    p2p_counts = {
        (1, s, d): int(direct[s, d]) for s in range(comm.size) for d in range(comm.size)
        if direct[s, d] and s != d
    }
    pairs = sum(p2p_counts.values())
    n = int(model.meta.num_nodes)
    volumes = DedupVolumes(n + pairs, n, n)
    width = model.exchange_width
    bpv = width * itemsize
    ex = agg.fwd_exchange
    counts = ex.counts if isinstance(ex, StagedExchange) else p2p_counts
    fwd, bwd = (np.ascontiguousarray(t, dtype=np.float64) for t in _probe(agg, width))
    comm.allreduce(fwd, "control", MPI.MAX)  # the slowest rank sets each stage's time
    comm.allreduce(bwd, "control", MPI.MAX)
    sec = _plan_section(topo, counts, p2p_counts, bpv, fwd, bwd)
    return {
        "strategy": agg.exchange,
        "topology": topo.name,
        **volumes.as_dict(),
        "pairs": pairs,
        "transfers": sec["transfers"],
        "tier_gbps": gbps,
        "C_s": _cost(volumes, model.widths[:-1], itemsize, gbps),
        "bytes_per_tier": {"d2d": float(measured.get("halo", 0.0))},
        "planner": {
            "direct": not isinstance(ex, StagedExchange) or ex.is_direct,
            # how it ran: one all-to-allv each way (p2p, or a plan that forwards nothing)
            "alltoallv": not isinstance(ex, StagedExchange) or ex.is_p2p,
            "feature_dim": width,
            "bytes_per_vertex": bpv,
            "num_stages": sec["num_stages"],
            "p2p_modelled_s": sec["p2p_modelled_s"],
            "modelled_s": sec["modelled_s"],
            "measured_s": float(np.sum(fwd)),
            "stages": sec["stages"],
            # per pair method (DGCL 6.2), the vertices one forward exchange carries
            "method_vertices": method_vertices(topo, counts),
        },
    }



def exchange_line(ex: dict) -> str:
    """One summary line of the ``exchange`` metrics."""
    counts = f"V_ori {ex['V_ori']} V_p2p {ex['V_p2p']} V_ru {ex['V_ru']}"
    if ex["strategy"] == "offload":
        tiers = " ".join(f"{t} {b / 1e6:.3f}" for t, b in ex["bytes_per_tier"].items())
        line = f"exchange | {counts} | MB per epoch: {tiers} | modelled C {ex['C_s'] * 1e3:.4f} ms"
        if "planner" not in ex:
            return line
        pl = ex["planner"]
        return (
            f"{line} | planned on {ex['topology']}: {ex['transfers']['forward']} transfers per"
            f" layer in up to {pl['num_stages']} stages, fetches modelled p2p"
            f" {pl['p2p_modelled_s'] * 1e3:.4f} ms, planned {pl['modelled_s'] * 1e3:.4f} ms,"
            f" measured {pl['measured_s'] * 1e3:.4f} ms at F={pl['feature_dim']}"
        )
    pl = ex["planner"]
    stages = " ".join(
        f"s{st['stage']} {st['modelled_s'] * 1e3:.3f}/{st['measured_s'] * 1e3:.3f}"
        for st in pl["stages"]
    )
    return (
        f"exchange | {ex['strategy']} on {ex['topology']}: {ex['transfers']} transfers in"
        f" {pl['num_stages']} stages | modelled p2p {pl['p2p_modelled_s'] * 1e3:.4f} ms,"
        f" this exchange {pl['modelled_s'] * 1e3:.4f} ms at F={pl['feature_dim']}"
        f" | stage ms modelled/measured: {stages or '-'}"
    )
