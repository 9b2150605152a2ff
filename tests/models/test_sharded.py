"""GIST's model-parallel evaluation over row shards against the serial model, any rank count."""

import numpy as np
import pytest
import torch

from hpcgnn.config import TrainConfig
from hpcgnn.cost.gist import eval_bytes
from hpcgnn.exchange.subnets import EVAL, SubnetShards
from hpcgnn.layout.order import layer_sizes
from hpcgnn.models.serial import SerialGCN
from hpcgnn.models.sharded import ShardedForward
from tests.devices import device_world
from tests.mpi import assert_all


def _eval_bytes(world):
    return float(world.stats.snapshot().get(EVAL, {}).get("bytes", 0.0))


def _shards(full, offsets, rank):
    return [w[int(o[rank]) : int(o[rank + 1])] for w, o in zip(full, offsets, strict=True)]


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
    n = 37
    path = graph_file(n=n, features=features, directed=directed, seed=11)
    cfg = TrainConfig(layers=layers, hidden=hidden, dtype=dtype, seed=3)
    widths = layer_sizes(features, hidden, 3, layers)
    rng = np.random.default_rng(5)  # the same weights on every rank
    shapes = zip(widths[:-1], widths[1:], strict=True)
    full = [rng.normal(size=shape).astype(cfg.numpy_dtype) for shape in shapes]
    offsets = SubnetShards.offsets_of(widths, world.size)
    r = world.rank
    shards = _shards(full, offsets, r)

    with device_world(device) as comm:  # the shards' owners, on the suite's device
        fwd = ShardedForward(path, comm, cfg, widths, offsets)
        before = _eval_bytes(comm)
        got = torch.from_numpy(device.to_host(fwd.logits(shards)))
        sent = comm.allreduce_scalar(_eval_bytes(comm) - before)
    want = SerialGCN(path, cfg, weights=[torch.from_numpy(w) for w in full]).logits(None)

    tol = 1e-11 if dtype == "float64" else 2e-5
    err = float((got - want).abs().max() / max(1.0, float(want.abs().max())))
    assert_all(world, err < tol, f"rank {r}: logits differ by {err:.3g} (relative)")
    assert_all(world, bool((got.argmax(1) == want.argmax(1)).all()), "predictions differ")
    assert sent == pytest.approx(eval_bytes(widths, n, world.size, cfg.itemsize), rel=1e-12)


@pytest.mark.mpi
@pytest.mark.parametrize(("features", "layers"), [(6, 3), (40, 2)])
def test_sage_logits_from_the_shards_equal_the_serial_model(
    graph_file, world, device, features, layers
):
    n = 31
    path = graph_file(n=n, features=features, directed=True, avg_degree=1.5, seed=12)
    cfg = TrainConfig(layers=layers, hidden=8, dtype="float64", seed=3, model="sage")
    widths = layer_sizes(features, 8, 3, layers)
    rng = np.random.default_rng(6)
    w_self, w_neigh = (
        [rng.normal(size=shape) for shape in zip(widths[:-1], widths[1:], strict=True)]
        for _ in range(2)
    )
    offsets = SubnetShards.offsets_of(widths, world.size)
    with device_world(device) as comm:
        fwd = ShardedForward(path, comm, cfg, widths, offsets)
        before = _eval_bytes(comm)
        got = fwd.logits(_shards(w_neigh, offsets, comm.rank), _shards(w_self, offsets, comm.rank))
        got = torch.from_numpy(device.to_host(got))
        sent = comm.allreduce_scalar(_eval_bytes(comm) - before)
    full = [torch.from_numpy(w) for pair in zip(w_self, w_neigh, strict=True) for w in pair]
    want = SerialGCN(path, cfg, weights=full).logits(None)
    err = float((got - want).abs().max() / max(1.0, float(want.abs().max())))
    assert_all(world, err < 1e-11, f"rank {world.rank}: logits differ by {err:.3g} (relative)")
    assert sent == pytest.approx(eval_bytes(widths, n, world.size, cfg.itemsize), rel=1e-12)


@pytest.mark.mpi
@pytest.mark.parametrize(("features", "layers"), [(6, 3), (40, 2)])
def test_gin_logits_from_the_shards_equal_the_serial_model(
    graph_file, world, device, features, layers
):
    """GIN's shards follow the chain of its weights (W_1^l, W_2^l), one product each."""
    from hpcgnn.layout.subnets import weight_chain

    n = 31
    path = graph_file(n=n, features=features, directed=True, avg_degree=1.5, seed=12)
    cfg = TrainConfig(layers=layers, hidden=8, dtype="float64", seed=3, model="gin",
                      gin_eps=0.5)
    chain, per = weight_chain(layer_sizes(features, 8, 3, layers), cfg.kind)
    assert per == 1 and len(chain) == 2 * layers + 1
    rng = np.random.default_rng(7)
    full = [rng.normal(size=shape) / 3 for shape in zip(chain[:-1], chain[1:], strict=True)]
    offsets = SubnetShards.offsets_of(chain, world.size)
    with device_world(device) as comm:
        fwd = ShardedForward(path, comm, cfg, chain, offsets)
        before = _eval_bytes(comm)
        got = torch.from_numpy(device.to_host(fwd.logits(_shards(full, offsets, comm.rank))))
        sent = comm.allreduce_scalar(_eval_bytes(comm) - before)
    want = SerialGCN(path, cfg, weights=[torch.from_numpy(w) for w in full]).logits(None)
    err = float((got - want).abs().max() / max(1.0, float(want.abs().max())))
    assert_all(world, err < 1e-11, f"rank {world.rank}: logits differ by {err:.3g} (relative)")
    assert sent == pytest.approx(eval_bytes(chain, n, world.size, cfg.itemsize), rel=1e-12)


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
    from hpcgnn.layout.order import weight_shapes
    from hpcgnn.layout.subnets import weight_chain

    n = 31
    path = graph_file(n=n, features=6, directed=True, avg_degree=2.0, seed=12)
    cfg = TrainConfig(layers=layers, hidden=hidden, dtype="float64", seed=3, model="gat",
                      heads=heads, output_heads=output_heads)
    widths = layer_sizes(6, hidden, 3, layers)
    chain, per = weight_chain(widths, cfg.kind)
    assert per == 1 and chain[-1] == 3 * output_heads
    rng = np.random.default_rng(8)  # W^l, a_src^l, a_dst^l per layer
    full = [rng.normal(size=shape) / 2 for shape in weight_shapes(widths, cfg.kind)]
    offsets = SubnetShards.offsets_of(chain, world.size)
    with device_world(device) as comm:
        fwd = ShardedForward(path, comm, cfg, chain, offsets)
        before = _eval_bytes(comm)
        scores = [a for i, a in enumerate(full) if i % 3]
        got = fwd.logits(_shards(full[0::3], offsets, comm.rank), scores=scores)
        got = torch.from_numpy(device.to_host(got))
        sent = comm.allreduce_scalar(_eval_bytes(comm) - before)
    want = SerialGCN(path, cfg, weights=[torch.from_numpy(w) for w in full]).logits(None)
    err = float((got - want).abs().max() / max(1.0, float(want.abs().max())))
    assert_all(world, err < 1e-11, f"rank {world.rank}: logits differ by {err:.3g} (relative)")
    want_bytes = eval_bytes(chain, n, world.size, cfg.itemsize, heads)
    assert sent == pytest.approx(want_bytes, rel=1e-12)
