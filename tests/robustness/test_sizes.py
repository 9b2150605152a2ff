"""Huge declared sizes: one identical line on every rank, exit 1, nothing written.

A size given on the command line (``--procs``, ``--fanout``, ``--bulk``) or declared by an
input file is checked against a documented bound before anything is allocated for it.
"""

import json
import time

import pytest

from hpcgnn.cli.common import launched_by_mpi
from tests.mpi import assert_all, on_rank0
from tests.robustness.harness import expect_error_untouched

HUGE = str(2**63)  # does not fit an int64


@pytest.mark.mpi
@pytest.mark.parametrize("procs", ["1000000000", str(2**20 + 1), HUGE])
def test_model_refuses_procs_above_the_maximum(graph_file, shared_tmp, world, capfd, procs):
    path = graph_file(n=40, seed=1)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["model", path, "--procs", procs, "--json", shared_tmp / "m.json"],
        "--procs must be in [1, 1048576]", procs,
    )


SAMPLING = [
    (["--fanout", f"{HUGE},2"], "--fanout entries must be in [1, 2147483647]"),
    (["--fanout", str(2**31)], "--fanout"),
    (["--sampler", "ladies", "--layer-size", HUGE], "--layer-size entries must be in [1, "),
    (["--bulk", HUGE], "--bulk must be in [1, 2147483647]"),
    (["--bulk", str(10**20)], "--bulk"),
    (["--seed", str(10**20)], "--seed must be in [0, 2^63)"),
]


@pytest.mark.mpi
@pytest.mark.parametrize(("flags", "words"), SAMPLING)
def test_sample_refuses_huge_sampling_sizes(graph_file, shared_tmp, world, capfd, flags, words):
    path = graph_file(n=40, seed=1)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["sample", path, "--batch-size", "8", "--out", shared_tmp / "s.h5", *flags], words,
    )


@pytest.mark.mpi
@pytest.mark.parametrize(("flags", "words"), SAMPLING)
def test_minibatch_training_refuses_huge_sampling_sizes(
    graph_file, shared_tmp, world, capfd, flags, words
):
    path = graph_file(n=40, seed=1)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["train", path, "--mode", "minibatch", "--batch-size", "8", "--epochs", "1", "--quiet",
         "--metrics", shared_tmp / "m.json", *flags], words,
    )


@pytest.mark.mpi
def test_sample_refuses_a_huge_epoch(graph_file, shared_tmp, world, capfd):
    path = graph_file(n=40, seed=1)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["sample", path, "--batch-size", "8", "--epoch", HUGE, "--out", shared_tmp / "s.h5"],
        "--epoch must be in [1, 2^63)",
    )


@pytest.mark.mpi
@pytest.mark.parametrize("command", ["train", "plan"])
def test_a_topology_declaring_1e8_ranks_is_refused_at_once(
    graph_file, shared_tmp, world, capfd, command
):
    path = graph_file(n=40, seed=1)
    topo = shared_tmp / "huge.json"
    doc = {"name": "huge", "ranks": 10**8, "links": [{"a": 0, "b": 1, "bandwidth_gbps": 1}]}
    on_rank0(world, topo.write_text, json.dumps(doc))
    if command == "train":
        argv = ["train", path, "--algo", "halo", "--topology", topo, "--epochs", "1",
                "--quiet", "--metrics", shared_tmp / "m.json"]
        size = world.size
    else:
        argv = ["plan", path, "--parts", "4", "--topology", topo, "--out", shared_tmp / "p.json"]
        size = 4
    start = time.perf_counter()
    expect_error_untouched(
        world, capfd, [shared_tmp], argv, f"has 100000000 ranks but the job has {size}"
    )
    assert_all(world, time.perf_counter() - start < 30, "the topology was not refused at once")


def _set_root_attr(path, name, value):
    import h5py

    with h5py.File(path, "r+") as f:
        f.attrs[name] = value


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("value", "words"),
    [(10**12, "num_classes=1000000000000 is more than 2147483647"),
     (3.5, "attribute 'num_classes' is not an integer: 3.5")],
)
@pytest.mark.parametrize("command", ["info", "train", "minibatch", "partition", "sample"])
def test_a_num_classes_that_cannot_be_right_is_refused_by_the_reader(
    graph_file, shared_tmp, world, capfd, value, words, command
):
    path = graph_file(n=40, seed=1)
    on_rank0(world, _set_root_attr, path, "num_classes", value)
    argv = {
        "info": ["info", path],
        "train": ["train", path, "--epochs", "1", "--metrics", shared_tmp / "m.json"],
        "minibatch": ["train", path, "--mode", "minibatch", "--batch-size", "8", "--epochs", "1"],
        "partition": ["partition", path, "--parts", "2", "--method", "block",
                      "--out", shared_tmp / "p.h5"],
        "sample": ["sample", path, "--batch-size", "8", "--out", shared_tmp / "s.h5"],
    }[command]
    expect_error_untouched(world, capfd, [shared_tmp], argv, words)


