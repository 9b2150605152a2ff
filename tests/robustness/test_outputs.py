"""Outputs: never written through a symlink; a full disk or a kill is one line, no leftovers.

The full-disk cases run ``hpcgnn`` in a subprocess under a file-size limit
(``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored), so every write past the limit fails with
``EFBIG`` as a full disk fails with ``ENOSPC``; at any number of ranks, in process, the
failure is injected where HDF5 reports it. The kill cases send SIGTERM or SIGINT to a
running ``prepare`` once its temporary files exist.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest

from hpcgnn.cli.common import launched_by_mpi
from tests.graphs import write_random_graph
from tests.mpi import assert_all, on_rank0
from tests.robustness.harness import PREFIX, Snapshot, expect_error_untouched, run_cli

ROOT = Path(__file__).resolve().parents[2]
serial = pytest.mark.skipif(launched_by_mpi(), reason="runs hpcgnn in a subprocess")
COMMANDS = ("prepare", "partition", "sample")


def argv_of(command: str, graph: Path, out: Path, spill: Path) -> list:
    """A small run of ``command`` reading ``graph`` and writing ``out``."""
    return {
        "prepare": ["prepare", "synthetic", "--nodes", "300", "--features", "64", "--out", out,
                    "--quiet", "--tmpdir", spill],
        "partition": ["partition", graph, "--parts", "2", "--method", "random", "--out", out,
                      "--quiet"],
        "sample": ["sample", graph, "--fanout", "3", "--batch-size", "8", "--out", out, "--quiet"],
        "train": ["train", graph, "--epochs", "1", "--hidden", "4", "--metrics", out, "--quiet"],
    }[command]


def _plant(out: Path, victim: Path, kind: str) -> None:
    """Make ``out`` a symlink to ``victim``, a directory, or a named pipe (a special file like
    a device node: replacing it, or opening it for writing, would be the harm)."""
    victim.write_text("precious")
    out.parent.mkdir(exist_ok=True)
    if kind == "symlink":
        out.symlink_to(victim)
    elif kind == "special":
        os.mkfifo(out)
    else:
        out.mkdir()


@pytest.mark.mpi
@pytest.mark.parametrize("command", COMMANDS)
def test_a_link_at_the_old_temporary_name_is_ignored(command, graph_file, shared_tmp, world,
                                                     capfd):
    graph = graph_file(n=40, seed=3)
    out, victim = shared_tmp / "out" / "o.h5", shared_tmp / "victim"
    on_rank0(world, _plant, out.parent / "o.h5.partial", victim, "symlink")
    rc, _, err = run_cli(world, capfd, argv_of(command, graph, out, shared_tmp))
    assert_all(world, rc == 0, err[-2000:])
    assert victim.read_text() == "precious" and (out.parent / "o.h5.partial").is_symlink()
    assert sorted(p.name for p in out.parent.iterdir()) == ["o.h5", "o.h5.partial"]
    assert not out.is_symlink()


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["symlink", "directory", "special"])
@pytest.mark.parametrize("command", [*COMMANDS, "train"])
def test_an_output_that_is_not_a_regular_file_is_refused(command, kind, graph_file, shared_tmp,
                                                         world, capfd):
    graph = graph_file(n=40, seed=3)
    out, victim = shared_tmp / "o.h5", shared_tmp / "victim"
    on_rank0(world, _plant, out, victim, kind)
    words = [] if kind == "directory" else ["not a regular file"]
    flag = "--metrics" if command == "train" else "--out"
    expect_error_untouched(
        world, capfd, [shared_tmp], argv_of(command, graph, out, shared_tmp), f"{flag} {out}",
        *words,
    )
    assert victim.read_text() == "precious"


# Python code run as ``python -c``: initialise MPI (its shared-memory files need room),
# then impose the file-size limit and run hpcgnn.
_LIMITED = """
import resource, signal, sys
from mpi4py import MPI
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]),) * 2)
from hpcgnn.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return dict(os.environ, PYTHONPATH=path)


