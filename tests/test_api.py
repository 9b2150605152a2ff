"""``hpcgnn.train(...)``: a training run from typed objects, the command's run, its errors."""

import inspect
import json
import subprocess
import sys
from dataclasses import fields

import h5py
import numpy as np
import pytest
import torch

import hpcgnn
from hpcgnn.api import FullBatchMode, GistMode, MinibatchMode, OffloadMode
from hpcgnn.cli.main import main
from hpcgnn.errors import ConfigError, HpcgnnError
from hpcgnn.io import GraphFile
from hpcgnn.training.loop import params_sha256
from hpcgnn.utils.json_text import dumps
from tests.mpi import assert_all, assert_same_on_all_ranks

#: name -> (the mode object of the call, the flags of the command, further settings)
RUNS = {
    "fullbatch": (lambda: FullBatchMode(algo="1d"), ["--algo", "1d"], {}),
    "minibatch": (lambda: MinibatchMode(batch_size=16, fanout=[3, 2]),
                  ["--mode", "minibatch", "--batch-size", "16", "--fanout", "3,2"], {}),
    "offload": (lambda: OffloadMode(chunks=2, dedup="inter"),
                ["--mode", "offload", "--chunks", "2", "--dedup", "inter"], {}),
    "gist": (lambda: GistMode(rounds=2, group=MinibatchMode(batch_size=16, fanout=(3, 2))),
             ["--mode", "gist", "--rounds", "2", "--sampler", "sage", "--batch-size", "16",
              "--fanout", "3,2"], {"select_model": "last"}),
}
COMMON = {"epochs": 4, "hidden": 8, "quiet": True, "select_model": "best"}


def _argv(settings):
    out = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


def _comparable(doc):
    """The metrics without what differs between two runs of the same settings (times, the
    command, the date): as the file holds them (NaN as null)."""
    doc = json.loads(dumps(doc))
    for key in ("run", "time"):
        doc.pop(key)
    for rec in doc["epochs"]:
        for key in ("time_s", "comm_s", "new_pages"):
            rec.pop(key)
    doc.get("sampling", {}).pop("sample_time_s", None)
    for key in ("peak_memory_bytes", "memory_at_start_bytes"):  # the process's, measured
        doc.get("gist", {}).pop(key, None)
    memory = doc["memory"]  # the processes' peaks, measured; their sources and estimates agree
    for part in (memory, *([memory["device"]] if memory["device"] else [])):
        for key in ("peak_bytes", "phases"):
            part.pop(key)
    return doc


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_function_is_the_command(graph_file, shared_tmp, world, name):
    path = graph_file("api.h5", n=48, seed=2)
    mode, flags, more = RUNS[name]
    settings = {**COMMON, **more}
    out = shared_tmp / f"{name}.json"
    rc = main(["train", str(path), "--metrics", str(out), *flags, *_argv(settings)])
    assert_all(world, rc == 0, f"train exited {rc}")
    result = hpcgnn.train(path, mode=mode(), **settings)
    cli = json.loads(out.read_text())
    assert result.params_sha256 == cli["params_sha256"]
    assert _comparable(result.metrics) == _comparable(cli)
    # the weights: whole on every rank, on the host, the hashed ones
    assert all(w.device.type == "cpu" and not w.requires_grad for w in result.weights)
    assert params_sha256(result.weights) == result.params_sha256
    assert_same_on_all_ranks(world, result.weights, "weights differ across ranks")
    y, test = _labels(path)
    if name in ("minibatch", "gist"):  # biases and the sampler's operator: no hpcgnn.nn.GCN
        with pytest.raises(HpcgnnError, match=r"not hpcgnn\.nn\.GCN's layers"):
            result.model()
        return
    # inference on this process: the run's test accuracy
    logits = result.predict()
    assert logits.shape == (48, int(y.max()) + 1)
    acc = float((logits.argmax(1).numpy() == y)[test].mean())
    assert acc == pytest.approx(result.final["test_acc"])