@pytest.mark.mpi
@pytest.mark.parametrize(
    "flags", [[], ["--algo", "2d"], ["--mode", "offload"], ["--mode", "minibatch",
                                                            "--batch-size", "8"]],
)
def test_a_model_too_large_for_memory_is_refused_before_allocating(
    graph_file, shared_tmp, world, capfd, monkeypatch, flags
):
    # 10^8 classes: the last layer's weights alone are 16 x 10^8 values (6.4 GB a copy)
    path = graph_file(n=40, seed=1)
    on_rank0(world, _set_root_attr, path, "num_classes", 10**8)
    monkeypatch.setenv("HPCGNN_MEMORY_LIMIT", str(2**30))
    message = expect_error_untouched(
        world, capfd, [shared_tmp],
        ["train", path, "--epochs", "1", "--quiet", "--metrics", shared_tmp / "m.json", *flags],
        "not enough memory for", "6 features, hidden 16, 100000000 classes",
    )
    assert "GiB per rank needed" in message and "GiB available per rank" in message


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("flags", "words"),
    [(["--hidden", str(10**30)], "--hidden must be in [1, 2147483647]"),
     (["--layers", str(10**9)], "--layers must be in [1, 4096]"),
     (["--hidden", str(10**7)], "not enough memory for")],  # 1.8 GB of weights
)
def test_model_flags_too_large(graph_file, shared_tmp, world, capfd, monkeypatch, flags, words):
    monkeypatch.setenv("HPCGNN_MEMORY_LIMIT", str(2**30))
    path = graph_file(n=40, seed=1)
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["train", path, "--epochs", "1", "--quiet", "--metrics", shared_tmp / "m.json", *flags],
        words,
    )


def _self_link(path, where):
    import h5py

    with h5py.File(path, "r+") as f:
        if where in f:
            del f[where]
        f[where] = h5py.SoftLink("/" + where)


@pytest.mark.mpi
@pytest.mark.parametrize("where", ["labels", "masks/train", "x"])
@pytest.mark.parametrize("command", ["info", "train", "partition"])
def test_a_soft_link_to_itself_is_refused(graph_file, shared_tmp, world, capfd, where, command):
    # at a dataset the reader needs (labels, a mask) and at a path it never reads (x)
    path = graph_file(n=40, seed=1)
    on_rank0(world, _self_link, path, where)
    argv = {
        "info": ["info", path],
        "train": ["train", path, "--epochs", "1", "--metrics", shared_tmp / "m.json"],
        "partition": ["partition", path, "--parts", "2", "--method", "block",
                      "--out", shared_tmp / "p.h5"],
    }[command]
    expect_error_untouched(
        world, capfd, [shared_tmp], argv, f"'/{where}' is a soft link; links are not followed"
    )


def _forge(path, what):
    """A small file declaring a huge graph: an attribute alone, or an unwritten dataset."""
    import h5py
    import numpy as np

    with h5py.File(path, "r+") as f:
        if what == "features":  # 2000 x 10^9 declared, nothing stored: a 34 kB file
            f.attrs["num_features"] = 10**9
            del f["features"]
            f.create_dataset("features", shape=(40, 10**9), dtype=np.float32, chunks=(1, 1024))
        else:
            f.attrs["num_nodes"] = what


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("what", "words"),
    [(10**9, "has shape (41,), expected (1000000001,)"),
     (10**12, "has shape (41,), expected (1000000000001,)"),
     ("features", "declares 160000000000 bytes but stores 0 (unwritten or forged); not read")],
    ids=["1e9-vertices", "1e12-vertices", "1e9-features"],
)
@pytest.mark.parametrize("command", ["info", "train", "partition"])
def test_a_small_file_declaring_a_huge_graph_is_refused_unread(
    graph_file, shared_tmp, world, capfd, what, words, command
):
    path = graph_file(n=40, seed=1)
    on_rank0(world, _forge, path, what)
    argv = {
        "info": ["info", path],
        "train": ["train", path, "--epochs", "1", "--metrics", shared_tmp / "m.json"],
        "partition": ["partition", path, "--parts", "2", "--out", shared_tmp / "p.h5"],
    }[command]
    expect_error_untouched(world, capfd, [shared_tmp], argv, words)


#: ``hpcgnn`` under an address-space limit (``ulimit -v``), as a batch system may set it.
_LIMITED = """
import resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
from hpcgnn.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.skipif(launched_by_mpi(), reason="runs hpcgnn in a subprocess")
def test_a_model_beyond_the_address_space_limit_is_one_line(tmp_path):
    import subprocess
    import sys

    from tests.graphs import write_random_graph

    graph = write_random_graph(tmp_path / "g.h5", n=2000, features=8, seed=1)
    run = subprocess.run(
        [sys.executable, "-c", _LIMITED, str(3 << 30), "train", str(graph), "--hidden",
         "65536", "--epochs", "1", "--quiet"], capture_output=True, text=True, timeout=300)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and len(lines) == 1, run.stderr[-2000:]
    assert "address-space limit (ulimit -v)" in lines[0], lines


@pytest.mark.skipif(launched_by_mpi(), reason="one process: no job to end")
def test_an_allocation_that_fails_anyway_is_one_line(tmp_path, capsys, monkeypatch):
    import hpcgnn.cli.train as train
    from hpcgnn.cli.main import main

    def fails(args, predict_out=None):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator:"
                           " can't allocate memory: you tried to allocate 1310720000 bytes.")

    monkeypatch.setattr(train, "train_from_args", fails)
    assert main(["train", str(tmp_path / "g.h5")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["hpcgnn: error: out of memory: you tried to allocate 1310720000 bytes; use"
                   " more ranks or nodes, a smaller model, or a higher memory limit"], err
