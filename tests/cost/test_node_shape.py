"""A job's ranks and threads on a machine's node: the shipped shapes, and one line for any other."""

import json

import pytest

from hpcgnn.cost.node_shape import fit_node, load_job_machine
from hpcgnn.errors import ConfigError

GPU_NODE = {
    "gpus_per_node": 4, "injection_gbps": 100.0, "cores_per_node": 64,
    "links": {"intra_node": {"alpha": 5e-6, "beta": 1e-11}},
    "job": {"system": "slurm", "directives": ["--constraint=gpu"], "modules": ["cudatoolkit/12.2"],
            "environment": {"MPICH_GPU_SUPPORT_ENABLED": "1"}},
}


@pytest.mark.parametrize("name, ranks, threads, shape", [
    # (ranks per node, cores per rank, threads, logical CPUs per rank, cores per socket)
    ("perlmutter", None, None, (4, 16, 16, 32, 64)),  # NERSC's -c 32 for 4 tasks a node
    ("perlmutter", 2, 8, (2, 32, 8, 64, 64)),
    ("summit", None, None, (6, 7, 7, 28, 21)),        # OLCF's -c 7 -g 1 resource sets
    ("summit", 4, None, (4, 10, 10, 40, 21)),         # 2 a socket: 10 of its 21 cores each
    ("summit", 1, None, (1, 21, 21, 84, 21)),         # a resource set never spans sockets
    ("perlmutter-cpu", None, None, (8, 16, 16, 32, 64)),  # a rank per NUMA domain
    ("perlmutter-cpu", 2, None, (2, 64, 64, 128, 64)),    # a rank per socket
    ("perlmutter-cpu", 3, 4, (3, 32, 4, 64, 64)),
])
def test_the_shipped_machines_shape_a_node(name, ranks, threads, shape):
    s = fit_node(load_job_machine(name), ranks, threads)
    assert (s.ranks_per_node, s.cores_per_rank, s.threads, s.cpus_per_task,
            s.cores_per_socket) == shape


@pytest.mark.parametrize("name, ranks, threads, words", [
    ("perlmutter", 8, None, "--ranks-per-node 8: machine perlmutter has 4 GPUs per node"),
    ("summit", 7, None, "--ranks-per-node 7: machine summit has 6 GPUs per node"),
    ("perlmutter", 4, 32, "--threads 32 x --ranks-per-node 4 does not fit machine perlmutter:"
                          " 64 cores in 1 socket(s) give a rank at most 16 cores"),
    ("summit", 6, 8, "give a rank at most 7 cores"),
    ("perlmutter-cpu", 129, None, "has 128 cores per node (2 socket(s)), fewer than ranks"),
    ("perlmutter-cpu", 8, 0, "--ranks-per-node and --threads must be >= 1"),
])
def test_impossible_shapes_are_refused_in_one_line(name, ranks, threads, words):
    with pytest.raises(ConfigError) as err:
        fit_node(load_job_machine(name), ranks, threads)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_machine_file_of_ones_own_gives_its_lines(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(GPU_NODE))
    job = load_job_machine(str(path))
    assert job.system == "slurm" and job.machine.cores_per_node == 64
    assert job.directives == ("--constraint=gpu",) and job.modules == ("cudatoolkit/12.2",)
    assert job.environment == (("MPICH_GPU_SUPPORT_ENABLED", "1"),)


@pytest.mark.parametrize("change, words", [
    ({"job": None}, "runs no batch jobs: give it 'cores_per_node' and a 'job' section"),
    ({"cores_per_node": 0}, "runs no batch jobs"),
    ({"job": {"system": "pbs"}}, "'job.system' must be one of slurm, slurm-cpu, lsf, got 'pbs'"),
    ({"job": {"system": "slurm-cpu"}}, "'job.system' slurm-cpu does not fit gpus_per_node 4"),
    ({"job": {"system": "slurm", "modules": ["gcc; rm -rf ~"]}}, "'job.modules' must be a list"),
    ({"job": {"system": "slurm", "modules": "gcc"}}, "'job.modules' must be a list"),
    ({"job": {"system": "slurm", "directives": ["-N 2\n#SBATCH -N 9"]}},
     "'job.directives' must be a list"),
    ({"job": {"system": "slurm", "directives": ["constraint=gpu"]}},
     "'job.directives' are scheduler options"),
    ({"job": {"system": "slurm", "environment": {"A B": "1"}}}, "'job.environment' must map"),
    ({"job": {"system": "slurm", "environment": {"A": "1\nrm"}}}, "'job.environment' must map"),
])
def test_bad_job_sections_fail_in_one_line(tmp_path, change, words):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({k: v for k, v in {**GPU_NODE, **change}.items() if v is not None}))
    with pytest.raises(ConfigError) as err:
        load_job_machine(str(path))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_laptop_runs_no_batch_jobs():
    with pytest.raises(ConfigError, match=r"laptop\.json: runs no batch jobs"):
        load_job_machine("laptop")