def _labels(path):
    with GraphFile(path) as g:
        n = g.meta.num_nodes
        return g.read_labels(0, n), g.read_mask("test", 0, n)


@pytest.mark.mpi
def test_the_returned_model_predicts_what_hpcgnn_predict_writes(graph_file, shared_tmp, world):
    path = graph_file("api-pred.h5", n=48, seed=2)
    ck, out = shared_tmp / "ck", shared_tmp / "p.h5"
    result = hpcgnn.train(path, checkpoint_dir=ck, **COMMON)
    rc = main(["predict", str(path), "--checkpoint", str(ck), "--out", str(out), "--quiet"])
    assert_all(world, rc == 0, f"predict exited {rc}")
    with h5py.File(out) as f:
        written = f["logits"][()]
    np.testing.assert_allclose(result.predict().numpy(), written, rtol=1e-4, atol=1e-5)
    module = result.model()
    assert not module.training and isinstance(module, torch.nn.Module)


#: settings -> words of the one-line error (a type, the config's, the mode's, the run's)
BAD = [
    ({"mode": "minibatch"}, "mode: a mode object (FullBatchMode(), MinibatchMode(), ...)"),
    ({"epochs": "ten"}, "--epochs must be an integer, got 'ten'"),
    ({"quiet": 1}, "--quiet must be true or false, got 1"),
    ({"dropout": 1.5}, "--dropout must be in [0, 1)"),
    ({"mode": GistMode(), "select_model": "best"}, "--select-model best keeps a copy"),
    ({"metrics": ""}, "--metrics: an empty path"),
    ({"trace_epochs": (1, 2)}, "--trace-epochs needs --trace"),
    ({"mode": MinibatchMode(), "model": "gcn"}, "--model gcn does not exist with --sampler sage"),
    ({"model": object()}, "model: a layer's name, a hpcgnn.nn.Layer or a subclass"),
]


@pytest.mark.mpi
@pytest.mark.parametrize(("settings", "words"), BAD)
def test_a_bad_setting_raises_one_line_on_every_rank(graph_file, world, settings, words):
    path = graph_file("api-bad.h5", n=32, seed=1)
    try:
        hpcgnn.train(path, **{"epochs": 1, "quiet": True, **settings})
        raised = None
    except ConfigError as err:
        raised = str(err)
    assert_all(world, raised is not None and words in raised and "\n" not in raised, raised)


#: (the call's settings, made when called; the command's flags): the same check, one line
SAME_CHECKS = [
    (lambda: {"mode": FullBatchMode(exchange="planned")}, ["--exchange", "planned"]),
    (lambda: {"mode": MinibatchMode(fanout=[10, 0])}, ["--mode", "minibatch", "--fanout", "10,0"]),
    (lambda: {"mode": MinibatchMode(sampler="ladies", fanout=[5])},
     ["--mode", "minibatch", "--sampler", "ladies", "--fanout", "5"]),
    (lambda: {"mode": MinibatchMode(batch_size=8, global_batch=16)},
     ["--mode", "minibatch", "--batch-size", "8", "--global-batch", "16"]),
    (lambda: {"mode": MinibatchMode(sampler="cluster", batch_size=8)},
     ["--mode", "minibatch", "--sampler", "cluster", "--batch-size", "8"]),
    (lambda: {"mode": MinibatchMode(sample_memory="lots")},
     ["--mode", "minibatch", "--sample-memory", "lots"]),
    (lambda: {"mode": MinibatchMode(fanout=[10, 5]), "layers": 3},
     ["--mode", "minibatch", "--fanout", "10,5", "--layers", "3"]),
    (lambda: {"mode": OffloadMode(chunks=0)}, ["--mode", "offload", "--chunks", "0"]),
    (lambda: {"mode": OffloadMode(dedup="none", exchange="planned")},
     ["--mode", "offload", "--dedup", "none", "--exchange", "planned"]),
    (lambda: {"mode": OffloadMode(topology="t.json")},
     ["--mode", "offload", "--topology", "t.json"]),
    (lambda: {"mode": OffloadMode(device_memory="-1")},
     ["--mode", "offload", "--device-memory=-1"]),
    (lambda: {"mode": GistMode(rounds=0)}, ["--mode", "gist", "--rounds", "0"]),
    (lambda: {"mode": GistMode(subnets=0)}, ["--mode", "gist", "--subnets", "0"]),
    (lambda: {"mode": GistMode(local_iters=0)}, ["--mode", "gist", "--local-iters", "0"]),
    (lambda: {"hidden": 0}, ["--hidden", "0"]),
    (lambda: {"threads": 0}, ["--threads", "0"]),
    (lambda: {"checkpoint_every": 2}, ["--checkpoint-every", "2"]),
    (lambda: {"tier_gbps": {"hd": 0}}, ["--tier-gbps", "hd=0"]),
]


