"""``hpcgnn jobs render``: a batch script for Slurm, LSF/jsrun or mpiexec from ``jobs/``.

A system's template (``jobs/<system>.sh``: scheduler directives, the ``LAUNCH`` command of
training and the ``PREP`` prefix of preparing and partitioning) takes the shared pipeline
``jobs/pipeline.sh`` (activate the Python environment, check the graph, or generate it
where ``--generate`` asks for that; partition when the model needs it, train, report) in
place of ``{{pipeline}}``; every ``{{name}}`` is then filled in. A line naming
``{{account}}`` is left out when no ``--account`` is given, and a line that is only a
placeholder with nothing to say (``{{directives}}``) is left out.

A batch system's node shape, scheduler directives, ``module load`` and environment lines
come from a machine file (``--machine``, by default the system's
:data:`DEFAULT_MACHINES`; :mod:`hpcgnn.cost.node_shape`): a shape that cannot run there
(more ranks than GPUs, more threads than cores) is refused in one line.

Every ``hpcgnn`` command of the rendered script is checked against the real parser of
that sub-command, so a template (or ``--train-args``) can never name a flag that does not
exist.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

from hpcgnn.cost.node_shape import JobMachine, NodeShape, fit_node, load_job_machine
from hpcgnn.errors import ConfigError
from hpcgnn.utils.shipped import shipped_dir

SYSTEMS = ("slurm", "slurm-cpu", "lsf", "local")
#: The machine file of each batch system unless ``--machine`` names another.
DEFAULT_MACHINES = {"slurm": "perlmutter", "slurm-cpu": "perlmutter-cpu", "lsf": "summit"}
#: The prefix of each batch system's directive lines.
DIRECTIVE = {"slurm": "#SBATCH", "slurm-cpu": "#SBATCH", "lsf": "#BSUB"}
#: The generators ``--generate`` may name (``prepare synthetic --generator``).
GENERATORS = ("sbm", "rmat")
#: Vertices of a ``--generate`` graph unless ``--prepare-nodes`` says otherwise.
DEFAULT_PREPARE_NODES = 20000
#: The templates (``jobs/`` of a source checkout, or a wheel's copy).
JOBS_DIR = shipped_dir("jobs", "*.sh")
#: Modes whose model follows the file's partition (so the job partitions first).
PARTITIONED_MODES = ("offload",)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_COMMAND_WORDS = ("hpcgnn", "$HPCGNN", "${HPCGNN}", "${HPCGNN[@]}")
#: Characters a --train-args word may not hold: the shell would act on them.
_SHELL_CHARS = set(";&|<>`$\\\"'(){}*?[]!#~\n")
_SEPARATORS = (";", "&&", "||", "|", "&")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``jobs`` sub-command."""
    from hpcgnn.config import ALGORITHMS

    p = sub.add_parser("jobs", help="batch scripts for clusters (Slurm, LSF/jsrun) and mpiexec")
    actions = p.add_subparsers(dest="jobs_command", required=True, metavar="ACTION")
    r = actions.add_parser(
        "render",
        help="fill in a batch template: prepare, partition, train, report",
        description="Write a batch script that runs the pipeline (the graph as it is, or "
                    "generated where --generate asks for it; partition when the model needs "
                    "it, train, report) with one rank per GPU, or per NUMA domain on a CPU "
                    "cluster, shaped by a machine file.",
    )
    r.add_argument("--system", choices=SYSTEMS, required=True,
                   help="slurm (a GPU cluster, Perlmutter-like srun), slurm-cpu (a CPU "
                        "cluster), lsf (Summit-like jsrun) or local (mpiexec, runs here)")
    r.add_argument("--machine", default=None, metavar="NAME|M.json",
                   help="the machine file of the node shape, modules and environment (default:"
                        " perlmutter for slurm, perlmutter-cpu for slurm-cpu, summit for lsf;"
                        " configs/machines/; local takes none)")
    r.add_argument("--nodes", type=int, default=1, help="nodes (default: 1)")
    r.add_argument("--ranks-per-node", type=int, default=None,
                   help="ranks per node (default: one per GPU of the machine, one per NUMA "
                        "domain on a CPU machine; local: required)")
    r.add_argument("--threads", type=int, default=None,
                   help="OpenMP threads per rank (default: the rank's share of its socket's "
                        "cores; refused beyond it)")
    r.add_argument("--venv", default=None, metavar="DIR",
                   help="the Python environment the job activates (default: the virtual "
                        "environment running this command, if any; '' for none: hpcgnn on "
                        "PATH as it is)")
    r.add_argument("--algo", choices=ALGORITHMS, default="1d",
                   help="--algo of train (default: 1d)")
    r.add_argument("--mode", choices=["fullbatch", "minibatch", "offload", "gist"],
                   default="fullbatch", help="--mode of train (default: fullbatch)")
    r.add_argument("--epochs", type=int, default=100, help="--epochs of train (default: 100)")
    r.add_argument("--graph", default="inputs/sbm-20k.h5",
                   help="graph file (default: inputs/sbm-20k.h5); the script stops with one "
                        "line when it does not exist, unless --generate is given")
    r.add_argument("--generate", choices=GENERATORS, default=None,
                   help="generate the graph with `prepare synthetic --generator G` when "
                        "--graph does not exist (default: never; a missing graph is an error)")
    r.add_argument("--prepare-nodes", type=int, default=None,
                   help="vertices of the --generate graph (default: 20000)")
    r.add_argument("--run-dir", default=None,
                   help="metrics and partitioned graph go here (default: runs/MODE-ALGO-pP)")
    r.add_argument("--train-args", default="",
                   help="more train flags, e.g. \"--hidden 64 --layers 3\" (checked against "
                        "train's flags; flags and values only, no shell syntax; default: none)")
    r.add_argument("--minutes", type=int, default=30, help="wall-clock limit (default: 30)")
    r.add_argument("--account", default=None, help="project/account to charge")
    r.add_argument("--template", default=None,
                   help="use this template instead of jobs/SYSTEM.sh")
    r.add_argument("--out", required=True, help="the script to write")
    r.add_argument("--prepare-job", action="store_true",
                   help="slurm, slurm-cpu, lsf: prepare and partition in a separate one-node"
                        " job (written beside --out as NAME-prepare.sh; on a compute node, under"
                        " jsrun on LSF) that the training job depends on, so the training"
                        " allocation does not wait on one node")
    r.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Render the script (rank 0 when launched under MPI)."""
    from hpcgnn.cli.common import run_on_root

    run_on_root(lambda: _render_to_file(args))
    return 0


def _render_to_file(args: argparse.Namespace) -> None:
    from hpcgnn.utils.files import atomic_write

    if args.prepare_nodes is not None and args.generate is None:
        raise ConfigError("--prepare-nodes sizes a generated graph: give --generate sbm|rmat"
                          " too (a missing --graph is otherwise an error)")
    prepare_nodes = DEFAULT_PREPARE_NODES if args.prepare_nodes is None else args.prepare_nodes
    for flag, value in (("--nodes", args.nodes), ("--ranks-per-node", args.ranks_per_node),
                        ("--threads", args.threads), ("--epochs", args.epochs),
                        ("--prepare-nodes", prepare_nodes), ("--minutes", args.minutes)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be >= 1, got {value}")
    job, shape = _node(args)
    ranks_per_node = args.ranks_per_node if shape is None else shape.ranks_per_node
    ranks = args.nodes * ranks_per_node
    venv = _default_venv() if args.venv is None else args.venv
    train_words = _train_words(args.train_args)
    # sampled minibatches (minibatch, gist --sampler) run no full-batch algorithm
    sampled = args.mode == "minibatch" or (args.mode == "gist" and "--sampler" in train_words)
    values = {
        **_machine_values(args.system, job, shape),
        "venv": shlex.quote(venv),
        "nodes": str(args.nodes),
        "ranks_per_node": str(ranks_per_node),
        "ranks": str(ranks),
        "parts": str(ranks),  # of the training job, also in its prepare job
        "mode": args.mode,
        "algo": args.algo,
        "epochs": str(args.epochs),
        "minutes": str(args.minutes),
        "graph": shlex.quote(args.graph),
        "run_dir": shlex.quote(args.run_dir or f"runs/{args.mode}-{args.algo}-p{ranks}"),
        "prepare_nodes": str(prepare_nodes),
        "generate": args.generate or "''",
        "partition": "yes" if args.algo == "halo" or args.mode in PARTITIONED_MODES else "no",
        "train_args": shlex.join(train_words),
        "algo_args": "" if sampled else f"--algo {args.algo} ",
        "device_args": {"slurm": "--device cuda ", "lsf": "--device cuda ",
                        "slurm-cpu": "--device cpu "}.get(args.system, ""),
        "account": "" if args.account is None else shlex.quote(args.account),
        "steps": "train" if args.prepare_job else "all",
        "job_suffix": "",
        "command": shlex.join([
            "hpcgnn", "jobs", "render", "--system", args.system,
            *(["--machine", args.machine] if args.machine else []), "--nodes", str(args.nodes),
            "--ranks-per-node", str(ranks_per_node),
            *(["--threads", str(shape.threads)] if shape else []), "--mode", args.mode,
            "--algo", args.algo, "--epochs", str(args.epochs), "--graph", args.graph,
            *(["--generate", args.generate] if args.generate else []),
        ]),
    }
    template = Path(args.template) if args.template else JOBS_DIR / f"{args.system}.sh"
    text, pipeline = _read(template), _read(JOBS_DIR / "pipeline.sh")
    scripts = {Path(args.out): render(text, pipeline, values)}
    if args.prepare_job:  # one node, one task: prepare and partition for the training job
        assert job is not None
        prep = {**values, **_machine_values(args.system, job, fit_node(job, 1)), "nodes": "1",
                "ranks_per_node": "1", "ranks": "1", "steps": "prepare",
                "job_suffix": "-prepare"}
        out = Path(args.out)
        scripts = {out.with_name(f"{out.stem}-prepare{out.suffix}"): render(text, pipeline, prep),
                   **scripts}
    for script in scripts.values():
        check_commands(script)
    for path, script in scripts.items():
        atomic_write(path, script, "job script").chmod(0o755)
    where = "" if job is None else f" on {job.machine.name}"
    threads = "" if shape is None else f" x {shape.threads} thread(s)"
    print(f"{args.system} job{where}: {args.nodes} node(s) x {ranks_per_node} rank(s){threads}"
          f" -> {args.out}")
    if args.prepare_job:
        prep_path, train_path = (shlex.quote(str(p)) for p in scripts)
        name = f"hpcgnn-{args.mode}-{args.algo}-prepare"
        submit = (
            f"bsub < {prep_path} && bsub -w 'done({name})' < {train_path}" if args.system == "lsf"
            else f"jid=$(sbatch --parsable {prep_path}) && sbatch --dependency=afterok:$jid"
            f" {train_path}"
        )
        print(f"prepare job (1 node) -> {prep_path}; submit both with: {submit}")


def _node(args: argparse.Namespace) -> tuple[JobMachine | None, NodeShape | None]:
    """The machine and node shape of a batch job; ``(None, None)`` for ``--system local``."""
    if args.system != "local":
        job = _job_machine(args.system, args.machine)
        return job, fit_node(job, args.ranks_per_node, args.threads)
    if args.nodes != 1:
        raise ConfigError(f"--system local runs on one node, got --nodes {args.nodes}")
    if args.prepare_job:
        raise ConfigError("--prepare-job is for batch systems (slurm, slurm-cpu, lsf): a local"
                          " run prepares in the same script")
    if args.machine or args.threads:
        raise ConfigError("--system local runs here with mpiexec: --machine and --threads are"
                          " for batch systems")
    if args.ranks_per_node is None:
        raise ConfigError("--system local needs --ranks-per-node")
    return None, None


def _job_machine(system: str, name: str | None) -> JobMachine:
    """The machine file of a batch job, checked to run ``system``'s template."""
    name = name or DEFAULT_MACHINES[system]
    job = load_job_machine(name)
    if job.system != system:
        raise ConfigError(f"--machine {name}: machine {job.machine.name} runs --system"
                          f" {job.system}, not {system}")
    return job


