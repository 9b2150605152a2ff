"""The device matrix: every mode and model trained on the CPU and on the cuda device.

Each entry is one ``hpcgnn train`` (or ``hpcgnn sample``) run, made twice in the same
process with ``--device cpu`` and ``--device cuda``, at 1, 2 and 4 ranks. On the emulated
GPU (``HPCGNN_EMULATE_CUDA=1``: host memory, the ``.cu`` sources built for the host) the
two runs must agree bit for bit: the same ``params_sha256`` and the same measured bytes.
On a real GPU the losses agree within float32 tolerance, the bytes are equal, and a second
GPU run gives the same ``params_sha256`` as the first (the scatter-adds are
deterministic). Marked ``gpu``: skipped where no cuda device (real or emulated) exists.

``make gpu-check`` runs this file at 1, 2 and 4 ranks and prints its rows: with
``$HPCGNN_MATRIX_OUT`` set, rank 0 appends one JSON line per entry to that file.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from hpcgnn.backend import emulation
from hpcgnn.cli.main import main
from tests.mpi import assert_all

#: Environment variable naming the JSON-lines file of the matrix's rows (rank 0 appends).
MATRIX_OUT_ENV = "HPCGNN_MATRIX_OUT"

COMMON = ["--epochs", "2", "--hidden", "8", "--dropout", "0.5", "--seed", "5", "--threads", "1",
          "--quiet", "--eval-every", "1"]
MINIBATCH = ["--mode", "minibatch", "--batch-size", "12", "--bulk", "2"]
SAGE = ["--sampler", "sage", "--fanout", "4,3"]
LADIES = ["--sampler", "ladies", "--layer-size", "16"]
CLUSTER = ["--sampler", "cluster", "--clusters", "8", "--clusters-per-batch", "2"]
OFFLOAD = ["--mode", "offload", "--chunks", "3"]
GIST = ["--mode", "gist", "--local-iters", "2", "--rounds", "2"]  # 2 rounds: as --epochs

#: name -> flags (a list, or a function of the world size giving one)
MATRIX: dict[str, object] = {
    "1d": ["--algo", "1d"],
    "1.5d": lambda p: ["--algo", "1.5d", "--replication", "2" if p % 2 == 0 else "1"],
    "2d": ["--algo", "2d"],
    "3d": lambda p: ["--algo", "3d", "--grid", {1: "1x1x1", 2: "1x1x2", 4: "1x2x2"}[p]],
    "halo-p2p": ["--algo", "halo", "--exchange", "p2p"],
    "halo-planned": ["--algo", "halo", "--exchange", "planned"],
    "offload-none": [*OFFLOAD, "--dedup", "none"],
    "offload-inter": [*OFFLOAD, "--dedup", "inter"],
    "offload-full": [*OFFLOAD, "--dedup", "full"],
    "offload-full-reorg": [*OFFLOAD, "--dedup", "full", "--reorganize"],
    "offload-full-sage": [*OFFLOAD, "--dedup", "full", "--model", "sage"],
    "offload-inter-planned": [*OFFLOAD, "--dedup", "inter", "--exchange", "planned"],
    "offload-full-reorg-planned": [
        *OFFLOAD, "--dedup", "full", "--reorganize", "--exchange", "planned",
    ],
    "sage-replicated": [*MINIBATCH, *SAGE, "--graph-layout", "replicated"],
    "sage-partitioned": [*MINIBATCH, *SAGE, "--graph-layout", "partitioned"],
    "ladies-replicated": [*MINIBATCH, *LADIES, "--graph-layout", "replicated"],
    "ladies-partitioned": [*MINIBATCH, *LADIES, "--graph-layout", "partitioned"],
    "cluster-replicated": ["--mode", "minibatch", "--bulk", "2", *CLUSTER],
    "cluster-partitioned": ["--mode", "minibatch", "--bulk", "2", *CLUSTER, "--graph-layout",
                            "partitioned"],
    "gist-1d": lambda p: [*GIST, "--subnets", str(min(p, 2)), "--algo", "1d"],
    "gist-halo": lambda p: [*GIST, "--subnets", str(min(p, 2)), "--algo", "halo"],
    "gist-sampler": lambda p: [
        *GIST, "--subnets", str(min(p, 2)), *SAGE, "--batch-size", "12",
    ],
    "gist-gat-1d": lambda p: [
        *GIST, "--subnets", str(min(p, 2)), "--algo", "1d", "--model", "gat", "--heads", "2",
        "--output-heads", "2",
    ],
    "model-sage-1d": ["--algo", "1d", "--model", "sage"],
    "model-sage-2d": ["--algo", "2d", "--model", "sage"],
    "model-gin-2d": ["--algo", "2d", "--model", "gin", "--gin-eps", "0.5"],
    "model-gat-1d": ["--algo", "1d", "--model", "gat", "--heads", "2", "--output-heads", "2"],
    "model-gat-halo": ["--algo", "halo", "--model", "gat", "--heads", "4"],
    "model-gat-3d": lambda p: ["--algo", "3d", "--grid", {1: "1x1x1", 2: "1x2x1", 4: "2x1x2"}[p],
                               "--model", "gat", "--heads", "2", "--output-heads", "2"],
    "model-gat-offload": [*OFFLOAD, "--dedup", "full", "--model", "gat", "--heads", "2",
                          "--attention-dropout", "0.3"],
    "model-gin-minibatch": [*MINIBATCH, *SAGE, "--model", "gin"],
    "model-gat-minibatch": [*MINIBATCH, *SAGE, "--model", "gat", "--heads", "2"],
    "model-gat-ladies": [*MINIBATCH, *LADIES, "--model", "gat", "--heads", "2"],
    "float64-1d": ["--algo", "1d", "--dtype", "float64"],
    "float64-halo": ["--algo", "halo", "--dtype", "float64"],
}

#: Entries whose cuda run rounds apart from the CPU's even on the emulated GPU, and why: GAT's
#: edge softmax takes ``exp`` on the device (``expf`` of the host build's libm) where the
#: CPU twin takes torch's vectorised ``exp``; both are correctly rounded to within an ulp, not
#: bit for bit. They are held to the real GPU's tolerance.
ROUNDS_APART = {"model-gat-1d", "model-gat-3d", "model-gat-halo", "model-gat-ladies",
                "model-gat-minibatch", "model-gat-offload", "gist-gat-1d"}


def flags_of(name: str, size: int) -> list[str]:
    """The ``hpcgnn train`` flags of entry ``name`` at ``size`` ranks."""
    entry = MATRIX[name]
    return list(entry(size) if callable(entry) else entry)  # type: ignore[operator]


@pytest.fixture
def matrix_graph(graph_file) -> Path:
    """The matrix's graph (90 vertices, as the params table's), written by rank 0."""
    return graph_file("matrix.h5", n=90, avg_degree=5.0, features=12, classes=3, seed=11)


def _train(world, graph: Path, out: Path, argv: list[str], device: str) -> dict:
    rc = main(["train", str(graph), *COMMON, *argv, "--device", device, "--metrics", str(out)])
    assert_all(world, rc == 0, f"hpcgnn train {' '.join(argv)} --device {device}: exit {rc}")
    world.mpi.Barrier()
    return json.loads(out.read_text())


def _row(world, name: str, docs: dict[str, dict], seconds: float, repeat: str | None) -> dict:
    """The matrix's row of one entry (rank 0 appends it to ``$HPCGNN_MATRIX_OUT``)."""
    cpu, cuda = docs["cpu"], docs["cuda"]
    losses = np.array([[e["loss"] for e in d["epochs"]] for d in (cpu, cuda)])
    rel = float(np.max(np.abs(losses[1] - losses[0]) / np.maximum(np.abs(losses[0]), 1e-12)))
    row = {
        "entry": name, "ranks": world.size, "device": cuda["device"].get("name", "?"),
        "emulated": bool(cuda["device"].get("emulated", False)),
        "same_params": cpu["params_sha256"] == cuda["params_sha256"],
        "loss_rel_diff": rel,
        "same_bytes": cpu["comm"]["measured_bytes"] == cuda["comm"]["measured_bytes"],
        "repeat_identical": None if repeat is None else repeat == cuda["params_sha256"],
        "seconds": round(seconds, 2),
    }
    _record(world, row)
    return row