@pytest.mark.parametrize(("settings", "flags"), SAME_CHECKS)
def test_the_call_checks_what_the_command_checks(tmp_path, capsys, settings, flags):
    missing = tmp_path / "none.h5"  # each is refused before the graph is read
    assert main(["train", str(missing), *flags]) == 1
    line = capsys.readouterr().err.strip()
    with pytest.raises(ConfigError) as err:
        hpcgnn.train(missing, **settings())
    assert line == f"hpcgnn: error: {err.value}"


def test_a_mode_is_made_from_typed_values_and_checked():
    mode = MinibatchMode(fanout=[10, 5], sample_memory="2M")
    assert mode.fanout == (10, 5) and mode.sample_memory == 2.0 * 2**20
    assert mode.depth(None) == 2 and mode.default_model == "sage"
    with pytest.raises(HpcgnnError, match="sized for a run"):
        mode.spec  # noqa: B018
    assert GistMode(group=MinibatchMode(sampler="ladies")).default_model == "gcn"
    assert OffloadMode(device_memory="1K").device_memory == 1024.0
    assert FullBatchMode(grid=(2, 2), algo="2d").grid == (2, 2)
    for make, words in [
        (lambda: FullBatchMode(algo="4d"), "unknown algorithm '4d'"),
        (lambda: FullBatchMode(replication="2"), "--replication must be an integer or none"),
        (lambda: MinibatchMode(fanout=[10, 2.5]), "--fanout must be a list of integers"),
        (lambda: MinibatchMode(graph_layout="x"), "--graph-layout must be one of"),
        (lambda: MinibatchMode(sampler="bogus"), "bogus"),
        (lambda: OffloadMode(reorganize="yes"), "--reorganize must be true or false"),
        (lambda: GistMode(group=OffloadMode()), "a group runs FullBatchMode or MinibatchMode"),
        (lambda: GistMode(group=FullBatchMode(algo="halo", exchange="planned")),
         "a GIST group exchanges its halo point to point"),
    ]:
        with pytest.raises(ConfigError, match=words):
            make()


def test_the_settings_are_the_commands_flags_with_their_defaults():
    """Every flag of ``hpcgnn train`` is a keyword of the call or an option of a mode."""
    from hpcgnn.api import train
    from hpcgnn.cli.main import build_parser
    from hpcgnn.cli.modes import MODE_FLAGS
    from hpcgnn.config import TrainConfig
    from hpcgnn.training.modes import MODES
    from hpcgnn.training.run import RunOptions

    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    flags = {a.dest: a.default for a in action.choices["train"]._actions}
    params = inspect.signature(train).parameters
    options = {f.name for mode in MODES.values() for f in fields(mode)}
    renamed = {"gist_rescale": "rescale", "no_in_place": "in_place", "merged_buffer": "merged"}
    for name in ("grid", "replication", *MODE_FLAGS):  # a mode's option
        assert renamed.get(name, name) in options, name
        flags.pop(name)
    for name in ("help", "graph", "config", "mode"):
        flags.pop(name)
    assert set(flags) == set(params) - {"graph", "mode", "comm"}
    for name, default in flags.items():  # the parser's None: the mode's (layers, model)
        assert params[name].default == default, name
    assert {f.name for f in fields(TrainConfig)} - {"layer"} <= set(params)
    run_only = {"graph", "mode", "keep_result", "predict_out", "summary"}  # from the call
    assert {f.name for f in fields(RunOptions)} - run_only <= set(params)


