import numpy as np
import pytest

from hpcgnn.cli.main import main
from hpcgnn.io import GraphFile
from hpcgnn.sampling.bulk import read_train_ids, sample_epoch_serial
from hpcgnn.sampling.rows import read_pattern
from hpcgnn.sampling.sample_file import read_samples
from hpcgnn.sampling.spec import SamplerSpec
from tests.mpi import assert_all, error_output
from tests.sampling import same_batches


def reference(path, spec, epoch, max_batches=None):
    with GraphFile(path) as gf:
        store = read_pattern(gf, 0, gf.meta.num_nodes, spec.method)
    return sample_epoch_serial(spec, store, read_train_ids(path), epoch, max_batches)


@pytest.mark.mpi
@pytest.mark.parametrize("layout", ["replicated", "partitioned"])
@pytest.mark.parametrize("flags, spec", [
    (["--sampler", "sage", "--fanout", "4,2"], SamplerSpec("sage", (4, 2), 6, 1, 7)),
    (["--sampler", "ladies", "--layer-size", "12", "--layers", "2"],
     SamplerSpec("ladies", (12, 12), 6, 1, 7)),
])
def test_output_is_the_serial_reference_at_any_p(graph_file, shared_tmp, world, layout, flags,
                                                 spec):
    path = graph_file(n=120, avg_degree=5, directed=True, seed=8)
    out = shared_tmp / f"s-{layout}-{spec.sampler}.h5"
    rc = main(["sample", str(path), *flags, "--batch-size", "6", "--bulk", "4", "--seed", "7",
               "--epoch", "3", "--graph-layout", layout, "--out", str(out), "--quiet"])
    assert_all(world, rc == 0)
    world.mpi.Barrier()
    attrs, got = read_samples(out)
    expected = reference(path, spec, epoch=2)  # --epoch 3: training's third, index 2; bulk 1
    # here: the file must not depend on it
    assert_all(world, same_batches(got, expected))
    assert attrs["num_batches"] == len(expected) == 10 and attrs["world_size"] == world.size
    assert attrs["sampler"] == spec.sampler and attrs["layers"] == 2 and attrs["epoch"] == 3
    b = got[3]
    assert np.array_equal(b.hops[0].rows, b.seeds)


@pytest.mark.mpi
def test_batches_limit_and_replication(graph_file, shared_tmp, world):
    path = graph_file(n=90, seed=9)
    out = shared_tmp / "lim.h5"
    rc = main(["sample", str(path), "--fanout", "3", "--batch-size", "5", "--bulk", "2",
               "--batches", "3", "--replication", str(world.size), "--graph-layout", "partitioned",
               "--out", str(out), "--quiet"])
    assert_all(world, rc == 0)
    world.mpi.Barrier()
    _, got = read_samples(out)
    spec = SamplerSpec("sage", (3,), 5, 2, 0)
    assert_all(world, same_batches(got, reference(path, spec, 0, max_batches=3)))


BAD = [
    (["--fanout", "15,10,5", "--layers", "2"],
     "--fanout has 3 entries but the model has 2 layers (--layers 2); give one fanout per layer"),
    (["--bulk", "0"], "--bulk must be in [1, 2147483647] (minibatches sampled at once), got 0"),
]


@pytest.mark.mpi
@pytest.mark.parametrize("command", ["sample", "train"])
@pytest.mark.parametrize("flags, message", BAD, ids=["fanout", "bulk"])
def test_bad_parameters_fail_on_every_rank(graph_file, shared_tmp, world, capsys, command,
                                           flags, message):
    path = graph_file(n=50, seed=10)
    base = ["--batch-size", "4", "--bulk", "2", "--fanout", "3,3"]
    if command == "sample":
        argv = ["sample", str(path), *base, *flags, "--out", str(shared_tmp / "x.h5")]
    else:
        argv = ["train", str(path), "--mode", "minibatch", "--epochs", "1", *base, *flags]
    assert_all(world, main(argv) == 1)
    err = error_output(world, capsys.readouterr().err).strip().splitlines()
    assert_all(world, err == [f"hpcgnn: error: {message}"], f"rank {world.rank} stderr: {err}")


@pytest.mark.mpi
def test_a_batch_larger_than_the_training_set_is_capped(graph_file, shared_tmp, world, capsys):
    path = graph_file(n=50, seed=10)  # 25 training vertices
    out = shared_tmp / "capped.h5"
    rc = main(["sample", str(path), "--batch-size", "1000", "--bulk", "2", "--fanout", "3",
               "--out", str(out), "--quiet"])
    assert_all(world, rc == 0)
    world.mpi.Barrier()
    _, got = read_samples(out)
    assert [len(b.seeds) for b in got] == [25]  # one minibatch of every training vertex
    capsys.readouterr()
    rc = main(["train", str(path), "--mode", "minibatch", "--epochs", "1", "--fanout", "3",
               "--quiet"])  # the default --batch-size 1024
    assert_all(world, rc == 0)
    if world.rank == 0:
        assert "(--batch-size 1024 capped at the 25 training vertices)" in capsys.readouterr().out


def test_device_reaches_the_sampling_grid(graph_file, shared_tmp, monkeypatch):
    import hpcgnn.grid.device
    from hpcgnn.backend import Device
    from hpcgnn.grid.process_grid import ProcessGrid

    class Marked(Device):
        pass

    chosen = Marked("cpu")
    monkeypatch.setattr(hpcgnn.grid.device, "choose_device",
                        lambda comm, kind=None, prepare=None: chosen)
    seen = []
    create = ProcessGrid.create.__func__

    def recording(cls, *args, **kwargs):
        grid = create(cls, *args, **kwargs)
        seen.append(grid.device)
        return grid

    monkeypatch.setattr(ProcessGrid, "create", classmethod(recording))
    path = graph_file(n=40, seed=3)
    rc = main(["sample", str(path), "--fanout", "2", "--batch-size", "5", "--batches", "1",
               "--device", "cpu", "--out", str(shared_tmp / "d.h5"), "--quiet"])
    assert rc == 0 and len(seen) == 1 and seen[0] is chosen


@pytest.mark.gpu
def test_cuda_samples_equal_the_cpu(graph_file, shared_tmp):
    path = graph_file(n=60, seed=5)
    got = {}
    for device in ("cpu", "cuda"):
        out = shared_tmp / f"{device}.h5"
        rc = main(["sample", str(path), "--fanout", "3,2", "--batch-size", "5", "--bulk", "2",
                   "--device", device, "--out", str(out), "--quiet"])
        assert rc == 0
        got[device] = read_samples(out)[1]
    assert same_batches(got["cuda"], got["cpu"])