def _tree(root: Path) -> list[str]:
    """Every path under ``root``, directories included (a snapshot sees only files)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An input graph, an output holding a previous good file, and a spill directory."""
    graph = write_random_graph(tmp_path / "in" / "g.h5", n=80, seed=4)
    out = tmp_path / "out" / "o.h5"
    out.parent.mkdir()
    out.write_bytes(b"previous good output")
    (out.parent / "spill").mkdir()
    return graph, out, out.parent / "spill"


@serial
@pytest.mark.parametrize(("command", "limit", "failing"), [
    ("prepare", 0, "temporary edge files in"),  # the edge spill fills the disk
    ("prepare", 40_000, "--out"),  # the graph file does
    ("partition", 20_000, "--out"),
    ("sample", 0, "--out"),
])
def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, command, limit, failing):
    graph, out, spill = _inputs(tmp_path)
    snap, tree = Snapshot(tmp_path), _tree(tmp_path)
    argv = [str(a) for a in argv_of(command, graph, out, spill)]
    proc = subprocess.run([sys.executable, "-c", _LIMITED, str(limit), *argv], env=_env(),
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), proc.stderr[-3000:]
    place = out if failing == "--out" else spill
    assert f"{failing} {place}" in lines[0] and lines[0].endswith(": File too large")
    assert snap.changes() == [] and _tree(tmp_path) == tree  # the previous output intact


@pytest.mark.mpi
@pytest.mark.parametrize("command", COMMANDS)
def test_a_full_disk_is_the_same_line_on_every_rank(command, graph_file, shared_tmp, world,
                                                    capfd, monkeypatch):
    graph = graph_file(n=40, seed=3)
    out = shared_tmp / "o.h5"
    on_rank0(world, out.write_bytes, b"previous good output")

    def full(self: h5py.File) -> None:  # what h5py raises when HDF5's flush fails
        raise RuntimeError("Unable to flush file (file write failed: time = Mon Nov 23\n, "
                           "errno = 28, error message = 'No space left on device')")

    monkeypatch.setattr(h5py.File, "flush", full)
    expect_error_untouched(world, capfd, [shared_tmp], argv_of(command, graph, out, shared_tmp),
                           f"--out {out}: No space left on device")


def _wait_for(pattern: str, where: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not list(where.glob(pattern)):
        assert proc.poll() is None, "finished before the files to clean up existed"
        assert time.monotonic() < deadline, f"no {pattern} in {where} after {timeout} s"
        time.sleep(0.002)


@serial
@pytest.mark.parametrize(("sig", "status", "phase"), [
    (signal.SIGTERM, 143, "spill"),  # while edges are spilled to disk
    (signal.SIGTERM, 143, "output"),  # while the graph file is written
    (signal.SIGINT, 130, "output"),
])
def test_a_killed_prepare_leaves_nothing(tmp_path, sig, status, phase):
    _, out, spill = _inputs(tmp_path)
    snap, tree = Snapshot(tmp_path), _tree(tmp_path)
    argv = ["prepare", "synthetic", "--nodes", "30000", "--features", "256", "--out", out,
            "--quiet", "--tmpdir", spill]
    proc = subprocess.Popen([sys.executable, "-m", "hpcgnn", *map(str, argv)], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    try:
        if phase == "spill":
            _wait_for("hpcgnn-edges-*", spill, proc)
        else:
            _wait_for(f".{out.name}.*.tmp", out.parent, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == status, err[-3000:]
    assert err == f"hpcgnn: interrupted by {signal.Signals(sig).name}\n"
    assert snap.changes() == [] and _tree(tmp_path) == tree


@pytest.mark.mpi
@pytest.mark.parametrize("flag", ["--metrics", "--trace"])
def test_a_full_disk_after_training_is_the_same_line_on_every_rank(
    flag, graph_file, shared_tmp, world, capfd, monkeypatch
):
    graph = graph_file(n=40, seed=3)
    out = shared_tmp / "m.json"
    on_rank0(world, out.write_bytes, b"previous good output")

    def full(self: Path, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_bytes", full)  # only rank 0 writes; every rank reports
    expect_error_untouched(
        world, capfd, [shared_tmp],
        ["train", graph, "--epochs", "1", "--hidden", "4", "--quiet", flag, out],
        f"{flag} {out}: No space left on device",
    )
