"""Communication cost model of HongTu offload training (``--mode offload``), exact.

Per epoch (forward with dropout, backward, gradient all-reduce), summed over ranks, with
``n`` vertices, ``s`` bytes per value and each layer as offload runs it
(:func:`hpcgnn.layout.chunks.chunk_plan`: its exchanges, the values they load and what its
forward reads on the host), from the layer's trace alone:

* ``offload_h2d``: every load of an exchange's input rows, ``loads * f s`` where ``loads``
  is ``V_ori``, ``V_p2p`` or ``V_ru`` for ``--dedup none``, ``inter``, ``full``
  (:mod:`hpcgnn.planning.dedup`): once per exchange in the forward, and again in the
  backward where the exchange's output is not kept (an attention, or an aggregate beyond
  the cache budget, :func:`hpcgnn.planning.dedup.cached_layers`);
* ``offload_d2h``: the gradients of the loaded rows go back the same way (not those of
  the input features);
* ``offload_d2d``: ``R_f f s`` per load and ``R_b f s`` per push with the remote row counts
  of :func:`hpcgnn.planning.dedup.remote_rows`, or, for ``--exchange planned``, the
  transfers of the SPST plans (a row forwarded through ``k`` ranks counts at every hop);
* ``offload_ckpt``: the chunks' own rows between the host and the device, ``n`` rows each
  time the forward of a sweep or a backward stage reads or writes a value
  (:func:`own_rows`); sparse input features add their CSR blocks
  (:func:`sparse_input_bytes`);
* ``allreduce``: the weight gradients, as in :func:`hpcgnn.cost.halo.predict_halo`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from hpcgnn.cost.estimate import Estimate, Problem, allreduce_exact
from hpcgnn.layout.chunks import (
    ChunkLayer,
    chunk_plan,
    leaf_width,
    leaves,
    stage_leaves,
    stage_outputs,
    stages,
    stored,
    sweep_outputs,
    sweeps,
)
from hpcgnn.planning.dedup import DedupVolumes

LOADS = {"none": "v_ori", "inter": "v_p2p", "full": "v_ru"}


def load_widths(plans: Sequence[ChunkLayer], cached: Sequence[bool]) -> list[int]:
    """Width of each load of an epoch's fetch tables: every exchange, and its reloads."""
    out = []
    for plan, c in zip(plans, cached, strict=True):
        keep = stored(plan, c)
        out += [e.width for e in plan.exchanges]
        out += [e.width for e, k in zip(plan.exchanges, keep, strict=True) if not k]
    return out


def push_widths(plans: Sequence[ChunkLayer]) -> list[int]:
    """Width of each gradient push of an epoch (none for the input features' rows)."""
    return [e.width for layer, plan in enumerate(plans) for i, e in enumerate(plan.exchanges)
            if not (i == 0 and plan.raw == "h" and layer == 0)]


def recomputed(plan: ChunkLayer, stage: int | None, cached: bool) -> int | None:
    """The exchange backward stage ``stage`` recomputes from reloaded rows, if any."""
    if stage is None or not plan.exchanges:
        return None
    kept = stored(plan, cached)[stage]
    return None if kept and plan.exchanges[stage].primitive == "aggregate" else stage


def own_rows(plan: ChunkLayer, layer: int, cached: bool, sparse: bool) -> int:
    """Columns of own rows one layer moves between host and device in an epoch.

    Forward sweep ``s`` reads the leaves its outputs depend on (:func:`leaves`) and writes
    ``X_s`` (or the output), the exchange output ``A_{s-1}`` where it is kept, and the
    values kept for later layers (once). Backward stage ``k`` reads the leaves and the
    gradients of its outputs and writes the gradients of its leaves.
    """
    keep = stored(plan, cached)
    width = partial(leaf_width, plan)
    cols = 0
    for s in sweeps(plan):
        outputs = sweep_outputs(plan, s)
        cols += sum(map(width, leaves(plan, outputs, s - 1 if s else None, sparse)))
        cols += sum(map(width, outputs))
        cols += plan.exchanges[s - 1].out if s and keep[s - 1] else 0
    for k in stages(plan):
        outputs = stage_outputs(plan, k)
        cols += sum(map(width, leaves(plan, outputs, recomputed(plan, k, cached), sparse)))
        cols += sum(map(width, outputs)) + sum(map(width, stage_leaves(plan, k, layer)))
    return cols


def sparse_input_bytes(
    n: int, f0: int, itemsize: int, nnz: int, chunks: int, products: Sequence[int],
) -> int:
    """Checkpoint bytes of an epoch's sparse input features (offload), all ranks.

    ``nnz`` nonzeros of ``X``, ``chunks`` the chunks with rows, ``products`` the widths of
    the first layer's products ``X W``. The CSR blocks go to the device twice: ``8 (n +
    chunks) + nnz (8 + s)`` forward, transposed ``8 chunks (f_0 + 1) + nnz (8 + s)``
    backward (int64 indices); each product's rows are written to the host before the
    first layer and its gradient's rows read back for the weight gradient.
    """
    blocks = 8 * (n + chunks) + 8 * chunks * (f0 + 1) + 2 * nnz * (8 + itemsize)
    return blocks + 2 * n * sum(products) * itemsize


def predict_offload(
    problem: Problem, ranks: int, volumes: DedupVolumes, remote: tuple[int, int], dedup: str,
    cached: Sequence[bool] | None = None, sparse_input: tuple[int, int] | None = None,
) -> Estimate:
    """Bytes of one offload training epoch per category, summed over ranks.

    Parameters
    ----------
    problem
        Graph size, layer widths, value size and the layer.
    ranks
        Number of ranks (parts).
    volumes
        ``V_ori``, ``V_p2p``, ``V_ru`` of the schedule.
    remote
        Rows sent between ranks' device buffers per load, forward and backward (the
        remote rows, or every transfer of the planned exchange, forwarding included).
    dedup
        ``none``, ``inter`` or ``full``.
    cached
        Per layer, whether it keeps its aggregate for the backward (default: all do).
    sparse_input
        Sparse input features: ``(nnz, chunks)`` of ``X`` over all ranks; ``None``: dense.
    """
    s, w, n = problem.itemsize, problem.widths, problem.n
    plans = chunk_plan(w, problem.kind, sparse_input is not None)
    cached = [True] * len(plans) if cached is None else list(cached)
    loads = getattr(volumes, LOADS[dedup])
    fetched, pushed = sum(load_widths(plans, cached)) * s, sum(push_widths(plans)) * s
    est = Estimate()
    msgs = 1 if ranks > 1 else 0
    est.add("offload_h2d", float(loads * fetched), 0.0, msgs)
    est.add("offload_d2h", float(loads * pushed), 0.0, msgs)
    est.add("offload_d2d", float(remote[0] * fetched + remote[1] * pushed), 0.0, msgs)
    ckpt = n * s * sum(own_rows(p, layer, c, sparse_input is not None and layer == 0)
                       for layer, (p, c) in enumerate(zip(plans, cached, strict=True)))
    if sparse_input is not None:
        products = list(plans[0].products.values())
        ckpt += sparse_input_bytes(n, w[0], s, *sparse_input, products)
    est.add("offload_ckpt", float(ckpt), 0.0, 0)
    for size in problem.param_sizes:
        allreduce_exact(est, "allreduce", size * s, ranks)
    return est