def test_unknown_settings_are_pythons_errors(tmp_path):
    with pytest.raises(TypeError, match="epoch"):
        hpcgnn.train(tmp_path / "g.h5", epoch=3)


def test_import_hpcgnn_stays_light():
    code = ("import sys, hpcgnn; assert callable(hpcgnn.train); from hpcgnn import train;"
            " assert train is hpcgnn.train;"
            " print('torch' in sys.modules, 'mpi4py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "False"]
    # the training package is hpcgnn.training; importing it leaves the function alone
    import hpcgnn.training.checkpoint as ck
    from hpcgnn.training import run

    assert hpcgnn.training.checkpoint is ck and run.train is not None
    assert callable(hpcgnn.train) and not isinstance(hpcgnn.train, type(hpcgnn))


@pytest.mark.mpi
def test_comm_names_the_ranks_that_train(graph_file, world):
    from mpi4py import MPI

    path = graph_file("api-self.h5", n=32, seed=1)
    alone = hpcgnn.train(path, comm=MPI.COMM_SELF, epochs=2, hidden=4, quiet=True)
    assert alone.metrics["world_size"] == 1
    assert_same_on_all_ranks(world, alone.params_sha256, "each rank trained alone alike")


#: A researcher's layer that fails on one rank only, in training (not in the shape trace).
_FAILS_ON_ONE_RANK = """
import sys, time
from mpi4py import MPI
import hpcgnn
from hpcgnn.nn import Layer

class FailsOnRank2(Layer):
    def forward(self, g, h, w):
        if type(h).__name__ != "Shape" and MPI.COMM_WORLD.Get_rank() == 2:
            with open(sys.argv[2], "w") as f:
                f.write(repr(time.time()))
            raise RuntimeError("a failure on rank 2 only")
        z = g.propagate(h, w[0])
        return z if g.last else z.relu()

hpcgnn.train(sys.argv[1], model=FailsOnRank2, epochs=50, hidden=8, quiet=True, eval_every=0)
"""


@pytest.mark.skipif("mpi4py.MPI" in sys.modules and __import__("mpi4py.MPI").MPI.COMM_WORLD
                    .Get_size() > 1, reason="launches its own mpiexec")
def test_an_exception_on_one_rank_ends_every_rank(tmp_path):
    import shutil
    import time
    from pathlib import Path

    from tests.graphs import write_random_graph

    mpiexec = shutil.which("mpiexec", path=f"{Path(sys.executable).parent}:"
                                          f"{__import__('os').environ.get('PATH', '')}")
    if mpiexec is None:
        pytest.skip("no mpiexec")
    graph = write_random_graph(tmp_path / "g.h5", n=60, features=5, seed=2)
    script, stamp = tmp_path / "fails.py", tmp_path / "raised"
    script.write_text(_FAILS_ON_ONE_RANK)
    try:
        proc = subprocess.run([mpiexec, "-n", "4", sys.executable, str(script), str(graph),
                               str(stamp)], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("the other ranks hung after rank 2's exception")
    ended = time.time()
    assert proc.returncode != 0, proc.stderr[-2000:]
    assert "rank 2 of 4 failed; ending the job" in proc.stderr, proc.stderr[-2000:]
    assert "a failure on rank 2 only" in proc.stderr
    assert ended - float(stamp.read_text()) < 30, "the job took over 30 s to end"


def test_quiet_prints_nothing(tmp_path, capsys):
    from tests.graphs import write_random_graph

    graph = write_random_graph(tmp_path / "g.h5", n=40, features=4, seed=1)
    trained = hpcgnn.train(graph, epochs=2, hidden=4, quiet=True, eval_every=0, comm=_self())
    assert capsys.readouterr().out == ""
    device = trained.metrics["device"]
    assert device["ranks_per_host"] == 1 and device["cores_per_host"] >= 1
    assert "oversubscribed" not in device
    hpcgnn.train(graph, epochs=2, hidden=4, eval_every=0, comm=_self())
    assert "final (no dropout)" in capsys.readouterr().out


def _self():
    from mpi4py import MPI

    return MPI.COMM_SELF


def _memory_graph(seed: int = 5):
    """The same graph on every rank: built from the same seeded arrays."""
    from hpcgnn.io.memory import MemoryGraph
    from tests.graphs import random_graph_arrays

    g = random_graph_arrays(n=48, seed=seed)
    return MemoryGraph.from_arrays(
        edge_index=np.stack([g["src"], g["dst"]]), features=g["x"], labels=g["y"],
        train_mask=g["train"], val_mask=g["val"], test_mask=g["test"], name="mine",
    )


def _save_and_prepare(data, pt, out):
    from hpcgnn.prepare import convert_pyg

    torch.save(data, pt)
    convert_pyg(pt, out, show_progress=False)


@pytest.mark.mpi
@pytest.mark.parametrize("algo", ["1d", "2d"])
def test_a_graph_in_memory_trains_as_its_file(shared_tmp, world, algo):
    """A PyG graph's tensors in memory, and the file ``prepare pyg`` makes of them."""
    from hpcgnn.io.memory import MemoryGraph
    from tests.mpi import on_rank0
    from tests.prepare.test_pyg import graph_dict

    data, path = graph_dict(), shared_tmp / f"mem-{algo}.h5"
    on_rank0(world, _save_and_prepare, data, shared_tmp / f"d-{algo}.pt", path)
    graph = MemoryGraph.from_arrays(
        edge_index=data["edge_index"], features=data["x"], labels=data["y"],
        train_mask=data["train_mask"], val_mask=data["val_mask"], test_mask=data["test_mask"],
        name="mine",
    )
    settings = {**COMMON, "mode": FullBatchMode(algo=algo)}
    from_file, from_memory = hpcgnn.train(path, **settings), hpcgnn.train(graph, **settings)
    assert from_memory.params_sha256 == from_file.params_sha256
    assert from_memory.final == from_file.final
    same = {**from_memory.metrics["graph"], "name": from_file.metrics["graph"]["name"]}
    assert same == from_file.metrics["graph"]  # the content fingerprint among them
    assert from_memory.metrics["config"]["graph"] == "<mine>"
    np.testing.assert_array_equal(from_memory.predict().numpy(), from_file.predict().numpy())


@pytest.mark.mpi
def test_a_graph_in_memory_that_differs_between_ranks_is_refused_on_every_rank(world):
    graph = _memory_graph(seed=5 + (world.rank > 0))
    if world.size == 1:
        pytest.skip("one rank holds one graph")
    with pytest.raises(HpcgnnError, match=r"^<mine>: the graph in memory differs between"
                                          r" ranks \(rank 1's is not rank 0's\)"):
        hpcgnn.train(graph, **COMMON)


@pytest.mark.parametrize("name", ["minibatch", "offload", "gist"])
def test_the_modes_that_read_a_file_refuse_a_graph_in_memory(name):
    settings = {**COMMON, **RUNS[name][2]}
    with pytest.raises(ConfigError, match=r"^a graph in memory trains in FullBatchMode \(any"
                                          r" algo\); the \w+ mode reads a graph file"):
        hpcgnn.train(_memory_graph(), mode=RUNS[name][0](), **settings)