def _record(world, row: dict) -> None:
    """Append ``row`` to ``$HPCGNN_MATRIX_OUT`` (rank 0; nothing when it is unset)."""
    path = os.environ.get(MATRIX_OUT_ENV)
    if path and world.rank == 0:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def check_row(row: dict) -> None:
    """The matrix's acceptance of one row (emulated: bit-identical; GPU: close, repeatable)."""
    assert row["same_bytes"], f"{row['entry']}: measured bytes differ between cpu and cuda"
    if row["emulated"] and row["entry"] in ROUNDS_APART:
        assert row["loss_rel_diff"] <= 1e-4, f"{row['entry']}: losses differ by {row}"
    elif row["emulated"]:
        assert row["same_params"], f"{row['entry']}: params_sha256 differs on the emulated GPU"
    else:
        assert row["loss_rel_diff"] <= 1e-4, f"{row['entry']}: losses differ by {row}"
        assert row["repeat_identical"], f"{row['entry']}: two GPU runs differ"


@pytest.mark.mpi
@pytest.mark.gpu
@pytest.mark.ranks(1, 2, 4)
@pytest.mark.parametrize("name", list(MATRIX))
def test_cuda_trains_like_the_cpu(name, world, shared_tmp, matrix_graph):
    t0 = time.perf_counter()
    argv = flags_of(name, world.size)
    docs = {d: _train(world, matrix_graph, shared_tmp / f"{d}.json", argv, d)
            for d in ("cpu", "cuda")}
    repeat = None
    if not docs["cuda"]["device"].get("emulated"):  # a real GPU: run it twice
        repeat = _train(world, matrix_graph, shared_tmp / "again.json", argv, "cuda")[
            "params_sha256"]
    check_row(_row(world, name, docs, time.perf_counter() - t0, repeat))
    if "sampling" in docs["cuda"]:  # minibatch: the hops were sampled on the GPU
        assert docs["cuda"]["sampling"]["device"] == "cuda"
        assert docs["cpu"]["sampling"]["device"] == "cpu"
        paths = docs["cuda"]["comm"].get("paths", {})
        # the partitioned layout's row fetch and combine carry device buffers
        assert all(p != "direct" for c, p in paths.items() if c.startswith("sample_")), paths


