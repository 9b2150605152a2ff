"""Comparison of a distributed model against the serial reference.

The serial reference (:class:`~hpcgnn.models.serial.SerialGCN`) runs on the host; the
distributed model runs on its grid's device (the ``device`` fixture), whose results are
brought to the host (:meth:`~hpcgnn.backend.Device.to_host`) to be compared.
"""

from __future__ import annotations

import numpy as np
import torch

from hpcgnn.comm import Comm
from hpcgnn.config import TrainConfig
from hpcgnn.models.serial import SerialGCN
from hpcgnn.training.fullbatch import train_fullbatch
from tests.mpi import assert_all, assert_close_all, assert_same_on_all_ranks

#: The layer kinds besides GCN with their settings (GIN's ``eps`` not 0), as ``TrainConfig``
#: keywords.
KINDS = {"sage": {"model": "sage"}, "gin": {"model": "gin", "gin_eps": 0.5}}


def kind_settings(model: str) -> dict:
    """``TrainConfig`` keywords of ``model`` (GCN's, or :data:`KINDS`')."""
    return KINDS.get(model, {"model": model})


def first_step(model, cfg: TrainConfig, num_train: int):
    """Forward with dropout (epoch 0), backward, reduced gradients."""
    for w in model.weights:
        w.grad = None
    logits = model.logits(0)
    from hpcgnn.nn.gcn import cross_entropy_sum

    loss = cross_entropy_sum(logits, model.y, model.masks["train"]) / num_train
    loss.backward()
    model.reduce_gradients()
    return logits.detach(), [w.grad.clone() for w in model.weights]


def compare_with_serial(make_model, path, cfg: TrainConfig, world: Comm, epochs: int = 5):
    """Assert forward logits, gradients and the loss history equal the serial run's."""
    tol = 1e-10 if cfg.dtype == "float64" else 1e-5
    serial = SerialGCN(path, cfg)
    num_train = int(serial.masks["train"].sum())
    s_logits, s_grads = first_step(serial, cfg, num_train)

    model = make_model()
    d_logits, d_grads = first_step(model, cfg, num_train)
    dev = model.comm.device  # the grid's device: its results come back to the host to compare
    rows = torch.from_numpy(model.row_ids)
    assert_close_all(world, dev.to_host(d_logits), s_logits[rows].numpy(), tol, tol,
                     "forward logits differ from serial")
    assert_close_all(world, [dev.to_host(g) for g in d_grads], [g.numpy() for g in s_grads],
                     tol, tol, "weight gradients differ from serial")

    cfg5 = TrainConfig(**{**cfg.as_dict(), "epochs": epochs})
    serial = SerialGCN(path, cfg5)
    s_res = train_fullbatch(serial, cfg5)
    model = make_model()
    d_res = train_fullbatch(model, cfg5)
    s_loss = np.array([e.loss for e in s_res.epochs])
    d_loss = np.array([e.loss for e in d_res.epochs])
    assert_close_all(world, d_loss, s_loss, tol, 0.0, f"loss history differs: {d_loss} vs {s_loss}")
    assert_same_on_all_ranks(world, d_res.params_sha256, "replicated weights differ between ranks")
    for key in ("train_acc", "val_acc", "test_acc"):
        assert_all(world, abs(d_res.final[key] - s_res.final[key]) < 1e-9 or cfg.dtype == "float32")
    return d_res, s_res


def check_cost_model(algo, result, problem, shape, world):
    """Measured bytes per category of one epoch equal the model's, summed over ranks and on
    the busiest rank (the largest per-rank value of each category)."""
    from hpcgnn.cost.predict import predict
    from hpcgnn.training.report import max_over_ranks, summed_over_ranks

    per_rank = result.per_epoch(result.step_bytes)
    est = predict(algo, problem, shape)
    for how, measured, predicted in (
        ("summed", summed_over_ranks(world, per_rank), est.bytes_total),
        ("busiest rank", max_over_ranks(world, per_rank), est.bytes_max_rank),
    ):
        cats = (set(measured) | set(predicted)) - {"control"}
        ok = all(measured.get(c, 0.0) == predicted.get(c, 0.0) for c in cats)
        assert_all(world, ok, f"{algo} {shape} {how}: measured {measured} vs predicted {predicted}")


def problem_of(path, cfg: TrainConfig, row_offsets=None):
    """The cost model's view of training ``cfg`` on the graph file ``path``."""
    from hpcgnn.cost.ranking import cost_problem
    from hpcgnn.io import GraphFile

    with GraphFile(path) as gf:
        return cost_problem(gf.meta, cfg, row_offsets)


def metis_graph(graph_file, shared_tmp, world, name="g.h5", **kwargs):
    """A random graph partitioned with METIS into one part per rank (collective)."""
    from hpcgnn.cli.main import main

    src = graph_file(name, **kwargs)
    dst = shared_tmp / f"metis-{name}"
    rc = main(["partition", str(src), "--parts", str(world.size), "--method", "metis",
               "--out", str(dst), "--quiet"])
    assert_all(world, rc == 0, "partition failed")
    world.mpi.Barrier()
    return dst


def block_row_every_grid(path, cfg: TrainConfig, world: Comm, device, kinds=("1.5d",)) -> None:
    """On every grid of ``kinds`` at this rank count, the block-row model equals the serial
    run and measures the bytes its cost model predicts."""
    from mpi4py import MPI

    from hpcgnn.grid import ProcessGrid
    from hpcgnn.layout.shapes import admissible_shapes
    from hpcgnn.models.block_row import BlockRowGCN

    for kind in kinds:
        for shape in admissible_shapes(kind, world.size):
            with ProcessGrid(MPI.COMM_WORLD, shape, device=device) as grid:
                res, _ = compare_with_serial(
                    lambda g=grid: BlockRowGCN.read(path, g, cfg), path, cfg, world
                )
                check_cost_model(kind, res, problem_of(path, cfg), grid.shape, world)


def assert_measured_equals_predicted(model, result, world) -> None:
    """Bytes per epoch summed over ranks equal ``model.predict_cost()`` in every category."""
    from hpcgnn.training.report import summed_over_ranks

    measured = summed_over_ranks(world, result.per_epoch(result.step_bytes))
    measured = {c: v for c, v in measured.items() if c != "control"}
    pred = {c: v for c, v in model.predict_cost().bytes_total.items() if v}
    cats = set(measured) | set(pred)
    ok = all(abs(measured.get(c, 0) - pred.get(c, 0)) < 1e-6 for c in cats)
    assert_all(world, ok, f"measured {measured} vs predicted {pred}")
