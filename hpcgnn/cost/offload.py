"""Communication cost model of HongTu offload training (``--mode offload``), exact.

Per epoch (forward with dropout, backward, gradient all-reduce), with layer input widths
``f_0 .. f_{L-1}``, output widths ``f_1 .. f_L``, ``s`` bytes per value and ``n`` vertices:

* ``offload_h2d``: ``loads * sum_l f_l s`` where ``loads`` is ``V_ori``, ``V_p2p`` or
  ``V_ru`` for ``--dedup none``, ``inter``, ``full`` (:mod:`hpcgnn.planning.dedup`);
* ``offload_d2h``: the gradients of layers ``1 .. L-1`` go back the same way,
  ``loads * sum_{l >= 1} f_l s`` (layer 0's input needs no gradient);
* ``offload_d2d``: ``R_f sum_l f_l s + R_b sum_{l >= 1} f_l s`` with the remote row counts
  of :func:`hpcgnn.planning.dedup.remote_rows`, or, for ``--exchange planned``, the
  transfers of the SPST plans (a row forwarded through ``k`` ranks counts at every hop, as
  in :func:`hpcgnn.cost.halo.planned_volumes`);
* ``offload_ckpt``: every chunk's own rows, ``2 n sum_l (f_l + f_{l+1}) s`` (aggregate and
  output out in the forward, back in the backward);
* a layer that recomputes its aggregate (:func:`hpcgnn.planning.dedup.cached_layers`)
  caches no aggregate (``2 n f_l s`` less checkpoint traffic) and reloads its neighbour
  rows in the backward: ``loads f_l s`` more ``offload_h2d``, ``R_f f_l s`` more
  ``offload_d2d``;
* GraphSAGE (two weights per layer): the chunk's own rows join its neighbour rows (they
  are in the loads), a cached layer keeps the own rows beside the aggregate (``2 n f_l s``
  more checkpoint traffic per layer), and both weights' gradients are all-reduced;
* ``allreduce``: the weight gradients, as in :func:`hpcgnn.cost.halo.predict_halo`.
"""

from __future__ import annotations

from collections.abc import Sequence

from hpcgnn.cost.estimate import Estimate, Problem, allreduce_exact
from hpcgnn.layout.order import weight_shapes
from hpcgnn.planning.dedup import DedupVolumes

LOADS = {"none": "v_ori", "inter": "v_p2p", "full": "v_ru"}


def predict_offload(
    problem: Problem, ranks: int, volumes: DedupVolumes, remote: tuple[int, int], dedup: str,
    cached: Sequence[bool] | None = None,
) -> Estimate:
    """Bytes of one offload training epoch per category, summed over ranks.

    Parameters
    ----------
    problem
        Graph size, layer widths and value size.
    ranks
        Number of ranks (parts).
    volumes
        ``V_ori``, ``V_p2p``, ``V_ru`` of the schedule.
    remote
        Rows sent between ranks' device buffers per layer, forward and backward (the
        remote rows, or every transfer of the planned exchange, forwarding included).
    dedup
        ``none``, ``inter`` or ``full``.
    cached
        Per layer, whether it caches its aggregate (default: all do).
    """
    s, w = problem.itemsize, problem.widths
    cached = [True] * (len(w) - 1) if cached is None else list(cached)
    recomputed = sum(f for f, c in zip(w[:-1], cached, strict=True) if not c)
    loads = getattr(volumes, LOADS[dedup])
    f_all, f_bwd = (sum(w[:-1]) + recomputed) * s, sum(w[1:-1]) * s
    est = Estimate()
    msgs = 1 if ranks > 1 else 0
    est.add("offload_h2d", float(loads * f_all), 0.0, msgs)
    est.add("offload_d2h", float(loads * f_bwd), 0.0, msgs)
    est.add("offload_d2d", float(remote[0] * f_all + remote[1] * f_bwd), 0.0, msgs)
    per = problem.weights_per_layer  # a cached layer keeps one operand per weight
    ckpt_width = per * (sum(w[:-1]) - recomputed) + sum(w[1:])
    est.add("offload_ckpt", float(2 * problem.n * ckpt_width * s), 0.0, 0)
    for fin, fout in weight_shapes(w, per):
        allreduce_exact(est, "allreduce", fin * fout * s, ranks)
    return est