@pytest.mark.mpi
@pytest.mark.gpu
@pytest.mark.ranks(1, 2, 4)
def test_checkpoint_and_resume_on_cuda(world, shared_tmp, matrix_graph):
    """Train 2 epochs with a checkpoint, resume it for a third: as one 3-epoch run."""
    t0 = time.perf_counter()
    docs = {}
    for device in ("cpu", "cuda"):
        ckpt = shared_tmp / f"ckpt-{device}"
        _train(world, matrix_graph, shared_tmp / f"{device}-ckpt.json",
               ["--algo", "halo", "--checkpoint-dir", str(ckpt), "--checkpoint-every", "2"], device)
        docs[device] = _train(world, matrix_graph, shared_tmp / f"{device}-resumed.json",
                              ["--algo", "halo", "--epochs", "3", "--resume", str(ckpt)], device)
    whole = _train(world, matrix_graph, shared_tmp / "whole.json",
                   ["--algo", "halo", "--epochs", "3"], "cuda")
    row = _row(world, "checkpoint-resume", docs, time.perf_counter() - t0, None)
    if row["emulated"]:
        assert whole["params_sha256"] == docs["cuda"]["params_sha256"], "resume != one run"
    check_row({**row, "repeat_identical": True})


@pytest.mark.mpi
@pytest.mark.gpu
@pytest.mark.ranks(1, 2, 4)
@pytest.mark.parametrize("layout", ["replicated", "partitioned"])
@pytest.mark.parametrize("sampler", ["sage", "ladies", "cluster"])
def test_sample_writes_the_same_file_on_cuda(world, shared_tmp, matrix_graph, layout, sampler):
    """``hpcgnn sample`` on the GPU (the hops sampled there) writes the CPU's samples."""
    from hpcgnn.sampling.sample_file import read_samples

    t0 = time.perf_counter()
    digests = {}
    for device in ("cpu", "cuda"):
        out = shared_tmp / f"s-{device}.h5"
        flags = {"sage": [*SAGE, "--batch-size", "12"], "ladies": [*LADIES, "--batch-size", "12"],
                 "cluster": CLUSTER}[sampler]
        rc = main(["sample", str(matrix_graph), *flags, "--bulk", "2", "--graph-layout", layout,
                   "--device", device, "--out", str(out), "--quiet"])
        assert_all(world, rc == 0, f"hpcgnn sample --device {device}: exit {rc}")
        world.mpi.Barrier()
        _, batches = read_samples(out)
        h = hashlib.sha256()
        for b in batches:
            h.update(np.asarray(b.seeds).tobytes())
            for hop in b.hops:
                for a in (hop.rows, hop.cols, hop.indptr, hop.indices, hop.values):
                    h.update(np.asarray(a).tobytes())
        digests[device] = h.hexdigest()
    _record(world, {
        "entry": f"sample-{sampler}-{layout}", "ranks": world.size,
        "emulated": emulation.requested(),
        "same_params": digests["cpu"] == digests["cuda"], "same_bytes": True,
        "loss_rel_diff": 0.0, "repeat_identical": None,
        "seconds": round(time.perf_counter() - t0, 2),
    })
    assert digests["cpu"] == digests["cuda"], "the samples differ between cpu and cuda"


