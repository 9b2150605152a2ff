"""``hpcgnn predict G.h5 --checkpoint D --out P.h5 [train's flags]``: a trained model's logits.

The model's settings (:data:`MODEL_SETTINGS`: layers, widths, kind and its options, dtype)
come from the checkpoint where the command line does not give them; the other flags of
another mode (``--mode offload``, a sampler's) are given as for training. A full-batch or
offload checkpoint predicts at any rank count and on any layout (``--algo``, default 1D:
:attr:`~hpcgnn.training.modes.base.Mode.elastic_labels`); a GIST one at any rank count,
its full-batch groups on any layout (sampled groups on their grid). The checkpoint is
checked against the whole command line as ``--resume`` does; the flags that only steer
training (:data:`TRAINING_ONLY`) are refused, the model being the checkpoint's.
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from hpcgnn.cli.layers import is_user_layer
from hpcgnn.cli.train import add_run_arguments
from hpcgnn.cli.train import run as run_train
from hpcgnn.errors import ConfigError
from hpcgnn.utils.json_text import read_json

#: Flags of ``hpcgnn train`` that steer training only (the checkpoint's values hold).
TRAINING_ONLY = ("epochs", "lr", "weight_decay", "weight_decay_layers", "dropout", "seed",
                 "early_stopping", "select_model", "eval_every", "metrics", "trace",
                 "checkpoint_dir", "checkpoint_every", "resume", "trace_epochs", "log_csv",
                 "finetune")


#: Settings the checkpoint's fingerprint gives the prediction when the command line does
#: not (each the flag's ``dest`` and the fingerprint's key alike).
MODEL_SETTINGS = ("layers", "hidden", "model", "gin_eps", "heads", "output_heads", "dtype",
                  "loss")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command."""
    p = sub.add_parser(
        "predict",
        help="write a trained model's logits for every vertex (run as the training run)",
        description="Restore the model of a checkpoint (written by hpcgnn train "
                    "--checkpoint-dir) on the same ranks and flags as its training run, and "
                    "write its logits for every vertex, without dropout, to an HDF5 file: "
                    "logits (n x classes, float32) and predictions (n, the argmax; a "
                    "multi-label model's, --loss bce: n x classes, 1 where the logit > 0).",
    )
    add_run_arguments(p)
    p.add_argument("--checkpoint", required=True, metavar="DIR",
                   help="the checkpoint directory of the training run")
    p.add_argument("--out", required=True, metavar="P.h5",
                   help="the HDF5 file to write (replaced when complete)")
    defaults = {name: p.get_default(name) for name in (*TRAINING_ONLY, *MODEL_SETTINGS)}
    p.set_defaults(**{name: None for name in MODEL_SETTINGS})  # None: the checkpoint's
    p.set_defaults(func=partial(run, defaults=defaults))


def run(args: argparse.Namespace, defaults: dict[str, object]) -> int:
    """Predict; every rank returns the same status.

    ``defaults``: the parser's defaults of the :data:`TRAINING_ONLY` flags.
    """
    for name in TRAINING_ONLY:
        if getattr(args, name) != defaults[name]:
            raise ConfigError(
                f"--{name.replace('_', '-')}: predict does not train (the model is the"
                " checkpoint's; drop the flag)"
            )
    if args.out == "" or args.checkpoint == "":
        raise ConfigError("--out and --checkpoint need a path")
    saved = checkpoint_settings(args.checkpoint)
    layer = saved.get("model")
    if args.model is None and isinstance(layer, str) and is_user_layer(layer):
        raise ConfigError(f"the checkpoint's model is the layer {layer!r}: a file never imports"
                          f" code; give --model {layer} to predict with it")
    for name in MODEL_SETTINGS:
        if getattr(args, name) is not None:
            continue
        if name in saved:
            setattr(args, name, saved[name])
        else:  # not in the checkpoint (or another mode's): train's default
            setattr(args, name, defaults[name])
    args.resume = args.checkpoint
    return run_train(args, predict_out=args.out)


def checkpoint_settings(directory: str) -> dict[str, Any]:
    """The fingerprint of the checkpoint in ``directory`` (collective: rank 0 reads it).

    Empty when it cannot be read: the run that follows reports why, on every rank.
    """
    from hpcgnn.comm.communicator import Comm
    from hpcgnn.training.checkpoint import MANIFEST

    saved: dict[str, Any] = {}
    comm = Comm.world()
    try:
        if comm.rank == 0:
            try:
                doc = read_json(Path(directory) / MANIFEST)
                fingerprint = doc.get("fingerprint") if isinstance(doc, dict) else None
                if isinstance(fingerprint, dict):
                    saved = {k: v for k, v in fingerprint.items() if k in MODEL_SETTINGS}
            except Exception:  # the run reports a bad checkpoint, in one line on every rank
                saved = {}
        return dict(comm.bcast_obj(saved, 0, "checkpoint"))
    finally:
        comm.free()
