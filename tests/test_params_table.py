"""The restructure gate: fixed runs whose ``params_sha256`` must never change by accident.

Each entry is one ``hpcgnn train`` run (dropout 0.5) at a fixed rank count; the table
holds the SHA-256 of its final weights as recorded before the architecture restructure
(issue 9). A change that claims to change no result keeps every hash; a change that
changes results on purpose (e.g. a new dropout stream) re-records the table in its own
commit and says so. Each run executes under ``mpiexec -n RANKS`` only (skipped at other
sizes); ``make test`` runs the suite at 1, 2, 3, 4 and this file at 8 ranks.

The hashes are bit-exact, so they depend on the machine's floating-point kernels as well as
on our code: MKL and ATen pick their GEMM and reduction code paths by the CPU (AVX2,
AVX-512, ...), and those round differently. The table is therefore kept per *numerics
fingerprint* (:func:`numerics_fingerprint`: a hash of small GEMMs, reductions and
log-softmaxes of the table's shapes on this machine). A machine whose fingerprint has no
table skips the runs: record its table *before* changing any code
(``python -m tests.test_params_table`` prints the fingerprint; a run against a placeholder
hash prints its own) and add it to :data:`RECORDED` in a commit of its own.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch

from hpcgnn.cli.main import main
from tests.graphs import write_random_graph
from tests.mpi import assert_all

COMMON = ["--epochs", "3", "--hidden", "8", "--dropout", "0.5", "--seed", "3", "--threads", "1",
          "--quiet", "--eval-every", "0"]
MINIBATCH = ["--mode", "minibatch", "--batch-size", "12", "--bulk", "2"]

#: name -> (ranks, directed graph, flags)
TABLE: dict[str, tuple[int, bool, list[str]]] = {
    "1d-p1": (1, False, ["--algo", "1d"]),
    "1d-p4": (4, False, ["--algo", "1d"]),
    "1.5d-2x2": (4, False, ["--algo", "1.5d", "--replication", "2"]),
    "2d-2x2": (4, False, ["--algo", "2d"]),
    "3d-2x2x2": (8, False, ["--algo", "3d", "--grid", "2x2x2"]),
    "1.5d-directed-2x2": (4, True, ["--algo", "1.5d", "--replication", "2"]),
    "2d-directed-1x3": (3, True, ["--algo", "2d", "--grid", "1x3"]),
    "halo-p2p": (4, False, ["--algo", "halo", "--exchange", "p2p"]),
    "halo-planned": (4, False, ["--algo", "halo", "--exchange", "planned"]),
    "offload-none": (4, False, ["--mode", "offload", "--chunks", "3", "--dedup", "none"]),
    "offload-full-reorg": (
        4, False, ["--mode", "offload", "--chunks", "3", "--dedup", "full", "--reorganize"]
    ),
    "sage": (4, False, [*MINIBATCH, "--sampler", "sage", "--fanout", "4,3"]),
    "ladies": (4, False, [*MINIBATCH, "--sampler", "ladies", "--layer-size", "16"]),
    # added before issue 21's restructure (modes and layer kinds as objects)
    "gist-m2": (4, False, ["--mode", "gist", "--subnets", "2", "--local-iters", "2"]),
    "gist-sampler-sage": (4, False, [
        "--mode", "gist", "--subnets", "2", "--local-iters", "2", "--sampler", "sage",
        "--fanout", "4,3", "--batch-size", "12",
    ]),
    "sage-1d": (4, False, ["--algo", "1d", "--model", "sage"]),
    "sage-2d-2x2": (4, False, ["--algo", "2d", "--model", "sage"]),
}

#: params_sha256 of each run by numerics fingerprint (see the module's docstring).
#: dc5a67f88deb9538: an x86-64 machine with AVX-512 (MKL's AVX-512 GEMM). Every row
#: re-recorded for issue 26's dropout stream (an entry hash per mask entry instead of SFC64
#: chunks: a sparse matrix's nonzeros draw the dense mask's decisions alone, a GPU draws
#: every entry in parallel); before it the table was last checked unchanged by issue 21's
#: restructure (main at 63f7f87). Tables of other machines, including the one recorded
#: before fingerprints existed, were of the old stream and are gone: a machine without a
#: table skips these runs until a session records its table.
RECORDED: dict[str, dict[str, str]] = {
    "dc5a67f88deb9538": {
        "1.5d-2x2": "54e3e42d3baa1e587fd103b0107bc9bcf88c5a348765d72151a3dab51ccbf33e",
        "1.5d-directed-2x2": "823aadae83320cdcfaf3d85f8be49c2fc47acec283c95dc24846f98a4c2abd3f",
        "1d-p1": "89a731e6e16d67f0452a2821dd42fedb52b5d7d2f2bb75eb9da0953b9ef5fe72",
        "1d-p4": "745366ff4180f30e99837ce79c68962132e4e0332a1f1f4b76ad4fff2d5a1d7b",
        "2d-2x2": "e53e1bf8b07e279a9f5f09d0a385f6860de6c61db7d86488c65b8d41b13cf009",
        "2d-directed-1x3": "8ac393a6a20ab279237629450b3164893b899363c39cf6526d858a0a2f745664",
        "3d-2x2x2": "e6bfdc3bc4ed3cffede1d7910cee67e22500ae630bd37f835da4457ab7df7298",
        "gist-m2": "ab793c8b5de55c90a71340cd97e1e9f6dbc5320e4187f4c5b4dae4770784d812",
        "gist-sampler-sage": "499bc642a8acc106bc2d77b9ca91dea8d30b76075319daed4a634ad625199438",
        "halo-p2p": "a6f79c02d6f58f3ff619d1f62cf5a725b41aeb880186ba6fb661b7328b2282b5",
        "halo-planned": "c6c05fc021b0bd9514709877053411f9766e10ce2173f36f778f7a15bebdca0e",
        "ladies": "eac45665ffc4243c199ea3dcf6cb5682a204e811c92c5ec029b81bc463c679d4",
        "offload-full-reorg": "679466cf6b65a4da493bd6ad097e1b0a731648b243bad23072d54cb9125cbc69",
        "offload-none": "4246efbb153a020f532952c8325ef696956179a5e5c832362a8fb3b90745284b",
        "sage": "ddf6f2f77bdfee242b5e823c607ec70ee9e1faefcdce3d5840d9f2f010bcda09",
        "sage-1d": "353c5c479ba843eddb3d551e1986bfb69eda7afd8e34d9d528fe964885c8b546",
        "sage-2d-2x2": "16e7ae081d7442412cb02a6e05977753030e612f0a638bd598149e5086f198b3",
    },
}


def numerics_fingerprint() -> str:
    """A hash of the machine's floating-point kernels at the table's shapes (16 hex digits).

    GEMMs (plain and transposed operands), column sums and row log-softmaxes of fixed
    float32 and float64 matrices: the operations whose rounding differs between CPU code
    paths (MKL's and ATen's choice by instruction set).
    """
    rng = np.random.default_rng(7)
    h = hashlib.sha256()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the table's runs (--threads 1)
    try:
        _hash_kernels(rng, h)
    finally:
        torch.set_num_threads(threads)
    return h.hexdigest()[:16]


def _hash_kernels(rng: np.random.Generator, h) -> None:
    for dtype in (torch.float32, torch.float64):
        for m, k, n in ((90, 12, 8), (90, 8, 3), (12, 90, 8), (8, 90, 3), (23, 12, 8), (45, 8, 8)):
            a = torch.from_numpy(rng.standard_normal((m, k))).to(dtype)
            b = torch.from_numpy(rng.standard_normal((k, n))).to(dtype)
            for t in (a @ b, a.T.contiguous().T @ b, torch.log_softmax(a, 1), a.sum(0)):
                h.update(t.numpy().tobytes())


def expected_table() -> tuple[str, dict[str, str]]:
    """This machine's fingerprint and its table (empty where none is recorded)."""
    fp = numerics_fingerprint()
    return fp, RECORDED.get(fp, {})


