"""``--product-order paper``: CAGNET's ``(Â^T H) W`` and the first layer's backward SpMM.

The order changes only the order of the sums: every full-batch layout at 1-4 ranks gives
the ``auto`` run's losses within 1e-10 (float64) with every byte predicted by a cost model
that follows the order. With equal widths (features = hidden = classes) at P = 4 and 8 the
SpMMs are the paper's ``2L`` passes of ``n f`` words and their bytes its closed forms: 1D
``(P-1)/P n f`` per pass (the paper's own term before it drops ``(P-1)/P``), 1.5D at
``c = 2`` ``n f / c`` broadcast and ``n f c / P`` reduced per pass; 2D on 2x2 and 3D on
2x2x2 the closed forms' SpMM terms ``n f / sqrt(P)`` and ``2 n f / P^{2/3}`` per pass,
``(q-1)/q`` of them (a root receives nothing), and the dense steps of CAGNET's backward.
The backward is CAGNET's in every layout, ``Â G^l`` on the layer's output width reused
for both gradients (:func:`hpcgnn.nn.gcn.aggregate_transform`; on a SUMMA grid ``Â G^l``
all-gathered along the process row), so at unequal widths (24 -> 8 -> 4) 1D and 1.5D
still move the closed forms' per-pass terms, ``n f^{l-1}`` forward and ``n f^l``
backward. Offload, minibatch and GIST refuse ``paper`` in one line.
"""

from __future__ import annotations

import json

import pytest

from hpcgnn.cli.main import main
from hpcgnn.config import TrainConfig
from hpcgnn.cost.paper import paper_words
from hpcgnn.errors import ConfigError
from hpcgnn.layout.trace import aggregation_widths, row_exchange_widths
from tests.mpi import assert_all
from tests.runs import LAYOUTS, assert_equal_run, layout_flags, layout_id

COMMON = ["--layers", "2", "--epochs", "3", "--dropout", "0", "--dtype", "float64",
          "--quiet", "--eval-every", "0", "--threads", "1"]
#: Bytes per value (float64).
WORD = 8


def _run(world, graph, metrics, flags: list[str]) -> dict:
    assert_all(world, main(["train", str(graph), *COMMON, *flags, "--metrics",
                            str(metrics)]) == 0)
    return json.loads(metrics.read_text())


def _pair(world, graph, shared_tmp, flags: list[str], name: str) -> tuple[dict, dict]:
    """The ``auto`` and the ``paper`` run of ``flags`` on ``graph``."""
    auto = _run(world, graph, shared_tmp / f"auto-{name}.json", flags)
    paper = _run(world, graph, shared_tmp / f"paper-{name}.json",
                 [*flags, "--product-order", "paper"])
    assert "product_order" not in auto["config"] or auto["config"]["product_order"] == "auto"
    assert paper["config"]["product_order"] == "paper"
    assert_equal_run(paper, [e["loss"] for e in auto["epochs"]])
    return auto, paper


@pytest.mark.mpi
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("algo", LAYOUTS, ids=layout_id)
def test_paper_order_equals_auto_with_every_byte_predicted(
    graph_file, shared_tmp, world, algo, sparse
):
    """Hidden 2 < 6 features / 2: ``auto`` runs ``Â^T (X W)``, ``paper`` ``(Â^T X) W``."""
    algo = layout_flags(algo, world.size)
    if sparse and algo[1] not in ("1d", "2d"):
        pytest.skip("sparse input features: one row layout and one SUMMA layout")
    graph = graph_file(f"g-{sparse}.h5", n=90, features=6, seed=4,
                       feature_density=0.3 if sparse else 1.0)
    name = f"{'-'.join(algo[1::2])}-{sparse}"
    features = ["--sparse-features", "on" if sparse else "off"]
    auto, paper = _pair(world, graph, shared_tmp, [*algo, *features, "--hidden", "2"], name)
    if world.size > 1 and algo[1] in ("1d", "1.5d", "halo"):  # the rows' exchanges
        rows = ("dense_bcast", "halo", "allreduce")  # 1.5D 1x2: the row all-reduce alone
        moved = [sum(d["comm"]["measured_bytes"].get(c, 0) for c in rows) for d in (auto, paper)]
        assert moved[1] > moved[0]  # 6-wide rows where auto moved 2-wide ones