@pytest.mark.mpi
@pytest.mark.gpu
@pytest.mark.ranks(4)
@pytest.mark.parametrize("name", ["halo-p2p", "offload-none", "offload-inter"])
def test_kernel_thread_order_changes_no_result(name, world, shared_tmp, matrix_graph):
    """The emulated GPU's kernels in reversed and shuffled thread order: the same weights.

    The halo and offload gradient pushes add repeated targets (a row sent to several
    peers); with atomics their order, so the last bits, would follow the threads.
    """
    from hpcgnn.kernels import host_build

    if not emulation.requested():
        pytest.skip("thread orders are a setting of the emulated GPU's host builds")
    shas = set()
    for order in ("reversed", "shuffled"):
        settings = host_build.LaunchSettings(order=order, seed=7, max_blocks=3)
        with host_build.launch_settings(settings):
            doc = _train(world, matrix_graph, shared_tmp / f"{order}.json", flags_of(name, 4),
                         "cuda")
        shas.add(doc["params_sha256"])
    shas.add(_train(world, matrix_graph, shared_tmp / "natural.json", flags_of(name, 4),
                    "cuda")["params_sha256"])
    assert len(shas) == 1, f"{name}: the thread order changed the result: {shas}"


@pytest.mark.mpi
@pytest.mark.gpu
@pytest.mark.ranks(2, 4)
def test_cuda_aware_and_staged_wires_train_alike(world, shared_tmp, matrix_graph, monkeypatch):
    """Device buffers handed to MPI as they are, or staged through pinned host buffers."""
    from hpcgnn.comm.wire import library_cuda_aware

    if not emulation.requested() and not library_cuda_aware():
        pytest.skip("this MPI library takes no device buffers (the emulated GPU's host memory "
                    "it does)")
    docs = {}
    for aware in ("1", "0"):
        monkeypatch.setenv("HPCGNN_CUDA_AWARE_MPI", aware)
        docs[aware] = _train(world, matrix_graph, shared_tmp / f"aware{aware}.json",
                             flags_of("halo-planned", world.size), "cuda")
    assert docs["1"]["comm"]["path"] == "cuda-aware" and docs["0"]["comm"]["path"] == "staged"
    assert docs["1"]["params_sha256"] == docs["0"]["params_sha256"]
    assert docs["1"]["comm"]["measured_bytes"] == docs["0"]["comm"]["measured_bytes"]
