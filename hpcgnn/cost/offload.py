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
* sparse input features: the first layer loads rows of ``X W`` (``f_1`` wide) and pushes
  their gradients back like a hidden layer's (:func:`load_widths`); the CSR blocks of ``X``
  and the rows of the products through the host are checkpoint traffic
  (:func:`sparse_input_bytes`);
* ``allreduce``: the weight gradients, as in :func:`hpcgnn.cost.halo.predict_halo`.
"""

from __future__ import annotations

from collections.abc import Sequence

from hpcgnn.cost.estimate import Estimate, Problem, allreduce_exact
from hpcgnn.planning.dedup import DedupVolumes

LOADS = {"none": "v_ori", "inter": "v_p2p", "full": "v_ru"}


def load_widths(widths: Sequence[int], sparse_input: bool) -> list[int]:
    """Width of the rows each layer loads: its input's; ``f_1`` for the first on sparse ``X``.

    Offload multiplies sparse input features first (``T = X W``,
    :mod:`hpcgnn.models.offload_input`), so its first layer loads rows of ``T``.
    """
    w = list(widths)
    return [w[1], *w[1:-1]] if sparse_input else w[:-1]


def sparse_input_bytes(
    n: int, f: tuple[int, int], itemsize: int, per: int, nnz: int, chunks: int,
    first_cached: bool,
) -> int:
    """Checkpoint bytes of an epoch's first layer on sparse features (offload), all ranks.

    ``f = (f_0, f_1)``; ``nnz`` nonzeros of ``X``, ``chunks`` the chunks with rows, ``per``
    the weights that multiply ``X`` (:attr:`~hpcgnn.kinds.Layer.operands`).
    The CSR blocks go to the device twice: ``8 (n + chunks) + nnz (8 + s)``
    forward, transposed ``8 chunks (f_0 + 1) + nnz (8 + s)`` backward (int64 indices).
    Rows of ``f_1`` values through the host: ``T`` (GraphSAGE ``S`` too) written, and the
    gradients ``dT`` (GraphSAGE ``dZ`` too) read back for the weight gradients; GraphSAGE
    reads ``S`` in the forward, writes ``dZ`` in the backward, and reads ``S`` again when
    the first layer recomputes its aggregate.
    """
    f0, f1 = f
    blocks = 8 * (n + chunks) + 8 * chunks * (f0 + 1) + 2 * nnz * (8 + itemsize)
    rows = 2 * per + (per - 1) * (2 + (0 if first_cached else 1))
    return blocks + rows * n * f1 * itemsize


def predict_offload(
    problem: Problem, ranks: int, volumes: DedupVolumes, remote: tuple[int, int], dedup: str,
    cached: Sequence[bool] | None = None, sparse_input: tuple[int, int] | None = None,
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
    sparse_input
        Sparse input features: ``(nnz, chunks)`` of ``X`` over all ranks (the first layer
        loads ``f_1``-wide rows and pushes their gradients back,
        :func:`sparse_input_bytes`); ``None``: dense.
    """
    s, w = problem.itemsize, problem.widths
    w_in = load_widths(w, sparse_input is not None)
    cached = [True] * len(w_in) if cached is None else list(cached)
    recomputed = sum(f for f, c in zip(w_in, cached, strict=True) if not c)
    loads = getattr(volumes, LOADS[dedup])
    pushed = w_in if sparse_input is not None else w_in[1:]  # layer 0: X needs no gradient
    f_all, f_bwd = (sum(w_in) + recomputed) * s, sum(pushed) * s
    est = Estimate()
    msgs = 1 if ranks > 1 else 0
    est.add("offload_h2d", float(loads * f_all), 0.0, msgs)
    est.add("offload_d2h", float(loads * f_bwd), 0.0, msgs)
    est.add("offload_d2d", float(remote[0] * f_all + remote[1] * f_bwd), 0.0, msgs)
    per = problem.kind.operands  # a cached layer keeps the aggregate (and the own rows)
    ckpt_width = per * (sum(w_in) - recomputed) + sum(w[1:])
    ckpt = 2 * problem.n * ckpt_width * s
    if sparse_input is not None:
        ckpt += sparse_input_bytes(problem.n, (w[0], w[1]), s, per, *sparse_input, cached[0])
    est.add("offload_ckpt", float(ckpt), 0.0, 0)
    for fin, fout in problem.weight_shapes:
        allreduce_exact(est, "allreduce", fin * fout * s, ranks)
    return est


def predict_offload_gat(
    problem: Problem, ranks: int, volumes: DedupVolumes, remote: tuple[int, int], dedup: str,
    heads: Sequence[tuple[int, int]],
) -> Estimate:
    """Bytes of one GAT offload epoch per category (:mod:`hpcgnn.models.offload_gat`).

    Layer ``l`` (``K_l`` heads of ``f'_l``, input width ``f_l``, output ``o_l``: ``K_l
    f'_l`` hidden, ``f'_L`` the last) loads rows ``[z | s_src]`` of ``w_l = K_l f'_l +
    K_l`` values in the forward and again in the backward, and pushes their gradients
    back (every layer: ``z = H W`` depends on ``W``): ``offload_h2d`` ``loads * 2 sum w_l
    s``, ``offload_d2h`` ``loads * sum w_l s``, ``offload_d2d`` ``(2 R_f + R_b) sum w_l s``.
    Own rows through the host (``offload_ckpt``, ``n`` rows each): forward the input
    (``f_l``), ``[z | s_src]`` (``w_l``) and the output (``o_l``); backward the output's
    gradient (``o_l``), ``d s_dst`` out and in (``2 K_l``), the pushed gradients
    (``w_l``), the input (``f_l``) and, below the first layer, the input's gradient
    (``f_l``). ``allreduce``: every weight's gradient (``W``, ``a_src``, ``a_dst``).
    """
    s, w, n = problem.itemsize, problem.widths, problem.n
    loads = getattr(volumes, LOADS[dedup])
    wl = [k * f + k for k, f in heads]
    last = len(heads) - 1
    out = [f if i == last else k * f for i, (k, f) in enumerate(heads)]
    est = Estimate()
    msgs = 1 if ranks > 1 else 0
    est.add("offload_h2d", float(loads * 2 * sum(wl) * s), 0.0, msgs)
    est.add("offload_d2h", float(loads * sum(wl) * s), 0.0, msgs)
    est.add("offload_d2d", float((2 * remote[0] + remote[1]) * sum(wl) * s), 0.0, msgs)
    ckpt = sum(
        3 * w[i] + 2 * wl[i] + 2 * out[i] + 2 * k - (w[i] if i == 0 else 0)
        for i, (k, _) in enumerate(heads)
    )
    est.add("offload_ckpt", float(n * ckpt * s), 0.0, 0)
    for fin, fout in problem.weight_shapes:
        allreduce_exact(est, "allreduce", fin * fout * s, ranks)
    return est