@pytest.mark.mpi
@pytest.mark.ranks(4)
@pytest.mark.parametrize("model", [["--model", "sage"], ["--model", "gin"], ["--bias"]],
                         ids=["sage", "gin", "gcn-bias"])
def test_every_kind_runs_cagnets_backward_on_a_grid(graph_file, shared_tmp, world, model):
    """2D 2x2: a self term's dense step after CAGNET's, GIN's MLP, a bias: ``auto``'s losses."""
    graph = graph_file("kinds.h5", n=40, features=5, classes=3, seed=7)
    _pair(world, graph, shared_tmp, ["--algo", "2d", *model, "--hidden", "3"],
          f"kinds-{'-'.join(model)}")


@pytest.mark.mpi
@pytest.mark.ranks(4, 8)
@pytest.mark.parametrize("algo", [["--algo", "1d"], ["--algo", "1.5d", "--replication", "2"],
                                  ["--algo", "2d"], ["--algo", "3d"]], ids=layout_id)
def test_equal_widths_move_the_papers_spmm_volumes(graph_file, shared_tmp, world, algo):
    """Features = hidden = classes = 4 on 96 vertices (even blocks at P = 4 and 8)."""
    p, n, f, layers = world.size, 96, 4, 2
    if algo[1] == "3d" and p == 4:
        algo = [*algo, "--grid", "2x1x2"]  # the cube 2x2x2 at P = 8
    graph = graph_file("equal.h5", n=n, features=f, classes=f, seed=5)
    auto, paper = _pair(world, graph, shared_tmp, [*algo, "--hidden", str(f)],
                        "-".join(algo[1::2]))
    measured = paper["comm"]["measured_bytes"]
    busiest = paper["comm"]["busiest_rank_bytes"]
    widths = [f] * (layers + 1)
    # the paper's 2L SpMM passes; auto skips the first layer's backward: 2L - 1
    for cat in ("dense_bcast", "sparse_bcast"):
        got_auto = auto["comm"]["measured_bytes"].get(cat, 0)
        assert measured.get(cat, 0) * (2 * layers - 1) == got_auto * 2 * layers, cat
    _assert_closed_forms(algo[1], p, n, widths, busiest)


def _assert_closed_forms(algo: str, p: int, n: int, widths: list[int], busiest: dict) -> None:
    """The busiest rank's bytes are the paper's per-pass terms.

    Per layer ``n f^{l-1}`` forward and ``n f^l`` backward; 1D ``(P-1)/P`` of them (a root
    receives nothing), 1.5D ``1/c`` broadcast and ``c/P`` reduced, the weights' ``f^{l-1}
    f^l`` a ring all-reduce over the ``P/c`` ranks of the process column. 2D and 3D where
    the closed forms' grid is (2x2, 2x2x2): see :func:`_assert_grid_forms`.
    """
    pairs = list(zip(widths[:-1], widths[1:], strict=True))
    spmm_words = sum(n * (a + b) for a, b in pairs)
    weights = sum(a * b for a, b in pairs)
    if algo in ("2d", "3d"):
        _assert_grid_forms(algo, p, n, widths, busiest)
    if algo == "1d":  # the paper's (P - 1)/P beta n f per pass, f^2 all-reduced
        assert busiest["dense_bcast"] == (p - 1) * spmm_words * WORD // p
        assert busiest["dense_bcast"] == pytest.approx(
            (p - 1) / p * (paper_words("1d", (p,), n, 0, widths) - weights) * WORD)
    if algo == "1.5d":  # n f / c broadcast, n f c / P reduced (a ring: exact at c = 2)
        c, q = 2, p // 2
        spmm = paper_words("1.5d", (q, c), n, 0, widths) - weights
        assert busiest["dense_bcast"] + busiest["allreduce"] == pytest.approx(
            spmm * WORD + 2 * weights * WORD * (q - 1) / q)
        assert busiest["dense_bcast"] == spmm_words * WORD // c


