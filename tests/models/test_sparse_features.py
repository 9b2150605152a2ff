"""Sparse input features (``--sparse-features``) train as the dense ones in every mode, at
any rank count and on uneven grids: the same loss trajectory to float rounding; minibatch
fetches move the nonzeros, offload loads rows of ``X W``, and the cost models predict the
bytes of both exactly."""

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
    "gin-2d": ["--algo", "2d", "--model", "gin", "--gin-eps", "0.5"],
    "gin-halo": ["--algo", "halo", "--model", "gin"],
    "gat-1d": ["--algo", "1d", "--model", "gat", "--heads", "2"],
    "gat-2d": ["--algo", "2d", "--model", "gat", "--heads", "2"],
    "gat-halo": ["--algo", "halo", "--model", "gat", "--heads", "2", "--output-heads", "2"],
    "offload-gin": ["--mode", "offload", "--chunks", "3", "--model", "gin"],
    "gist": ["--mode", "gist", "--subnets", "1", "--local-iters", "2", "--rounds", "4"],
    "minibatch-sage": ["--mode", "minibatch", "--batch-size", "8"],
    "minibatch-gin": ["--mode", "minibatch", "--batch-size", "8", "--model", "gin"],
    "minibatch-gat": ["--mode", "minibatch", "--batch-size", "8", "--model", "gat", "--heads",
                      "2"],
    "minibatch-ladies": ["--mode", "minibatch", "--sampler", "ladies", "--layer-size", "20,20",
                         "--batch-size", "8"],
    "minibatch-partitioned": ["--mode", "minibatch", "--graph-layout", "partitioned",
                              "--batch-size", "8", "--replication", "1"],
    "offload": ["--mode", "offload", "--chunks", "3"],
    "offload-sage-recompute": ["--mode", "offload", "--model", "sage", "--device-memory", "0",
                               "--layers", "3"],
    "offload-inter-planned": ["--mode", "offload", "--dedup", "inter", "--exchange", "planned",
                              "--reorganize"],
    "offload-none-sage": ["--mode", "offload", "--dedup", "none", "--model", "sage"],
    "gist-minibatch": ["--mode", "gist", "--subnets", "1", "--local-iters", "2", "--sampler",
                       "sage", "--batch-size", "8", "--rounds", "4"],
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
    comm = {s: d["comm"] for s, d in docs.items()}
    if name.startswith(("minibatch", "offload")):  # every category predicted = measured
        for c in comm.values():
            cats = set(c["predicted_bytes"]) | set(c["measured_bytes"])
            assert all(c["predicted_bytes"].get(k, 0) == c["measured_bytes"].get(k, 0)
                       for k in cats), c
    if name.startswith("minibatch") and world.size > 1:  # the fetch moves the nonzeros
        fetched = {s: c["measured_bytes"]["feature_fetch"] for s, c in comm.items()}
        assert fetched["on"] < fetched["off"], fetched
    if name.startswith("offload"):  # the first layer loads X W, not X
        loaded = {s: c["measured_bytes"].get("offload_h2d", 0) for s, c in comm.items()}
        assert loaded["on"] < loaded["off"], loaded


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
