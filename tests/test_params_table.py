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
table is checked against :data:`LEGACY` (recorded before fingerprints, on a machine whose
fingerprint was not kept); where that fails too, record this machine's table *before*
changing any code (``python -m tests.test_params_table`` prints the fingerprint; the
failures print each run's hash) and add it to :data:`RECORDED` in a commit of its own.
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

#: params_sha256 of each run on the machine of the first recordings (fingerprint unknown),
#: recorded on main at 65a9e42 (before the restructure);
#: sage and ladies re-recorded by issue 13's global loss normalisation of minibatch steps
#: (45 training vertices in batches of 12: the last step pairs a 9-seed batch with a
#: 12-seed one, whose seeds now weigh alike; steps of equal batches are bit-identical).
LEGACY = {
    "1d-p1": "890466a66fd76dbfbafa839f2213cb2ad6fe84fcbb2eedc834477f1aca3e1a8b",
    "1d-p4": "5146ac316d7e2e86230dfb50936a956688550a55cf56471fab3c497e7980a205",
    "1.5d-2x2": "88f65d89af797e9f031e8abc26d63a98ed629f5fa753931afd03cc0f1b94025d",
    "2d-2x2": "faeab983f7e4369e40193366710fd91425abfe81701c8d4931a84d283c6deef3",
    "3d-2x2x2": "26d554fb45ac4c74a80d125118047d9cbd40977adcac3e97778c2bf82240f6f2",
    "1.5d-directed-2x2": "ad274b24c78ce847d4a38ac567c79f02b46c3081a3988ba17b49cd2092332936",
    "2d-directed-1x3": "fa0345d52519efbc29f6207b29d1414fa04fc4eb300061b3bc61673148a1c84a",
    "halo-p2p": "54b55fe2bb1778cc7a29a6ca15818a4c6a70e91ac017bd6dcc1e46bcafc15b92",
    "halo-planned": "8eecc0b3da28ea92c1a508f71c42a9f7d22afe6cf3f88b87a4f2ac589ddfb459",
    "offload-none": "003b26929bf1795ba6b265ae0ba3080d5ee1cd23b9972f9e9ddd8ddcff7d49aa",
    "offload-full-reorg": "9969db3de566ce7d5177c34aaed1d04dfdacbcd2825c22206a5262fa2ae3818c",
}


#: LEGACY has no sage and ladies: issue 24 made the minibatch SpMM one code path on every
#: device (torch CSR instead of SciPy on the host), which changed both, after the machine
#: of LEGACY was gone; a session on that machine records them again (and the rows added
#: for issue 21, which LEGACY never had).

#: params_sha256 of each run by numerics fingerprint (see the module's docstring).
#: dc5a67f88deb9538: an x86-64 machine with AVX-512 (MKL's AVX-512 GEMM), recorded on main
#: at 76f74d6 with the code of LEGACY's last re-recording (only the machine differs); sage
#: and ladies re-recorded for issue 24's one-path minibatch SpMM (torch CSR on the host too);
#: gist-m2, gist-sampler-sage, sage-1d and sage-2d-2x2 recorded at issue 24's end, before
#: issue 21's restructure.
RECORDED: dict[str, dict[str, str]] = {
    "dc5a67f88deb9538": {
        "1.5d-2x2": "761d3ba5256f96d3c594ab3efcd0645aa0a592c14ef48a6b496a595117143357",
        "1.5d-directed-2x2": "c5c6e5019761f3e0bdc9cb61bf4b7c7d351a14695f597cc988105067b7849b20",
        "1d-p1": "56aedbd927ccc7b4e71625bc232e5419154b51815530bbbcf4516046b460f2f8",
        "1d-p4": "ace92612b70a0d420d3ef122e0b44a4c28089ed6a11ae95b67d758ca26aa7e8d",
        "2d-2x2": "80e6d4147dcfd83181298f20630f34147520b6b48eabd5b932b261fdc064ae8d",
        "2d-directed-1x3": "d114bfae56c02bd3f5859786f2b5d53e6f4027a98b0c350c75524fa0c2dde10b",
        "3d-2x2x2": "6380c81bf420dee55767379cf0d8972e9c06535f558c5e76e9e188844409f4d3",
        "halo-p2p": "8d0dfcc5e2ad852af77e2b391ac276786a99637b16e8944d0f6e6a91158c6f92",
        "halo-planned": "c6c851b310aac992ac1832cd47e504d19abf335a865671c139817f0a9690a6aa",
        "gist-m2": "14bd5e54fd5e467d2b433179cbaa51c13040c863936a7c070f44f1664cafb1aa",
        "gist-sampler-sage": "da5491ddb0089493ce327e45916b9cec1dbf35e0f018e59ee33828f72266f778",
        "ladies": "fbc235b57940b6c419a8b764b19f2290325d1f8abbeba9f43b60880b230b23d8",
        "offload-full-reorg": "69447dd59ab86b4d8f17f998dbf608345a6069ab6c7504f9fecb39843d1c978a",
        "offload-none": "cb5e96494853b79864ac2ab4189be0e08d9a72892b69be79b6589e474a5f3e37",
        "sage": "49a503c2cda71be40f32f4cd65b6db03fa05aec5eda292d128d08d271d9d06bc",
        "sage-1d": "7a68b998f0623bc101e9af4b6f0a596604e5de9bbf11b95dade3279f3e209263",
        "sage-2d-2x2": "6729cbc24e9241444898fb3c72979609fd17f8aa5fe81dbe9ba00943c3de4512",
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
    """This machine's fingerprint and its table (:data:`LEGACY` where none is recorded)."""
    fp = numerics_fingerprint()
    return fp, RECORDED.get(fp, LEGACY)


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
    which = "legacy table" if table is LEGACY else f"table of fingerprint {fp}"
    assert got == expected, (
        f"{name}: params_sha256 {got} != recorded {expected} ({which}; this machine's "
        f"numerics fingerprint is {fp})"
    )


if __name__ == "__main__":
    print(numerics_fingerprint())