def run_entry(name: str, world, shared_tmp) -> str:
    """Run one table entry on ``world`` and return its ``params_sha256`` (every rank)."""
    _, directed, flags = TABLE[name]
    graph = shared_tmp / f"table-{'d' if directed else 'u'}.h5"
    if world.rank == 0:
        write_random_graph(graph, n=90, avg_degree=5.0, features=12, classes=3,
                           directed=directed, seed=11)
    world.mpi.Barrier()
    out = shared_tmp / f"{name}.json"
    rc = main(["train", str(graph), *COMMON, *flags, "--metrics", str(out)])
    assert_all(world, rc == 0, f"{name}: hpcgnn train exited {rc}")
    world.mpi.Barrier()
    return json.loads(out.read_text())["params_sha256"]


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(TABLE))
def test_params_sha256_unchanged(name, world, shared_tmp):
    ranks, _, _ = TABLE[name]
    if world.size != ranks:
        pytest.skip(f"{name} runs at {ranks} ranks")
    fp, table = expected_table()
    if name not in table:
        pytest.skip(f"{name}: no hash recorded for numerics fingerprint {fp}")
    expected = table[name]
    got = run_entry(name, world, shared_tmp)
    assert got == expected, (
        f"{name}: params_sha256 {got} != recorded {expected} (table of this machine's "
        f"numerics fingerprint {fp})"
    )


if __name__ == "__main__":
    print(numerics_fingerprint())