def _default_venv() -> str:
    """The virtual environment running this command, or ``""`` outside one."""
    return sys.prefix if sys.prefix != sys.base_prefix else ""


def _machine_values(system: str, job: JobMachine | None,
                    shape: NodeShape | None) -> dict[str, str]:
    """The placeholders a machine file and a node shape fill in (empty for ``local``)."""
    if job is None or shape is None:
        return {}
    modules = [f"module load {' '.join(job.modules)}"] if job.modules else []
    exports = [f"export {name}={shlex.quote(value)}" for name, value in job.environment]
    lines = modules + exports
    environment = "\n".join(
        [f"# The environment of machine {job.machine.name} (its machine file's job section)",
         *lines] if lines else [])
    return {
        "machine": job.machine.name,
        "directives": "\n".join(f"{DIRECTIVE[system]} {d}" for d in job.directives),
        "environment": environment,
        "threads": str(shape.threads),
        "cpus_per_task": str(shape.cpus_per_task),
        "cores_per_rank": str(shape.cores_per_rank),
        "cores_per_socket": str(shape.cores_per_socket),
    }


def _train_words(text: str) -> list[str]:
    """``--train-args`` as words, refusing anything the shell would act on."""
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise ConfigError(f"--train-args cannot be split into words ({err})") from None
    for word in words:
        bad = sorted(set(word) & _SHELL_CHARS)
        if bad:
            raise ConfigError(
                f"--train-args: {word!r} holds {''.join(bad)!r}; train flags and values only"
            )
    return words


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as err:
        raise ConfigError(f"cannot read job template {path}: {err.strerror or err}") from None


