"""The device is not waited for at every phase and message: a few times an epoch.

On the emulated GPU (``make test-emulated``), which counts every stream and event
synchronisation and every scalar read (:data:`hpcgnn.backend.emulation.COUNTS`): calls and
phases are timed by marks that the epoch's counters read at once
(:class:`hpcgnn.backend.EventClock`, :meth:`hpcgnn.comm.CommStats.settle`), so the waits
per epoch do not grow with the layers (phases) or the ranks (messages). The staged wire's
device-to-host copy of each message's bytes is not among them: a host-driven MPI needs the
bytes before the call (``d2h``, counted apart).
"""

from __future__ import annotations

import pytest

from hpcgnn.backend import emulation
from hpcgnn.config import TrainConfig
from hpcgnn.training.modes import FullBatchMode
from hpcgnn.training.run import RunOptions, train
from tests.graphs import write_random_graph
from tests.mpi import assert_all

#: Waits an epoch may take: the loop's reads of its counters and the clock, the loss.
MAX_WAITS_PER_EPOCH = 5


def _waits_per_epoch(world, graph: str, algo: str, layers: int) -> float:
    """Synchronisations per epoch of ``algo`` (the difference of a 4- and a 2-epoch run)."""
    counts = []
    grid = f"1x1x{world.size}" if algo == "3d" else None  # every rank count has one
    for epochs in (1, 2, 4):  # the first run pays the process's one-off waits
        before = emulation.synchronisations()
        mode = FullBatchMode(algo=algo, grid=grid)
        train(RunOptions(graph=graph, mode=mode, device="cuda", quiet=True),
              TrainConfig(epochs=epochs, layers=layers, hidden=8, eval_every=0),
              world.mpi)
        counts.append(emulation.synchronisations() - before)
    return (counts[2] - counts[1]) / 2


@pytest.mark.mpi
@pytest.mark.parametrize("algo", ["1d", "1.5d", "2d", "3d", "halo"])
def test_waits_per_epoch_are_few_and_do_not_grow_with_phases(world, device, shared_tmp, algo):
    if not (device.is_cuda and device.emulated):
        pytest.skip("counted by the emulated GPU (HPCGNN_EMULATE_CUDA=1)")
    graph = str(shared_tmp / "g.h5")
    if world.rank == 0:
        write_random_graph(graph, n=80)
    world.barrier()
    two, four = (_waits_per_epoch(world, graph, algo, layers) for layers in (2, 4))
    assert_all(world, two == four <= MAX_WAITS_PER_EPOCH,
               f"{algo}: {two} waits per epoch with 2 layers, {four} with 4")


#: Waits of the sampler per hop of a stack on the GPU: the sizes of its data-dependent
#: outputs (the hop's rows, each ITS round's draws, the columns, the split into batches).
MAX_SAMPLER_WAITS_PER_HOP = 40


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["sage", "gat", "ladies-gat"])
def test_minibatch_waits_per_epoch_do_not_grow_with_its_steps(
    world, device, shared_tmp, model, monkeypatch
):
    """The batch losses stay on the device: the epoch reads their sum once.

    The hops are sampled on the GPU, which waits for the sizes of its outputs a bounded
    number of times per hop of a stack, never per step or message; those waits (counted
    around each sampled group) are bounded apart, the training's are as few as before.
    """
    from hpcgnn.sampling import bulk as bulk_module
    from hpcgnn.training.modes import MinibatchMode

    if not (device.is_cuda and device.emulated):
        pytest.skip("counted by the emulated GPU (HPCGNN_EMULATE_CUDA=1)")
    sampler_waits, per_stack = [0], []
    depth_first = bulk_module.sample_depth_first

    def counted(*args, **kwargs):  # one stack: a rank's share of a bulk
        it = depth_first(*args, **kwargs)
        per_stack.append(0)
        while True:
            before = emulation.synchronisations()
            group = next(it, None)
            waited = emulation.synchronisations() - before
            sampler_waits[0] += waited
            per_stack[-1] += waited
            if group is None:
                return
            yield group

    monkeypatch.setattr(bulk_module, "sample_depth_first", counted)
    graph = str(shared_tmp / "g.h5")
    if world.rank == 0:
        write_random_graph(graph, n=200, seed=3)
    world.barrier()
    per_epoch = []
    for batch in (40, 20):  # 2 and 3 (1 rank: 3 and 5) steps an epoch
        counts = []
        for epochs in (1, 2, 4):
            before = emulation.synchronisations() - sampler_waits[0]
            sampler, layers = ("ladies", "gat") if model == "ladies-gat" else ("sage", model)
            sizes = {"fanout" if sampler == "sage" else "layer_size":
                     (4, 3) if sampler == "sage" else (30, 30)}
            mode = MinibatchMode(sampler=sampler, batch_size=batch, bulk=2, **sizes)
            cfg = TrainConfig(epochs=epochs, hidden=8, eval_every=0, model=layers,
                              **({"heads": 2} if layers == "gat" else {}))
            train(RunOptions(graph=graph, mode=mode, device="cuda", quiet=True), cfg,
                  world.mpi)
            counts.append(emulation.synchronisations() - sampler_waits[0] - before)
        per_epoch.append((counts[2] - counts[1]) / 2)
    assert_all(world, per_epoch[0] == per_epoch[1] <= MAX_WAITS_PER_EPOCH,
               f"minibatch {model}: {per_epoch} waits per epoch with more steps")
    most = max(per_stack, default=0)  # a rank without a batch samples no stack
    assert_all(world, all(per_stack) and most <= 2 * MAX_SAMPLER_WAITS_PER_HOP,
               f"minibatch {model}: the sampler waited {per_stack} times (per stack)")
