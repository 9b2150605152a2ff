import numpy as np
import pytest
import torch
from mpi4py import MPI

from hpcgnn.config import TrainConfig
from hpcgnn.grid.process_grid import ProcessGrid
from hpcgnn.layout.shapes import choose_shape
from hpcgnn.sampling.bulk import my_share
from hpcgnn.sampling.shuffle import minibatches
from hpcgnn.sampling.spec import SamplerSpec
from hpcgnn.train.minibatch import MinibatchTrainer
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


@pytest.mark.mpi
@pytest.mark.parametrize("sampler", ["sage", "ladies"])
def test_a_step_is_the_mean_loss_over_all_its_seeds(graph_file, world, sampler):
    # 25 training vertices in batches of 4: six of 4 and a last one of 1 seed, all in one
    # bulk; on P > 1 ranks the 1-seed batch shares a step with full ones. Its seed must
    # weigh like any other seed of the step (global mean), not like a whole batch.
    path = graph_file(n=50, avg_degree=4.0, seed=5, features=6, classes=3)
    sizes = (3, 2) if sampler == "sage" else (8, 8)
    spec = SamplerSpec(sampler, sizes, batch_size=4, bulk=7, seed=2)
    cfg = TrainConfig(hidden=5, dropout=0.3, dtype="float64", seed=1,
                      model="sage" if sampler == "sage" else "gcn")
    p = world.size
    with ProcessGrid(MPI.COMM_WORLD, choose_shape("1.5d", p)) as grid:
        ours = step_gradients(MinibatchTrainer(str(path), spec, "replicated", cfg, grid))
    with ProcessGrid(MPI.COMM_SELF, choose_shape("1.5d", 1)) as grid:
        serial = MinibatchTrainer(str(path), spec, "replicated", cfg, grid)
        per_batch = step_gradients(serial)  # one batch per step on one rank
    seeds = [len(b) for b in minibatches(serial.train_ids, 4, spec.seed, 0)]
    assert seeds == [4] * 6 + [1]
    shares = [my_share(len(seeds), p, r) for r in range(p)]
    assert len(ours) == max(len(s) for s in shares)
    for t, grad in enumerate(ours):
        step = [s[t] for s in shares if len(s) > t]
        want = sum(seeds[b] * per_batch[b] for b in step) / sum(seeds[b] for b in step)
        ok = np.allclose(grad, want, rtol=1e-10, atol=1e-12)
        assert_all(world, ok, f"step {t} (batches {step}): not the mean over its seeds")
