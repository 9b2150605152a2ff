"""GIST's model-parallel evaluation over row shards against the serial model, any rank count.

The evaluation runs each layer's own forward on column blocks
(:class:`~hpcgnn.models.sharded.ShardedPrimitives`): the built-in layers and the example
layers of ``examples/layers`` give the serial model's logits, and the bytes they record are
:func:`~hpcgnn.cost.gist.eval_bytes` of the same forward traced on shapes.
"""

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hpcgnn.config import TrainConfig
from hpcgnn.cost.gist import eval_bytes
from hpcgnn.exchange.subnets import EVAL, SubnetShards
from hpcgnn.layout.order import layer_sizes
from hpcgnn.layout.subnets import model_params
from hpcgnn.models.serial import SerialGCN
from hpcgnn.models.sharded import ShardedForward
from tests.devices import device_world
from tests.mpi import assert_all

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "layers"


def _eval_bytes(world):
    return float(world.stats.snapshot().get(EVAL, {}).get("bytes", 0.0))


def _compare(path, world, device, cfg, widths, n, scale=1.0, tol=1e-11, seed=5):
    """The sharded logits of random weights against the serial model's, and their bytes."""
    params = model_params(widths, cfg.kind)
    rng = np.random.default_rng(seed)  # the same weights on every rank
    full = [(rng.normal(size=p.shape) * scale).astype(cfg.numpy_dtype) for p in params]
    offsets = SubnetShards.offsets_of([p.shape for p in params if p.sharded], world.size)
    r = world.rank
    shards = [w[int(o[r]) : int(o[r + 1])] for w, o in
              zip([w for w, p in zip(full, params, strict=True) if p.sharded], offsets,
                  strict=True)]
    vectors = [w for w, p in zip(full, params, strict=True) if not p.sharded] or None
    with device_world(device) as comm:  # the shards' owners, on the suite's device
        fwd = ShardedForward(path, comm, cfg, params, widths)
        before = _eval_bytes(comm)
        got = torch.from_numpy(device.to_host(fwd.logits(shards, vectors)))
        sent = comm.allreduce_scalar(_eval_bytes(comm) - before)
    want = SerialGCN(path, cfg, weights=[torch.from_numpy(w) for w in full]).logits(None)
    err = float((got - want).abs().max() / max(1.0, float(want.abs().max())))
    assert_all(world, err < tol, f"rank {r}: logits differ by {err:.3g} (relative)")
    assert_all(world, bool((got.argmax(1) == want.argmax(1)).all()), "predictions differ")
    assert sent == pytest.approx(
        eval_bytes(params, widths, cfg.kind, n, world.size, cfg.itemsize), rel=1e-12
    )


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("features", "hidden", "layers", "directed", "dtype"),
    [
        (6, 8, 3, False, "float64"),  # (Â^T H) W in the hidden layers, Â^T (H W) at the output
        (40, 8, 2, True, "float64"),  # Â^T (X W) at the input (2 f_1 < f_0)
        (5, 16, 4, False, "float32"),
        (6, 16, 1, False, "float64"),  # no hidden layer: only the output all-reduce
        (2, 3, 3, True, "float32"),  # fewer feature and hidden ids than ranks at 3-4 ranks
    ],
)
def test_logits_from_the_shards_equal_the_serial_model(
    graph_file, world, device, features, hidden, layers, directed, dtype
):
    path = graph_file(n=37, features=features, directed=directed, seed=11)
    cfg = TrainConfig(layers=layers, hidden=hidden, dtype=dtype, seed=3)
    _compare(path, world, device, cfg, layer_sizes(features, hidden, 3, layers), 37,
             tol=1e-11 if dtype == "float64" else 2e-5)


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["sage", "gin"])
@pytest.mark.parametrize(("features", "layers"), [(6, 3), (40, 2)])
def test_sage_and_gin_logits_from_the_shards_equal_the_serial_model(
    graph_file, world, device, model, features, layers
):
    """SAGE's self term joins the one reduction; GIN's ``W_2`` is a product of its own."""
    path = graph_file(n=31, features=features, directed=True, avg_degree=1.5, seed=12)
    cfg = TrainConfig(layers=layers, hidden=8, dtype="float64", seed=3, model=model,
                      gin_eps=0.5 if model == "gin" else 0.0)
    _compare(path, world, device, cfg, layer_sizes(features, 8, 3, layers), 31, scale=1 / 3)


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("hidden", "heads", "output_heads", "layers"),
    [
        (6, 3, 2, 3),  # f' = 2: at 4 ranks the even shards split a head's units
        (5, 1, 1, 2),  # one head of 5 units over every rank
        (10, 2, 3, 2),  # f' = 5, three averaged output heads
    ],
)
def test_gat_logits_from_the_shards_equal_the_serial_model(
    graph_file, world, device, hidden, heads, output_heads, layers
):
    """The even shards split GAT's heads: the score terms are reduced over the ranks."""
    path = graph_file(n=31, features=6, directed=True, avg_degree=2.0, seed=12)
    cfg = TrainConfig(layers=layers, hidden=hidden, dtype="float64", seed=3, model="gat",
                      heads=heads, output_heads=output_heads)
    _compare(path, world, device, cfg, layer_sizes(6, hidden, 3, layers), 31, scale=0.5,
             seed=8)


@pytest.mark.mpi
@pytest.mark.parametrize("spec", ["appnp:APPNP", "gcnii:GCNII", "graphconv:GraphConv"])
@pytest.mark.parametrize("layers", [2, 3])
def test_an_example_layers_logits_from_the_shards_equal_the_serial_model(
    graph_file, world, device, spec, layers
):
    """A researcher's layer: its own forward on the column blocks, its bytes traced."""
    module, _, name = spec.partition(":")
    sys.path.insert(0, str(EXAMPLES))
    try:
        layer = getattr(importlib.import_module(module), name)()
    finally:
        sys.path.remove(str(EXAMPLES))
    path = graph_file(n=33, features=7, directed=True, avg_degree=2.0, seed=13,
                      weights=np.float64)
    cfg = TrainConfig(layers=layers, hidden=8, dtype="float64", seed=3, model=spec,
                      layer=layer)
    _compare(path, world, device, cfg, layer_sizes(7, 8, 3, layers), 33, scale=0.5)
