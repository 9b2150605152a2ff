"""GIST's part of the report: predicted bytes, the ``gist`` metrics section, summary lines.

The bytes of the groups' own models (their cost models times ``K``), the sub-model
traffic per round measured against :func:`hpcgnn.cost.gist.round_bytes`, what a
data-parallel all-reduce would move instead, the evaluation's traffic, and each rank's
peak memory against the estimates the memory check used (``docs/gist.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hpcgnn.comm.communicator import Comm
from hpcgnn.cost.gist import data_parallel_bytes, eval_bytes
from hpcgnn.exchange.subnet_biases import LABELS
from hpcgnn.exchange.subnets import GATHER, SCATTER
from hpcgnn.training.loop import TrainResult
from hpcgnn.utils.memory import peak_rss_bytes

if TYPE_CHECKING:
    from hpcgnn.training.gist import GistTrainer


def gist_report(
    trainer: GistTrainer, result: TrainResult, measured: dict[str, float]
) -> tuple[dict[str, float], dict[str, Any], list[str]]:
    """Predicted bytes per round, the ``gist`` section and its lines (collective).

    ``measured``: bytes per round per category summed over ranks.
    """
    t, cfg, world = trainer, trainer.cfg, trainer.world
    k, rounds = t.opts.local_iters, max(1, len(t.predicted_rounds))
    # collective in the group; a rank hosting several sub-networks is a group of one
    mine = [inner.predicted_bytes(k, result.steps_run) for inner in t.trainers.values()]
    predicted: dict[str, float] = {}
    for parts in world.allgather_obj(mine if t.group_grid.world.rank == 0 else []):
        for part in parts:
            for c, v in part.items():
                predicted[c] = predicted.get(c, 0.0) + v
    cats = t.categories()
    for c in cats:
        predicted[c] = sum(r[c] for r in t.predicted_rounds) / rounds
    measured_rounds = _summed(world, t.measured_rounds, cats)
    records = result.epochs[len(result.epochs) - len(t.predicted_rounds):]
    per_round = [
        {
            "round": rec.epoch, "sent_bytes": got[SCATTER], "returned_bytes": got[GATHER],
            "predicted_sent_bytes": want[SCATTER],
            "predicted_returned_bytes": want[GATHER], "val_acc": rec.val_acc,
            "subnet_loss": rec.loss, "merged_loss": t.merged_losses.get(rec.epoch),
            # the replicated vectors' all-reduce (the sampled biases', GAT's score vectors')
            **{f"{LABELS[c]}_bytes": got[c] for c in cats[2:]},
            **{f"predicted_{LABELS[c]}_bytes": want[c] for c in cats[2:]},
        }
        for rec, got, want in zip(records, measured_rounds, t.predicted_rounds, strict=True)
    ]
    sub_measured = sum(measured.get(c, 0.0) for c in cats)
    sub_predicted = sum(predicted[c] for c in cats)
    weights = sum(int(np.prod(s)) for s in t.shards.shapes)
    dp = data_parallel_bytes(
        weights + (0 if t.vectors is None else sum(t.vectors.sizes)), world.size,
        cfg.itemsize, k,
    )
    evals = world.allreduce_scalar(float(sum(t.eval_measured)))
    eval_predicted = eval_bytes(
        t.params, t.widths, cfg.kind, t.meta.num_nodes, world.size, cfg.itemsize
    )
    peaks = [int(v) for v in world.allgather_obj(peak_rss_bytes())]
    starts = [int(v) for v in world.allgather_obj(t.memory_at_start)]
    budget, done = t.budget, len(result.epochs)
    scales = t.merged_scales()
    section: dict[str, Any] = {
        "rounds": done, "subnets": t.opts.subnets,
        "local_iters": k, "group_size": t.group_size,
        "epochs_budget": budget.epochs, "rounds_planned": budget.rounds,
        "rounds_derived": budget.derived, "steps_per_epoch": budget.steps_per_epoch,
        "subnet_epochs_of_work": budget.epochs_of_work(done),
        "merged_scales": [1.0] * len(t.shards.shapes) if scales is None else scales,
        "group_grid": str(t.group_grid.shape),
        "hidden": cfg.hidden, "subnet_hidden": t.hidden,
        "full_model_bytes": weights * cfg.itemsize,
        "submodel_bytes_per_round": {"measured": sub_measured, "predicted": sub_predicted},
        "data_parallel_allreduce_bytes_per_round": dp,
        "eval_bytes_per_evaluation": {
            "measured": evals / max(1, len(t.eval_measured)),
            "predicted": eval_predicted, "evaluations": len(t.eval_measured),
        },
        "peak_memory_bytes": peaks,
        "memory_at_start_bytes": starts,
        "peak_memory_source": "getrusage ru_maxrss (peak resident set size of each rank)",
        **{name: float(v) for name, v in t.estimates.items()},
        "per_round": per_round,
    }
    # sub-GCNs, sub-GATs ..., or a researcher's layer by its MODULE:CLASS
    what = f"sub-{cfg.model.upper()}s" if cfg.layer is None else f"sub-models of {cfg.kind}"
    sampling = t.inner.sampling_section()
    if sampling is not None:
        section["sampler"] = sampling
        what = f"sub-models ({sampling['sampler']} minibatches)"
    lines = [
        f"gist: {t.opts.subnets} {what} x {k} local iterations on groups of"
        f" {t.group_size} | sub-model traffic {sub_measured / 1e6:.3f} MB/round"
        f" (predicted {sub_predicted / 1e6:.3f}); data-parallel all-reduce would move"
        f" {dp / 1e6:.3f} MB/round"
    ]
    full_est = t.estimates.get("full_model_estimate_bytes")
    gist_est = t.estimates.get("gist_estimate_bytes")
    if full_est is not None and gist_est is not None:
        # like with like: what the run added to each process against the model estimates
        grew = max(p - s for p, s in zip(peaks, starts, strict=True))
        lines.append(
            f"gist: memory added by the run {grew / 2**30:.3f} GiB per rank (largest of"
            f" {len(peaks)}; process peak {max(peaks) / 2**30:.3f} GiB) | model estimate:"
            f" GIST {gist_est / 2**30:.3f} GiB, ordinary training of the global model"
            f" {full_est / 2**30:.3f} GiB per rank"
        )
    return predicted, {"gist": section}, lines


def _summed(
    world: Comm, rounds: list[dict[str, float]], cats: tuple[str, ...]
) -> list[dict[str, float]]:
    """Per-round byte counts of ``cats`` summed over ranks (collective)."""
    local = np.array([[r[c] for c in cats] for r in rounds], dtype=np.float64)
    local = local.reshape(-1, len(cats))
    world.allreduce(local, "control")
    return [dict(zip(cats, map(float, row), strict=True)) for row in local]
