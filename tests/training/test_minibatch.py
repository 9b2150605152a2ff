import numpy as np
import pytest
import torch
from mpi4py import MPI

from hpcgnn.config import TrainConfig
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.kinds import Layer, Operator, Weight
from hpcgnn.layout.shapes import choose_shape
from hpcgnn.sampling.bulk import my_share
from hpcgnn.sampling.shuffle import minibatches
from hpcgnn.sampling.spec import SamplerSpec
from hpcgnn.training.minibatch import MinibatchTrainer
from tests.mpi import assert_all


def step_gradients(trainer: MinibatchTrainer) -> list[np.ndarray]:
    """The gradient of every optimizer step of epoch 0, all from the initial weights."""
    grads: list[np.ndarray] = []
    trainer.optimizer.step = lambda: grads.append(
        torch.cat([w.grad.reshape(-1) for w in trainer.weights]).numpy().copy()
    )
    for _ in trainer.steps(0):
        pass
    return grads


#: (sampler, layer kind and its settings) of the minibatch runs: each sampler's own layers,
#: GIN's and GAT's on every sampler's blocks, GraphSAGE's on Cluster-GCN's; multi-label
#: targets (``--loss bce``: the mean over the step's (seed, class) entries).
MODELS = {
    "sage": ("sage", {"model": "sage"}),
    "ladies": ("ladies", {"model": "gcn"}),
    "sage-gin": ("sage", {"model": "gin", "gin_eps": 0.5}),
    "sage-gat": ("sage", {"model": "gat", "heads": 2, "attention_dropout": 0.4}),
    "ladies-gin": ("ladies", {"model": "gin", "gin_eps": 0.5}),
    "ladies-gat": ("ladies", {"model": "gat", "heads": 2, "attention_dropout": 0.4}),
    "cluster-sage": ("cluster", {"model": "sage"}),
    "cluster-gin": ("cluster", {"model": "gin", "gin_eps": 0.5}),
    "cluster-gat": ("cluster", {"model": "gat", "heads": 2, "attention_dropout": 0.4}),
    "sage-bce": ("sage", {"model": "sage", "loss": "bce"}),
    "cluster-bce": ("cluster", {"model": "sage", "loss": "bce"}),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", list(MODELS))
def test_a_step_is_the_mean_loss_over_all_its_seeds(graph_file, world, name):
    # 25 training vertices in batches of 4: six of 4 and a last one of 1 seed, all in one
    # bulk; on P > 1 ranks the 1-seed batch shares a step with full ones. Its seed must
    # weigh like any other seed of the step (global mean), not like a whole batch.
    # (Cluster-GCN: 7 clusters of the training graph, one a batch, of differing sizes.)
    sampler, model = MODELS[name]
    path = graph_file(n=50, avg_degree=4.0, seed=5, features=6, classes=3,
                      multi_label=model.get("loss") == "bce")
    if sampler == "cluster":
        spec = SamplerSpec(sampler, (0, 0), batch_size=0, bulk=7, seed=2, clusters=7,
                           clusters_per_batch=1)
    else:
        sizes = (3, 2) if sampler == "sage" else (8, 8)
        spec = SamplerSpec(sampler, sizes, batch_size=4, bulk=7, seed=2)
    cfg = TrainConfig(hidden=6, dropout=0.3, dtype="float64", seed=1, **model)
    p = world.size
    with ProcessGrid(MPI.COMM_WORLD, choose_shape("1.5d", p)) as grid:
        ours = step_gradients(MinibatchTrainer(str(path), spec, "replicated", cfg, grid))
    with ProcessGrid(MPI.COMM_SELF, choose_shape("1.5d", 1)) as grid:
        serial = MinibatchTrainer(str(path), spec, "replicated", cfg, grid)
        per_batch = step_gradients(serial)  # one batch per step on one rank
    seeds = [len(b) for b in serial.sampler.batches(0)]
    if sampler != "cluster":
        assert seeds == [len(b) for b in minibatches(serial.train_ids, 4, spec.seed, 0)]
        assert seeds == [4] * 6 + [1]
    shares = [my_share(len(seeds), p, r) for r in range(p)]
    assert len(ours) == max(len(s) for s in shares)
    for t, grad in enumerate(ours):
        step = [s[t] for s in shares if len(s) > t]
        want = sum(seeds[b] * per_batch[b] for b in step) / sum(seeds[b] for b in step)
        ok = np.allclose(grad, want, rtol=1e-10, atol=1e-12)
        assert_all(world, ok, f"step {t} (batches {step}): not the mean over its seeds")


@pytest.mark.parametrize("sampler", ["sage", "ladies"])
@pytest.mark.parametrize("model", ["gin", "gat"])
def test_a_block_of_every_in_neighbour_gives_the_full_batch_logits(graph_file, model, sampler):
    """With fan-outs (LADIES: layer sizes) above every degree (vertex count) a block holds
    each row's whole in-neighbourhood: the sampled GIN / GAT (zero biases) give the
    full-batch model's logits of its seeds."""

    path = graph_file(n=40, avg_degree=3.0, seed=8, features=5, classes=3, directed=True)
    extra = {"gin_eps": 0.25} if model == "gin" else {"heads": 2, "output_heads": 2}
    cfg = TrainConfig(layers=2, hidden=6, dropout=0.0, dtype="float64", seed=3, model=model,
                      **extra)
    logits, want, _, _ = _sampled_and_serial_logits(path, cfg, sampler)
    assert torch.allclose(logits, want, atol=1e-12, rtol=1e-10)


class WeightedConv(Layer):
    """GraphConv's ``H W_root + A_w^T H W`` on the file's edge weights."""

    operator = Operator("weighted")

    def weights(self, f_in, f_out, layer, last):
        return [Weight((f_in, f_out)), Weight((f_in, f_out), stream=1)]

    def forward(self, g, h, w):
        z = g.bias(g.propagate(h, w[1], self_weight=w[0]))
        return z if g.last else z.relu()


def test_a_node_wise_block_of_every_in_neighbour_carries_the_edge_weights(graph_file):
    """Fan-outs above every degree: a weighted layer's sampled logits are the full-batch
    model's (its biases zero), the file's weights on every sampled edge."""
    from hpcgnn.kinds import named

    path = graph_file(n=40, avg_degree=3.0, seed=8, features=5, classes=3, directed=True,
                      weights=np.float64)
    layer = named(WeightedConv())
    cfg = TrainConfig(layers=2, hidden=6, dropout=0.0, dtype="float64", seed=3,
                      model=str(layer), layer=layer)
    logits, want, full, serial = _sampled_and_serial_logits(path, cfg, "sage", full=True)
    assert torch.allclose(logits, want, atol=1e-12, rtol=1e-10)
    assert torch.allclose(full, serial, atol=1e-12, rtol=1e-10)

def _sampled_and_serial_logits(path, cfg, sampler, full=False):
    """One batch of 7 seeds sampled with fan-outs (LADIES: layer sizes) of 100 on one rank.

    Returns the batch's logits, the serial model's with the same weights (the biases,
    zero at first, left out) at the batch's seeds, the trainer's full-graph evaluation
    (with ``full``, else ``None``) and the serial model's logits of every vertex.
    """
    from hpcgnn.models.serial import SerialGCN

    spec = SamplerSpec(sampler, (100, 100), batch_size=7, bulk=1, seed=2)
    with ProcessGrid(MPI.COMM_SELF, choose_shape("1.5d", 1)) as grid:
        trainer = MinibatchTrainer(str(path), spec, "replicated", cfg, grid)
        (batch,) = trainer.sampler.sample(0, [trainer.train_ids[:7]], 0)
        x, _ = trainer.fetcher.fetch(batch.input_ids)
        logits = trainer.model.forward_batch(batch, torch.from_numpy(x), 0.0, None)
        serial = SerialGCN(str(path), cfg, weights=[
            w.detach().clone() for w in trainer.weights if w.dim() == 2  # no biases
        ]).logits(None).detach()
        whole = trainer.model.forward_full(trainer.x, trainer.eval_block()) if full else None
    at_seeds = serial[torch.from_numpy(np.asarray(batch.seeds))]
    return logits.detach(), at_seeds, None if whole is None else whole.detach(), serial
