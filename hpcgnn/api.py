"""``hpcgnn.train(graph, ...)``: a training run from Python, its settings as typed objects.

Every rank of ``comm`` calls it with the same arguments, as every rank runs the command
under ``mpiexec`` (it is collective); on one process it needs no launcher::

    import hpcgnn
    from hpcgnn.api import FullBatchMode

    result = hpcgnn.train("inputs/cora.h5", mode=FullBatchMode(algo="1.5d"), epochs=200,
                          early_stopping=10, select_model="best", quiet=True)
    print(result.final["test_acc"], result.params_sha256)
    logits = result.predict()            # one process: hpcgnn.nn.GCN with the weights

The graph is a file's path, or a graph in memory (:class:`~hpcgnn.io.memory.MemoryGraph`,
e.g. ``MemoryGraph.from_arrays(edge_index=..., features=..., labels=..., train_mask=...,
val_mask=..., test_mask=...)``), which every rank holds whole: each builds it (or loads
it) the same way, and the run refuses graphs that differ between ranks. A graph in memory
trains in :class:`FullBatchMode` (every ``algo``) to the weights its file would give (the
same ``params_sha256``); the other modes read a file and refuse it in one line.

The mode is an object of :mod:`hpcgnn.training.modes` (:class:`FullBatchMode`,
:class:`MinibatchMode`, :class:`OffloadMode`, :class:`GistMode`, checked when made); the
model's settings are those of :class:`~hpcgnn.config.TrainConfig` and the run's those of
:class:`~hpcgnn.training.run.RunOptions`, each a keyword with the default of the command's
flag. The call builds the same objects the command builds from its flags
(:mod:`hpcgnn.cli.train`, :mod:`hpcgnn.cli.modes`) and runs the same run
(:func:`hpcgnn.training.run.train`), so the checks, the result and ``params_sha256`` are
the command's; it goes through no command line (no argparse, no ``--config`` file: a TOML
file of flags is the command's). An error is the command's one line, raised as its
:class:`~hpcgnn.errors.HpcgnnError` (a bad setting: a
:class:`~hpcgnn.errors.ConfigError` on every rank); nothing calls ``sys.exit``.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from mpi4py import MPI

from hpcgnn.cost.machine import tiers_from_flag
from hpcgnn.errors import ConfigError, HpcgnnError
from hpcgnn.io.memory import MemoryGraph
from hpcgnn.kinds import named
from hpcgnn.nn import GCN, Graph, Layer
from hpcgnn.training.modes import FullBatchMode, GistMode, MinibatchMode, Mode, OffloadMode
from hpcgnn.training.run import PATHS, configure
from hpcgnn.training.run import train as run
from hpcgnn.utils.files import leaves_nothing_behind

#: A path argument: text or a path object.
PathLike = str | os.PathLike


@dataclass(frozen=True)
class Trained:
    """What :func:`train` returns: the same on every rank.

    Attributes
    ----------
    metrics
        The metrics document that ``--metrics`` writes (``docs/metrics.md``; rank 0's, so
        the epochs' times are rank 0's), as Python values (NaN where the file has
        ``null``).
    weights
        The trained parameters, whole, in the order ``params_sha256`` hashes them (GCN:
        ``W^1..W^L``): detached copies on the CPU. With ``select_model="best"`` the
        best-validation epoch's. :class:`GistMode` assembles its row-sharded model on every
        rank for them, which a run of its own never does.
    graph
        The graph file trained on, or the graph in memory.
    """

    metrics: dict[str, Any]
    weights: list[torch.Tensor]
    graph: str | MemoryGraph
    #: The layer object it trained (a researcher's own), else ``None`` (a built-in name).
    layer: Layer | None = None

    @property
    def params_sha256(self) -> str:
        """SHA-256 of :attr:`weights` as float32 (the metrics' ``params_sha256``)."""
        return str(self.metrics["params_sha256"])

    @property
    def final(self) -> dict[str, float]:
        """``loss``, ``train_acc``, ``val_acc``, ``test_acc`` of the trained model."""
        return dict(self.metrics["final"])

    def model(self) -> GCN:
        """The trained layers as a :class:`hpcgnn.nn.GCN` on this process, in eval mode.

        Full-batch (every ``algo``, with ``bias`` too), offload and GIST (with full-batch
        groups) models are the layers of :class:`~hpcgnn.nn.GCN`; a minibatch model (its
        biases, the sampler's operator) is not, and GIST's ``rescale`` evaluates rescaled
        weights: both raise :class:`~hpcgnn.errors.HpcgnnError` (``hpcgnn predict`` serves
        them).
        """
        c, g = self.metrics["config"], self.metrics["graph"]
        net = GCN(
            g["num_features"], c["hidden"], g["num_classes"], layers=c["layers"],
            dropout=c["dropout"], model=self.layer or c["model"], seed=c["seed"],
            dtype=c["dtype"],
            heads=c["heads"], output_heads=c["output_heads"],
            attention_dropout=c["attention_dropout"],
            # a sampled model's biases are its own (its operator is the sampler's)
            bias=bool(c.get("bias", False)) and c["mode"] != "minibatch",
        )
        shapes = [tuple(w.shape) for w in self.weights]
        if c.get("gist_rescale") or shapes != [tuple(w.shape) for w in net.weights]:
            why = "evaluated rescaled" if c.get("gist_rescale") else f"{len(shapes)} tensors"
            raise HpcgnnError(
                f"the model of --mode {c['mode']} ({why}) is not hpcgnn.nn.GCN's layers:"
                " predict with hpcgnn predict and a --checkpoint-dir of the run"
            )
        with torch.no_grad():
            for p, w in zip(net.weights, self.weights, strict=True):
                p.copy_(w)
        return net.eval()

    def predict(self, graph: str | os.PathLike | MemoryGraph | None = None) -> torch.Tensor:
        """The logits of every vertex of ``graph`` (default: the one trained on), no dropout.

        On this process, with :meth:`model` on the graph read whole
        (:meth:`hpcgnn.nn.Graph.read`), its operator and features as the run's settings
        build them; rows in the file's vertex order.
        """
        c = self.metrics["config"]
        source = self.graph if graph is None else graph
        g = Graph.read(
            source if isinstance(source, MemoryGraph) else os.fspath(source),
            model=self.layer or c["model"],
            dtype=c["dtype"], sparse_features=c["sparse_features"], gin_eps=c["gin_eps"],
        )
        net = self.model()
        with torch.no_grad():
            return net(g)


def train(
    graph: PathLike | MemoryGraph,
    *,
    mode: Mode | None = None,
    model: str | Layer | type[Layer] | None = None,
    layers: int | None = None,
    hidden: int = 16,
    epochs: int = 100,
    lr: float = 0.01,
    weight_decay: float = 5e-4,
    weight_decay_layers: str = "first",
    dropout: float = 0.5,
    seed: int = 0,
    dtype: str = "float32",
    early_stopping: int = 0,
    select_model: str = "last",
    sparse_features: str = "auto",
    gin_eps: float = 0.0,
    heads: int = 1,
    output_heads: int = 1,
    attention_dropout: float | None = None,
    bias: bool = False,
    product_order: str = "auto",
    loss: str = "ce",
    eval_every: int = 1,
    metrics: PathLike | None = None,
    trace: PathLike | None = None,
    trace_epochs: tuple[int, int] | None = None,
    sync_comm: bool = False,
    log_csv: PathLike | None = None,
    quiet: bool = False,
    checkpoint_dir: PathLike | None = None,
    checkpoint_every: int = 0,
    resume: PathLike | None = None,
    finetune: PathLike | None = None,
    tier_gbps: str | Mapping[str, float] | None = None,
    device: str | None = None,
    threads: int | None = None,
    comm: MPI.Comm | None = None,
) -> Trained:
    """Train on ``graph`` as ``hpcgnn train GRAPH ...`` does (collective).

    Each setting is the command's flag of the same name (``weight_decay``:
    ``--weight-decay``), with its default and its checks; ``docs/api.md`` has an example
    per mode.

    Parameters
    ----------
    graph
        A graph file written by ``hpcgnn prepare`` / ``hpcgnn partition``, or a graph in
        memory (:class:`~hpcgnn.io.memory.MemoryGraph`, held whole by every rank, the same
        on each: checked) for :class:`FullBatchMode`.
    mode
        How the ranks train (default: ``FullBatchMode()``, the 1D SpMM on every rank):
        :class:`FullBatchMode`, :class:`MinibatchMode`, :class:`OffloadMode` or
        :class:`GistMode`.
    model
        The layers: a built-in name (``"gcn"``, ``"sage"``, ``"gin"``, ``"gat"``), or your
        own layer, a :class:`hpcgnn.nn.Layer` object or a subclass (made with no arguments).
        ``None``: ``"gcn"``, or with a sampler its own layer (``sage`` samples for sage).
    layers
        The model's depth (``None``: 2, or with a sampler as many as its sizes).
    hidden, epochs, lr, weight_decay, weight_decay_layers, dropout, seed, dtype
        The model and the optimiser (:class:`~hpcgnn.config.TrainConfig`).
    early_stopping, select_model, eval_every
        Stop after so many evaluations without a lower validation loss (0: never); end with
        the ``"last"`` or the ``"best"`` model; evaluate every so many epochs.
    sparse_features
        ``"auto"``, ``"on"`` or ``"off"``: input features as CSR on each rank.
    gin_eps, heads, output_heads, attention_dropout
        GIN's ``eps``; GAT's heads and the drop probability of its attention.
    bias
        A bias per layer (``--bias``; minibatch mode's sampled models always have them;
        not with :class:`GistMode`).
    product_order
        How each layer evaluates ``Â^T H W`` (``--product-order``): ``"auto"``, the order
        whose SpMM is narrower; ``"paper"``, CAGNET's ``(Â^T H) W`` with the first layer's
        backward SpMM (:class:`FullBatchMode` only; the same weights up to float rounding).
    loss
        ``"ce"``: the cross-entropy of a class id per vertex; ``"bce"``: the binary
        cross-entropy with logits of every (vertex, class) entry, for multi-label targets (a
        graph whose labels are a 0/1 matrix; every mode: :class:`FullBatchMode`,
        :class:`OffloadMode`, :class:`MinibatchMode`, :class:`GistMode`).
    metrics, trace, trace_epochs, sync_comm, log_csv, quiet
        Outputs: the metrics JSON and the Chrome trace (rank 0), the 1-based epochs
        ``(first, last)`` the trace records, collectives timed apart from their waits, a
        CSV row per epoch, nothing printed (no per-epoch, set-up or summary lines; the
        command's ``--quiet`` keeps its set-up and summary lines).
    checkpoint_dir, checkpoint_every, resume, finetune
        Checkpoints: where, how often, a run to continue, weights to start from.
    tier_gbps
        The tiers' bandwidths in GB/s of the cost models and the offload reorganisation:
        ``{"hd": 25, "dd": 200, "ru": 1500}``, its text, or a machine (name or ``.json``).
    device, threads
        ``"cpu"`` or ``"cuda"`` (default: ``$HPCGNN_DEVICE``, else cuda when a GPU and CuPy
        are visible); torch's threads in this process.
    comm
        The ranks that train (default: ``MPI.COMM_WORLD``); each calls with the same
        arguments. The run's own communicators are duplicates, freed before it returns.

    Returns
    -------
    Trained
        The metrics document and the trained weights, on every rank.

    Raises
    ------
    HpcgnnError
        The command's one-line error (:class:`~hpcgnn.errors.ConfigError` for a bad
        setting), on every rank: the ranks agreed on it. An error they cannot agree on (one
        whose ``collective`` is false, or any other exception, raised on some ranks while the
        others wait in a collective) ends the job instead, as ``python -m mpi4py`` does: the
        rank prints it and calls ``comm.Abort(1)``, so no rank hangs. On one rank it is
        raised.
    """
    mode = FullBatchMode() if mode is None else mode
    if not isinstance(mode, Mode):
        raise ConfigError(f"mode: a mode object (FullBatchMode(), MinibatchMode(), ...),"
                          f" not {mode!r}")
    name, layer = _model(model, mode)
    settings = {k: os.fspath(v) if k in PATHS and v is not None else v
                for k, v in locals().items() if k not in ("graph", "mode", "comm")}
    source = graph if isinstance(graph, MemoryGraph) else os.fspath(graph)
    cfg, opts = configure(source, mode, settings | {
        "model": name, "tier_gbps": tiers_from_flag(tier_gbps), "keep_result": True,
        "summary": not quiet,
    }, layer)
    comm = MPI.COMM_WORLD if comm is None else comm
    try:
        with leaves_nothing_behind():
            result = run(opts, cfg, comm)
    except Exception as err:
        if comm.Get_size() > 1 and not (isinstance(err, HpcgnnError) and err.collective):
            end_job(comm, err)
        raise
    assert result.metrics is not None and result.weights is not None
    return Trained(metrics=result.metrics, weights=result.weights, graph=opts.graph,
                   layer=layer)


def end_job(comm: MPI.Comm, err: BaseException) -> None:
    """Print ``err`` (with its traceback) and abort every rank of ``comm``'s job.

    What an exception some ranks may not share must do: the others wait in a collective
    that never completes.
    """
    rank = comm.Get_rank()
    text = "".join(traceback.format_exception(err))
    sys.stderr.write(f"hpcgnn: rank {rank} of {comm.Get_size()} failed; ending the job\n{text}")
    sys.stderr.flush()
    sys.stdout.flush()
    comm.Abort(1)


def _model(model: str | Layer | type[Layer] | None, mode: Mode) -> tuple[str, Layer | None]:
    """``model=``'s name and layer object (a :class:`Layer` subclass made; ``None``: a name).

    Raises
    ------
    ConfigError
        For a ``MODULE:CLASS`` name: from Python the class itself is given (the command
        line imports such a name; a call never imports code by name), or for what is no
        layer.
    """
    if isinstance(model, type) and issubclass(model, Layer):
        model = model()
    if isinstance(model, Layer):
        layer = named(model)
        return str(layer), layer
    if isinstance(model, str) and ":" in model:
        module, _, cls = model.partition(":")
        raise ConfigError(f"model={model!r}: give the layer itself (from {module} import"
                          f" {cls}; model={cls}), or run hpcgnn train --model {model}")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"model: a layer's name, a hpcgnn.nn.Layer or a subclass, not"
                          f" {model!r}")
    return model or mode.default_model, None


__all__ = ["FullBatchMode", "GistMode", "MemoryGraph", "MinibatchMode", "OffloadMode", "Trained",
           "train"]
