"""How a batch job's ranks and threads fit a machine's node (``hpcgnn jobs render``).

A machine file (:mod:`hpcgnn.cost.machine`) that runs batch jobs gives its node
(``gpus_per_node``, ``cores_per_node``: the cores a job may use, ``sockets_per_node``,
``numa_per_node``, ``threads_per_core``) and a ``job`` section:

``system``
    The template that runs on it: ``slurm`` (GPUs), ``slurm-cpu`` or ``lsf``.
``directives``
    Scheduler options every job of the machine carries (``--constraint=gpu``), one a line.
``modules``
    What ``module load`` loads, in order, before anything runs.
``environment``
    Variables the job exports (``{"MPICH_GPU_SUPPORT_ENABLED": "1"}``).
``source``
    Where the lines come from.

A GPU machine runs one rank per GPU (fewer leave GPUs idle), a CPU machine one rank per
NUMA domain unless told otherwise. A rank gets whole cores of one socket: the ranks of a
node are spread over its sockets, and the ``ceil(ranks / sockets)`` ranks of a socket share
its cores equally (:func:`fit_node`). Pure: no torch, no MPI.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from hpcgnn.cost.machine import Machine, parse_machine, read_machine_doc
from hpcgnn.errors import ConfigError
from hpcgnn.utils.text import printable

#: The ``job.system`` values (the templates of ``jobs/``) and whether their ranks use GPUs.
JOB_SYSTEMS = {"slurm": True, "slurm-cpu": False, "lsf": True}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MODULE = re.compile(r"[A-Za-z0-9_.+/-]+\Z")


@dataclass(frozen=True)
class JobMachine:
    """A machine that runs batch jobs.

    Attributes
    ----------
    machine
        Its figures and node (:class:`~hpcgnn.cost.machine.Machine`).
    system
        The template that runs on it (a key of :data:`JOB_SYSTEMS`).
    directives
        Scheduler options of every job.
    modules
        What ``module load`` loads, in order.
    environment
        Variables every job exports, in order.
    source
        Where the lines come from.
    """

    machine: Machine
    system: str
    directives: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    source: str = ""


@dataclass(frozen=True)
class NodeShape:
    """The ranks and threads of a job on one node.

    Attributes
    ----------
    ranks_per_node
        Ranks on each node.
    cores_per_rank
        Whole cores of one socket each rank is bound to.
    threads
        OpenMP threads per rank (at most ``cores_per_rank``).
    cpus_per_task
        Logical CPUs per rank (``cores_per_rank`` x hardware threads per core), Slurm's
        ``--cpus-per-task``.
    cores_per_socket
        The cores of one socket (a one-rank job's resource set on LSF).
    """

    ranks_per_node: int
    cores_per_rank: int
    threads: int
    cpus_per_task: int
    cores_per_socket: int


def load_job_machine(name: str) -> JobMachine:
    """Read machine ``name`` (``configs/machines/NAME.json`` or a ``.json`` path) for a job.

    Raises
    ------
    ConfigError
        One line: what :func:`~hpcgnn.cost.machine.load_machine` refuses, a file without a
        ``job`` section or ``cores_per_node``, or a malformed line of it.
    """
    path, doc = read_machine_doc(name)
    machine = parse_machine(doc, str(path))

    def bad(what: str) -> ConfigError:
        return ConfigError(printable(f"machine file {path}: {what}"))

    assert isinstance(doc, dict)  # parse_machine refused anything else
    job = doc.get("job")
    if not isinstance(job, dict) or not machine.cores_per_node:
        raise bad("runs no batch jobs: give it 'cores_per_node' and a 'job' section"
                  " (system, directives, modules, environment; see docs/jobs.md)")
    system = job.get("system")
    if system not in JOB_SYSTEMS:
        raise bad(f"'job.system' must be one of {', '.join(JOB_SYSTEMS)}, got {system!r}")
    if JOB_SYSTEMS[system] != (machine.gpus_per_node > 0):
        raise bad(f"'job.system' {system} does not fit gpus_per_node {machine.gpus_per_node}"
                  " (slurm and lsf run a rank per GPU, slurm-cpu runs on CPUs)")

    def lines(key: str, ok: re.Pattern[str] | None) -> tuple[str, ...]:
        value = job.get(key, [])
        if not isinstance(value, list) or not all(
            isinstance(v, str) and v.isprintable() and v.strip() and (ok is None or ok.match(v))
            for v in value
        ):
            raise bad(f"'job.{key}' must be a list of one-line strings, got {value!r}")
        return tuple(value)

    directives = lines("directives", None)
    if not all(d.startswith("-") for d in directives):
        raise bad(f"'job.directives' are scheduler options (-x, --name=value), got {directives!r}")
    env = job.get("environment", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and _NAME.match(k) and isinstance(v, str) and v.isprintable()
        for k, v in env.items()
    ):
        raise bad(f"'job.environment' must map variable names to one-line strings, got {env!r}")
    return JobMachine(
        machine=machine, system=system, directives=directives,
        modules=lines("modules", _MODULE), environment=tuple(env.items()),
        source=str(job.get("source", "")),
    )


def fit_node(job: JobMachine, ranks_per_node: int | None = None,
             threads: int | None = None) -> NodeShape:
    """The shape of a job on ``job``'s nodes, or one line saying why it cannot run.

    Parameters
    ----------
    job
        The machine.
    ranks_per_node
        Ranks on a node; ``None``: one per GPU, or one per NUMA domain without GPUs.
    threads
        OpenMP threads per rank; ``None``: one per core of the rank.

    Raises
    ------
    ConfigError
        More ranks than GPUs (a GPU machine) or than cores, or more threads than a rank's
        cores (``threads x ranks`` beyond the cores of the node or of a socket).
    """
    m = job.machine
    ranks = ranks_per_node or m.gpus_per_node or m.numa_per_node
    if ranks < 1 or (threads is not None and threads < 1):
        raise ConfigError(f"--ranks-per-node and --threads must be >= 1, got {ranks}"
                          f" and {threads}")
    if m.gpus_per_node and ranks > m.gpus_per_node:
        raise ConfigError(f"--ranks-per-node {ranks}: machine {m.name} has {m.gpus_per_node}"
                          " GPUs per node (one rank per GPU)")
    per_socket = m.cores_per_node // m.sockets_per_node
    cores = per_socket // math.ceil(ranks / m.sockets_per_node)
    if cores == 0:
        raise ConfigError(f"--ranks-per-node {ranks}: machine {m.name} has {m.cores_per_node}"
                          f" cores per node ({m.sockets_per_node} socket(s)), fewer than ranks")
    threads = cores if threads is None else threads
    if threads > cores:
        raise ConfigError(
            f"--threads {threads} x --ranks-per-node {ranks} does not fit machine {m.name}:"
            f" {m.cores_per_node} cores in {m.sockets_per_node} socket(s) give a rank at most"
            f" {cores} cores"
        )
    return NodeShape(ranks_per_node=ranks, cores_per_rank=cores, threads=threads,
                     cpus_per_task=cores * m.threads_per_core, cores_per_socket=per_socket)