def _assert_grid_forms(algo: str, p: int, n: int, widths: list[int], busiest: dict) -> None:
    """2D on 2x2 (P = 4), 3D on 2x2x2 (P = 8): the closed forms' SpMM terms, and ours.

    Equal widths ``f``. The paper's per-layer ``4 n (f^{l-1} + f^l) / sqrt(P)`` (2D) and
    ``6 n (f^{l-1} + f^l) / P^{2/3}`` (3D) hold its SpMMs' dense blocks, ``n f / sqrt(P)``
    per pass (3D: ``n f / P^{2/3}`` broadcast and as much reduce-scattered over the fiber),
    each ``(q - 1)/q`` of it here (``q = sqrt(P)``, ``P^{1/3}``: a root receives nothing);
    the rest are the paper's dense steps. Ours: per layer ``T`` all-gathered (the last
    layer's gathered to column 0) forward and ``Â G^l`` all-gathered backward (the last
    layer's ``G^l`` first scattered from column 0), ``2 L + 1`` row collectives of ``(q -
    1)/q n f / q^{d-1}`` words, against the paper's ``3 n (f^{l-1} + f^l) / sqrt(P)``
    (2D) and ``4 n (f^{l-1} + f^l) / P^{2/3}`` (3D) per layer; the weights are one ring
    all-reduce over all ranks.
    """
    d = 2 if algo == "2d" else 3
    if p != 2**d:
        return  # a grid the closed forms do not describe (4x2, 2x1x2)
    q, f, layers = 2, widths[0], len(widths) - 1
    block = n * f // q ** (d - 1)  # the paper's n f / sqrt(P), n f / P^{2/3}
    share = (q - 1) * block // q  # per pass, or per row collective
    paper = paper_words(algo, (q,) * d, n, 0, widths) - (d == 2) * f * f * layers
    spmm_terms = 2 * layers * block * (d - 1)  # (3D: broadcast and fiber reduce-scatter)
    assert spmm_terms == pytest.approx(paper / (4 if d == 2 else 3))
    assert busiest["dense_bcast"] == 2 * layers * share * WORD
    if d == 3:
        assert busiest["reduce_scatter"] == 2 * layers * share * WORD  # the fiber's
    rows = busiest["allgather"] + busiest["gather"] + busiest["scatter"]
    assert rows == (2 * layers + 1) * share * WORD
    assert busiest["allreduce"] == 2 * layers * f * f * WORD * (p - 1) // p


@pytest.mark.mpi
@pytest.mark.ranks(4)
@pytest.mark.parametrize("algo", [["--algo", "1d"], ["--algo", "1.5d", "--replication", "2"],
                                  ["--algo", "halo", "--exchange", "p2p"]], ids=layout_id)
def test_unequal_widths_move_cagnets_backward(graph_file, shared_tmp, world, algo):
    """24 features -> hidden 8 -> 4 classes on 96 vertices: the backward SpMMs are CAGNET's.

    ``Â G^l`` runs on ``f^l`` (8, then 4), where the adjoint of the forward ran on
    ``f^{l-1}`` (24, then 8): 1D and 1.5D move the closed forms' per-pass terms, halo
    ``(24 + 8)`` forward and ``(8 + 4)`` backward per halo row.
    """
    p, n, widths = world.size, 96, [24, 8, 4]
    graph = graph_file("unequal.h5", n=n, features=widths[0], classes=widths[-1], seed=6)
    auto, paper = _pair(world, graph, shared_tmp, [*algo, "--hidden", str(widths[1])],
                        f"unequal-{'-'.join(algo[1::2])}")
    busiest = paper["comm"]["busiest_rank_bytes"]
    _assert_closed_forms(algo[1], p, n, widths, busiest)
    if algo[1] == "halo":  # per halo pair paper moves 24 + 8 forward and 8 + 4 pushed back,
        halo = [d["comm"]["measured_bytes"]["halo"] for d in (auto, paper)]
        assert halo[1] * (8 + 4 + 8 + 4) == halo[0] * (24 + 8 + 8 + 4)  # auto Â^T (H W)


