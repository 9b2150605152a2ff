"""``hpcgnn.train(graph, **settings)``: the run of ``hpcgnn train`` as a Python call.

Every rank of ``comm`` calls it with the same arguments, as every rank runs the command
under ``mpiexec`` (it is collective); on one process it needs no launcher::

    import hpcgnn

    result = hpcgnn.train("inputs/cora.h5", epochs=200, early_stopping=10,
                          select_model="best", quiet=True)
    print(result.final["test_acc"], result.params_sha256)
    logits = result.predict()            # one process: hpcgnn.nn.GCN with the weights

The settings are the flags of ``hpcgnn train`` by name, as a ``--config`` file gives them
(:func:`hpcgnn.cli.config_file.settings_flags`): ``algo="1.5d"``, ``replication=2``,
``fanout=[10, 5]``, ``quiet=True``, ``metrics="m.json"``, ``config="run.toml"``; ``None``
leaves a flag at its default. They go through the command's own parser and the command's
own run (:func:`hpcgnn.cli.train.train_from_args`), so the defaults, the checks, the
result and ``params_sha256`` are the command's. An error is the command's one line,
raised as its :class:`~hpcgnn.errors.HpcgnnError` (a bad setting: a
:class:`~hpcgnn.errors.ConfigError` on every rank); nothing calls ``sys.exit``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import torch
from mpi4py import MPI

from hpcgnn.cli.config_file import settings_flags, with_config
from hpcgnn.cli.layers import named
from hpcgnn.cli.main import leaves_nothing_behind
from hpcgnn.cli.train import add_run_arguments, train_from_args
from hpcgnn.errors import ConfigError, HpcgnnError
from hpcgnn.nn import GCN, Graph, Layer

#: How :func:`train` names itself in error lines.
WHERE = "hpcgnn.train"


class _SettingsParser(argparse.ArgumentParser):
    """``hpcgnn train``'s parser whose errors are raised, not printed with an exit."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def _flag_value(value: Any) -> Any:
    """A setting as :func:`settings_flags` takes it (paths as text, tuples as lists)."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def parse_settings(graph: str | os.PathLike, settings: Mapping[str, Any]) -> argparse.Namespace:
    """The parsed ``hpcgnn train`` arguments of ``graph`` and keyword ``settings``.

    Raises
    ------
    ConfigError
        For an unknown setting, a value of the wrong kind, or one the parser refuses.
    """
    values = {k: _flag_value(v) for k, v in settings.items() if v is not None}
    config = values.pop("config", None)
    argv = [
        "train", *([f"--config={config}"] if config is not None else []),
        *settings_flags(values, WHERE, "train"), "--", os.fspath(graph),
    ]
    parser = _SettingsParser(prog=WHERE)
    add_run_arguments(parser)
    return parser.parse_args(with_config(argv)[1:])


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
        best-validation epoch's. ``--mode gist`` assembles its row-sharded model on every
        rank for them, which a run of its own never does.
    graph
        The graph file trained on.
    """

    metrics: dict[str, Any]
    weights: list[torch.Tensor]
    graph: str
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

        Full-batch (every ``algo``), offload and GIST (without ``sampler``) models are the
        layers of :class:`~hpcgnn.nn.GCN`; a minibatch model (biases, the sampler's
        operator) is not, and ``gist_rescale`` evaluates rescaled weights: both raise
        :class:`~hpcgnn.errors.HpcgnnError` (``hpcgnn predict`` serves them).
        """
        c, g = self.metrics["config"], self.metrics["graph"]
        net = GCN(
            g["num_features"], c["hidden"], g["num_classes"], layers=c["layers"],
            dropout=c["dropout"], model=self.layer or c["model"], seed=c["seed"],
            dtype=c["dtype"],
            heads=c["heads"], output_heads=c["output_heads"],
            attention_dropout=c["attention_dropout"],
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

    def predict(self, graph: str | os.PathLike | None = None) -> torch.Tensor:
        """The logits of every vertex of ``graph`` (default: the one trained on), no dropout.

        On this process, with :meth:`model` on the graph read whole
        (:meth:`hpcgnn.nn.Graph.read`), its operator and features as the run's settings
        build them; rows in the file's vertex order.
        """
        c = self.metrics["config"]
        g = Graph.read(
            self.graph if graph is None else os.fspath(graph), model=self.layer or c["model"],
            dtype=c["dtype"], sparse_features=c["sparse_features"], gin_eps=c["gin_eps"],
        )
        net = self.model()
        with torch.no_grad():
            return net(g)


def train(graph: str | os.PathLike, *, comm: MPI.Comm | None = None, **settings: Any) -> Trained:
    """Train on ``graph`` as ``hpcgnn train GRAPH --flag value ...`` does (collective).

    Parameters
    ----------
    graph
        A graph file written by ``hpcgnn prepare`` / ``hpcgnn partition``.
    comm
        The ranks that train (default: ``MPI.COMM_WORLD``); each calls with the same
        arguments. The run's own communicators are duplicates, freed before it returns.
    **settings
        ``hpcgnn train``'s flags by name (``epochs=200``, ``mode="minibatch"``,
        ``fanout=[10, 5]``, ``quiet=True``, ``config="run.toml"``); ``None`` or ``False``
        (a switch): the flag's default. ``model`` may also be a layer of your own: a
        :class:`hpcgnn.nn.Layer` object, or a subclass (made with no arguments).

    Returns
    -------
    Trained
        The metrics document and the trained weights, on every rank.

    Raises
    ------
    HpcgnnError
        The command's one-line error (:class:`~hpcgnn.errors.ConfigError` for a bad
        setting, on every rank). One whose ``collective`` is false may be raised on some
        ranks only, leaving the others in a collective: under ``mpiexec`` end the job
        then, as the command does (``comm.Abort(1)``).
    """
    layer = _layer_object(settings.get("model"))
    if layer is not None:
        settings = {**settings, "model": str(layer)}
    args = parse_settings(graph, settings)
    with leaves_nothing_behind():
        result = train_from_args(args, comm, keep_result=True, layer=layer)
    assert result.metrics is not None and result.weights is not None
    return Trained(metrics=result.metrics, weights=result.weights, graph=args.graph,
                   layer=layer)


def _layer_object(model: Any) -> Layer | None:
    """``model=``'s layer object (a :class:`Layer` subclass made), else ``None`` (a name)."""
    if isinstance(model, type) and issubclass(model, Layer):
        model = model()
    return named(model) if isinstance(model, Layer) else None