def render(template: str, pipeline: str, values: dict[str, str]) -> str:
    """Fill ``{{pipeline}}`` and every ``{{name}}`` of ``template``.

    Parameters
    ----------
    template
        A system's template.
    pipeline
        The shared pipeline, put in place of ``{{pipeline}}``.
    values
        Text for each placeholder; an empty ``account`` drops the lines that name it, and
        any empty value a line that holds only its placeholder.

    Raises
    ------
    ConfigError
        When the template names a placeholder that has no value.
    """
    text = template.replace("{{pipeline}}", pipeline.rstrip("\n"))
    if not values.get("account"):
        text = "".join(ln for ln in text.splitlines(True) if "{{account}}" not in ln)
    text = "".join(  # a line that is only a placeholder with nothing to say
        ln for ln in text.splitlines(True)
        if not ((m := _PLACEHOLDER.fullmatch(ln.strip())) and values.get(m.group(1)) == "")
    )
    unknown = sorted({m for m in _PLACEHOLDER.findall(text) if m not in values})
    if unknown:
        raise ConfigError(f"job template names unknown placeholder(s): {', '.join(unknown)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def check_commands(script: str) -> None:
    """Refuse a script whose ``hpcgnn`` commands name a flag their parser does not have.

    Each command (``hpcgnn``, ``$HPCGNN`` or ``${HPCGNN}`` followed by its sub-command
    words, up to ``;``, ``&&``, ``|`` or the end of the line; continuation lines joined)
    is checked against :func:`hpcgnn.cli.main.build_parser`: every ``--flag`` (or
    ``--flag=value``) must be an option of that sub-command, spelled out in full.
    """
    from hpcgnn.cli.main import build_parser

    for line in script.replace("\\\n", " ").splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        try:
            tokens = list(lex)
        except ValueError as err:
            raise ConfigError(f"job script line cannot be parsed ({err}): {line.strip()}") from None
        for start, token in enumerate(tokens):
            if token in _COMMAND_WORDS:
                _check_command(build_parser(), tokens[start + 1:])


def _check_command(parser: argparse.ArgumentParser, words: list[str]) -> None:
    path = ["hpcgnn"]
    i = 0
    while i < len(words) and (sub := _subcommands(parser)) and words[i] in sub:
        parser = sub[words[i]]
        path.append(words[i])
        i += 1
    known = set(parser._option_string_actions)
    for word in words[i:]:
        if word in _SEPARATORS:
            return
        flag = word.split("=", 1)[0]
        if flag.startswith("--") and flag not in known:
            raise ConfigError(
                f"job script runs `{' '.join(path)}` with {flag}, which it does not accept"
            )


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}