def test_paper_order_is_refused_outside_the_full_batch_layouts(tmp_path):
    from tests.graphs import write_random_graph

    graph = write_random_graph(tmp_path / "g.h5", n=40, seed=1)
    with pytest.raises(ConfigError, match="--product-order must be one of auto, paper"):
        TrainConfig(product_order="narrow")  # not a choice
    import hpcgnn
    from hpcgnn.api import OffloadMode

    with pytest.raises(ConfigError, match="--product-order paper orders the full-batch"):
        hpcgnn.train(graph, mode=OffloadMode(chunks=2), product_order="paper", epochs=1,
                     quiet=True)


def test_the_trace_and_the_kind_carry_the_order():
    """``auto`` leaves the layer as it was (settings, equality); ``paper`` aggregates first
    in every layer and runs the first layer's backward SpMM."""
    auto, paper = TrainConfig().kind, TrainConfig(product_order="paper").kind
    assert auto == TrainConfig().kind and "product_order" not in auto.settings()
    widths = [602, 16, 41]  # Reddit: auto moves 16 and 16 (no first backward)
    assert aggregation_widths(widths, auto) == [(16, True), (16, True)]
    assert aggregation_widths(widths, paper) == [(602, True), (16, True)]
    # the row layouts' backward is CAGNET's Â G^l, of the layer's output width
    assert row_exchange_widths(widths, auto) == [(16, 16), (16, 16)]
    assert row_exchange_widths(widths, paper) == [(602, 16), (16, 41)]


def test_cagnets_backward_gives_the_adjoints_gradients():
    """``aggregate_transform``'s ``Â G`` first: the gradients of ``dense(aggregate(h))``."""
    import scipy.sparse as sp
    import torch

    from hpcgnn.kernels.spmm import to_torch_csr
    from hpcgnn.nn.gcn import LocalAggregation, aggregate, aggregate_transform

    a = sp.random(12, 12, density=0.3, random_state=3, format="csr") + sp.eye(12)
    op = LocalAggregation(to_torch_csr(a.T.tocsr(), torch.float64),
                          to_torch_csr(a.tocsr(), torch.float64))
    gen = torch.Generator().manual_seed(0)
    h0 = torch.randn(12, 5, dtype=torch.float64, generator=gen)
    w0 = torch.randn(5, 3, dtype=torch.float64, generator=gen)
    g = torch.randn(12, 3, dtype=torch.float64, generator=gen)
    grads = []
    for run in (lambda h, w: aggregate(h, op) @ w, lambda h, w: aggregate_transform(h, w, op)):
        h, w = h0.clone().requires_grad_(), w0.clone().requires_grad_()
        z = run(h, w)
        z.backward(g)
        grads.append((z.detach(), h.grad, w.grad))
    for want, got in zip(*grads, strict=True):
        assert torch.allclose(got, want, rtol=0, atol=1e-12)


def test_the_advisor_models_both_orders(capsys):
    shape = ["--shape", "4000,36000,16,16", "--procs", "4", "--formulas", "paper",
             "--dtype", "float64", "--top", "40"]
    assert main(["model", *shape]) == 0
    auto = capsys.readouterr().out
    assert main(["model", *shape, "--product-order", "paper"]) == 0
    paper = capsys.readouterr().out
    assert "product order auto" in auto and "product order paper" in paper
    row = next(line.split() for line in paper.splitlines()
               if line.split()[:2] == ["1.5d", "2x2"] and len(line.split()) == 5)
    assert row[-1] == "1.000"  # 1.5D at c = 2, P = 4: the paper's closed form
