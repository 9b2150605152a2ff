"""Sparse input features (``--sparse-features``) train as the dense ones in every mode that
takes them, at any rank count and on uneven grids: the same loss trajectory to float
rounding; minibatch fetches move the nonzeros and the cost model predicts their bytes."""

import json

import numpy as np
import pytest

from hpcgnn.cli.main import main
from tests.mpi import assert_all

#: name -> flags; each runs at every rank count the grid allows.
RUNS = {
    "1d": ["--algo", "1d"],
    "1.5d": ["--algo", "1.5d"],
    "2d": ["--algo", "2d"],
    "3d": ["--algo", "3d"],
    "halo-p2p": ["--algo", "halo", "--exchange", "p2p"],
    "halo-planned": ["--algo", "halo", "--exchange", "planned"],
    "sage-2d": ["--algo", "2d", "--model", "sage"],
    "gist": ["--mode", "gist", "--subnets", "1", "--local-iters", "2"],
    "minibatch-sage": ["--mode", "minibatch", "--batch-size", "8"],
    "minibatch-ladies": ["--mode", "minibatch", "--sampler", "ladies", "--layer-size", "20,20",
                         "--batch-size", "8"],
    "minibatch-partitioned": ["--mode", "minibatch", "--graph-layout", "partitioned",
                              "--batch-size", "8", "--replication", "1"],
    "gist-minibatch": ["--mode", "gist", "--subnets", "1", "--local-iters", "2", "--sampler",
                       "sage", "--batch-size", "8"],
}


def train(path, out, flags):
    return main(["train", str(path), "--epochs", "4", "--hidden", "8", "--quiet", "--seed", "2",
                 "--eval-every", "0", "--metrics", str(out), *flags])


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(RUNS))
def test_sparse_and_dense_features_train_alike(graph_file, shared_tmp, world, name):
    flags = RUNS[name]
    if name == "3d" and world.size not in (1, 8):
        flags = [*flags, "--grid", f"1x{world.size}x1"]  # uneven 3D grids at 2-4 ranks
    if name == "gist" and world.size % 2 == 0:
        flags = [*flags, "--subnets", "2"]  # sub-networks of the hidden layer
    path = graph_file("sparse.h5", n=70, features=30, feature_density=0.1, seed=3)
    docs = {}
    for setting in ("off", "on"):
        out = shared_tmp / f"{name}-{setting}.json"
        rc = train(path, out, [*flags, "--sparse-features", setting])
        assert_all(world, rc == 0, f"{name} --sparse-features {setting}: exit {rc}")
        docs[setting] = json.loads(out.read_text())
    losses = {s: [e["loss"] for e in d["epochs"]] for s, d in docs.items()}
    assert np.allclose(losses["on"], losses["off"], rtol=1e-5, atol=1e-6), losses
    for key in ("loss", "train_acc", "val_acc", "test_acc"):
        assert docs["on"]["final"][key] == pytest.approx(docs["off"]["final"][key], abs=1e-4)
    assert docs["on"]["config"]["sparse_features"] == "on"
    if not name.startswith("gist"):  # GIST reports its own sections
        assert docs["on"]["features"]["sparse"] and not docs["off"]["features"]["sparse"]
    if name.startswith("minibatch"):  # the fetch's bytes: predicted = measured, and fewer
        comm = {s: d["comm"] for s, d in docs.items()}
        for c in comm.values():
            assert c["predicted_bytes"] == c["measured_bytes"], c
        if world.size > 1:
            fetched = {s: c["measured_bytes"]["feature_fetch"] for s, c in comm.items()}
            assert fetched["on"] < fetched["off"], fetched


@pytest.mark.mpi
def test_offload_refuses_it_in_one_line(graph_file, world, capsys):
    path = graph_file("dense.h5", n=40)
    rc = main(["train", str(path), "--epochs", "1", "--quiet", "--mode", "offload",
               "--sparse-features"])
    err = capsys.readouterr().err.strip().splitlines()
    assert_all(world, rc != 0 and len(err) == 1 and "--sparse-features on" in err[0], err)


@pytest.mark.mpi
@pytest.mark.parametrize("algo", ["1d", "2d", "halo"])
def test_a_file_with_csr_features_trains_as_the_dense_file(shared_tmp, world, algo):
    from tests.graphs import write_random_graph
    from tests.mpi import on_rank0

    kw = dict(n=70, features=30, feature_density=0.1, seed=3)
    paths = {layout: shared_tmp / f"{layout}-{algo}.h5" for layout in ("dense", "csr")}
    for layout, path in paths.items():
        on_rank0(world, write_random_graph, path, sparse_features=layout == "csr", **kw)
    digests = {}
    for layout, path in paths.items():
        out = shared_tmp / f"file-{layout}-{algo}.json"
        assert_all(world, train(path, out, ["--algo", algo]) == 0)
        digests[layout] = json.loads(out.read_text())["params_sha256"]
    assert digests["csr"] == digests["dense"]  # the same blocks, read either way
