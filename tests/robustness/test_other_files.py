"""A graph file that points at another file is refused without that file ever being opened.

The other file is a named pipe: opening it for reading blocks until someone writes, so a
command that followed the external storage, external link or virtual dataset would hang
here (pytest-timeout ends it) instead of failing with the reader's one line.
"""

import os
import shutil

import h5py
import pytest

from tests.graphs import write_random_graph
from tests.mpi import on_rank0
from tests.robustness.harness import expect_error, expect_error_untouched

TRAIN = ["--epochs", "1", "--hidden", "4", "--quiet", "--threads", "1"]


def _external_storage(h5: h5py.File, other: str) -> None:
    shape, dtype = h5["features"].shape, h5["features"].dtype
    del h5["features"]
    nbytes = shape[0] * shape[1] * dtype.itemsize
    h5.create_dataset("features", shape=shape, dtype=dtype, external=[(other, 0, nbytes)])


def _external_link(h5: h5py.File, other: str) -> None:
    h5["labels_link"] = h5py.ExternalLink(other, "/features")


def _virtual(h5: h5py.File, other: str) -> None:
    shape, dtype = h5["features"].shape, h5["features"].dtype
    layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
    layout[:] = h5py.VirtualSource(other, "features", shape=shape)
    del h5["features"]
    h5.create_virtual_dataset("features", layout)


#: kind -> (how the file reaches the other one, the reader's words)
REACHES = {
    "external-storage": (_external_storage, "uses external storage"),
    "external-link": (_external_link, "is an external link"),
    "virtual-dataset": (_virtual, "is virtual"),
}


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", sorted(REACHES))
@pytest.mark.parametrize(
    "argv",
    [["train", *TRAIN, "--metrics", "{out}/m.json"],
     ["partition", "--parts", "2", "--out", "{out}/p.h5"],
     ["sample", "--batch-size", "4", "--fanout", "2", "--quiet", "--out", "{out}/s.h5"]],
    ids=["train", "partition", "sample"],
)
def test_a_file_reaching_another_is_refused_unread(world, shared_tmp, capfd, kind, argv):
    out, away = shared_tmp / "out", shared_tmp / "away"
    path, other = out / f"{kind}.h5", away / "secret"
    reach, words = REACHES[kind]

    def write():
        out.mkdir(exist_ok=True)
        away.mkdir(exist_ok=True)
        good = write_random_graph(away / "good.h5", n=40, seed=5)
        shutil.copy(good, path)
        if not other.exists():
            os.mkfifo(other)
        with h5py.File(path, "r+") as h5:
            reach(h5, str(other))

    on_rank0(world, write)
    command, *flags = (a.format(out=out) for a in argv)
    expect_error_untouched(world, capfd, [out], [command, path, *flags], words)


def _fifo(path):
    import os

    os.mkfifo(path)


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["fifo", "device", "deep", "digits", "latin1"])
def test_json_inputs_that_would_hang_or_crash_are_one_line(world, shared_tmp, capfd, kind):
    path = shared_tmp / f"{kind}.json"
    writers = {
        "fifo": lambda: _fifo(path),
        "deep": lambda: path.write_text("[" * 100000 + "]" * 100000),
        "digits": lambda: path.write_text('{"ranks": 1' + "0" * 5000 + "}"),
        "latin1": lambda: path.write_bytes(b'{"name": "\xe9"}'),
    }
    if kind == "device":
        path = "/dev/zero"
    else:
        on_rank0(world, writers[kind])
    graph = shared_tmp / "g.h5"
    on_rank0(world, write_random_graph, graph, n=40, seed=1)
    words = {"fifo": "not a regular file", "device": "not a regular file",
             "deep": "nested too deeply", "digits": "digits", "latin1": "not UTF-8"}[kind]
    for argv in (["train", graph, "--algo", "halo", "--exchange", "planned", "--topology", path,
                  "--epochs", "1", "--quiet"],
                 ["model", "--shape", "1000,8000,16,4", "--procs", "4", "--machine",
                  path if str(path).endswith(".json") else f"{kind}.json"]):
        if argv[0] == "model" and kind == "device":
            continue
        expect_error(world, capfd, argv, words)
