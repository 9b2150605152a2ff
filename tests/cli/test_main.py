"""The command line's last word: one line and the exit status for an interrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from hpcgnn.cli import prepare as prepare_cli
from hpcgnn.cli.common import launched_by_mpi
from hpcgnn.cli.main import main
from hpcgnn.utils import files
from tests.graphs import write_random_graph

serial = pytest.mark.skipif(launched_by_mpi(), reason="signals itself; serial runs only")


@serial
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_is_one_line_and_128_plus_the_signal(sig, status, tmp_path, monkeypatch,
                                                      capsys):
    def interrupted(args):
        files.new_temporary(tmp_path, "left-by-a-step-that-had-no-clean-up-")
        os.kill(os.getpid(), sig)

    monkeypatch.setattr(prepare_cli, "_synthetic", interrupted)
    assert main(["prepare", "synthetic", "--out", str(tmp_path / "g.h5")]) == status
    assert capsys.readouterr().err == f"hpcgnn: interrupted by {signal.Signals(sig).name}\n"
    assert list(tmp_path.iterdir()) == []  # the last clean-up removed the temporary


@serial
def test_ctrl_c_outside_the_handlers_is_reported_the_same_way(tmp_path, monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_cli, "_synthetic", interrupted)
    assert main(["prepare", "synthetic", "--out", str(tmp_path / "g.h5")]) == 130
    assert capsys.readouterr().err == "hpcgnn: interrupted by SIGINT\n"


@serial
def test_no_mpi_library_is_one_line_not_a_traceback(tmp_path):
    """No loadable libmpi (no ``mpich`` extra, no module): one line on what to install."""
    graph = write_random_graph(tmp_path / "g.h5", n=20)
    env = {**os.environ, "MPI4PY_LIBMPI": str(tmp_path / "libmpi.so.12")}
    proc = subprocess.run([sys.executable, "-m", "hpcgnn", "train", str(graph), "--epochs", "1"],
                          env=env, capture_output=True, text=True, timeout=120)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1, proc.stderr
    assert err[0].startswith("hpcgnn: error: mpi4py cannot load an MPI library (")
    assert "pip install 'hpcgnn[mpich]'" in err[0]


def test_other_runtime_errors_keep_their_traceback():
    from hpcgnn.cli.main import missing_mpi

    assert missing_mpi(RuntimeError("CUDA out of memory")) is None
    assert missing_mpi(ImportError("No module named 'torch_geometric'")) is None
    got = missing_mpi(RuntimeError("cannot load MPI library\nlibmpi.so.40: cannot open"))
    assert got is not None and "(libmpi.so.40: cannot open)" in got


@serial
def test_training_leaves_nothing_in_the_temporary_directory(tmp_path):
    """Not even the empty torchinductor_<user> folder torch makes for an optimiser."""
    graph = write_random_graph(tmp_path / "g.h5", n=20)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    proc = subprocess.run([sys.executable, "-m", "hpcgnn", "train", str(graph), "--epochs", "1",
                           "--quiet"], env={**env, "TMPDIR": str(tmp)}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert list(tmp.iterdir()) == []


@serial
def test_a_reader_that_stops_early_is_no_traceback(tmp_path):
    """`hpcgnn train ... | head -1`: the closed pipe ends the run quietly (status 1)."""
    graph = write_random_graph(tmp_path / "g.h5", n=20)
    argv = [sys.executable, "-m", "hpcgnn", "train", str(graph), "--epochs", "400"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith("hpcgnn train:")
    proc.stdout.close()  # as head does after its line
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1 and err == "", err


def test_every_flag_has_help_that_shows_its_default():
    import argparse

    from hpcgnn.cli.main import build_parser

    missing = []

    def walk(parser, prefix):
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, [*prefix, name])
            elif isinstance(a, argparse._HelpAction | argparse._VersionAction):
                continue
            elif not a.help or (
                a.option_strings and a.default not in (None, False) and "default" not in a.help
                and not isinstance(a, argparse._StoreTrueAction)
            ):
                missing.append(f"{' '.join(prefix)} {a.option_strings or a.dest}")

    walk(build_parser(), ["hpcgnn"])
    assert missing == []


def test_one_name_per_concept_with_the_old_names_kept():
    from hpcgnn.cli.main import build_parser

    p = build_parser()
    new = p.parse_args(["prepare", "synthetic", "--num-nodes", "10", "--feature-dim", "3",
                        "--out", "g.h5"])
    old = p.parse_args(["prepare", "synthetic", "--nodes", "10", "--features", "3",
                        "--out", "g.h5"])
    assert (new.nodes, new.features) == (old.nodes, old.features) == (10, 3)


def test_a_config_file_gives_flags_the_command_line_overrides(tmp_path, capsys):
    import json

    from tests.graphs import write_random_graph

    path = write_random_graph(tmp_path / "g.h5", n=40, seed=1)
    run = tmp_path / "run.toml"
    run.write_text('epochs = 3\nhidden = 8\nquiet = true\nweight_decay = 1e-3\n'
                   'mode = "minibatch"\nfanout = [3, 2]\nbatch-size = 8\n')
    out = tmp_path / "m.json"
    assert main(["train", str(path), "--config", str(run), "--epochs", "2",
                 "--metrics", str(out)]) == 0
    doc = json.loads(out.read_text())
    cfg = doc["config"]
    assert (cfg["epochs"], cfg["hidden"], cfg["weight_decay"], cfg["mode"]) == (
        2, 8, 1e-3, "minibatch")
    assert doc["sampling"]["sizes"] == [3, 2] and len(doc["epochs"]) == 2
    capsys.readouterr()
    for text, words in (("epoch = 3\n", "'epoch' is no flag of hpcgnn train"),
                        ("epochs =\n", "not valid TOML"), ("quiet = 3\n", "is a switch"),
                        ("epochs = true\n", "takes a value")):
        run.write_text(text)
        rc = main(["train", str(path), f"--config={run}"])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 1 and len(err) == 1 and words in err[0], err
