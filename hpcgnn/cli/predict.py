"""``hpcgnn predict G.h5 --checkpoint D --out P.h5 [train's flags]``: a trained model's logits.

Run it like the training run (the same ranks, mode and model flags: the checkpoint is
checked against them as ``--resume`` does); the flags that only steer training
(:data:`TRAINING_ONLY`) are refused, the model being the checkpoint's.
"""

from __future__ import annotations

import argparse
from functools import partial

from hpcgnn.cli.train import add_run_arguments
from hpcgnn.cli.train import run as run_train
from hpcgnn.errors import ConfigError

#: Flags of ``hpcgnn train`` that steer training only (the checkpoint's values hold).
TRAINING_ONLY = ("epochs", "lr", "weight_decay", "weight_decay_layers", "dropout", "seed",
                 "early_stopping", "eval_every", "metrics", "trace", "checkpoint_dir",
                 "checkpoint_every", "resume", "trace_epochs", "log_csv", "finetune")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command."""
    p = sub.add_parser(
        "predict",
        help="write a trained model's logits for every vertex (run as the training run)",
        description="Restore the model of a checkpoint (written by hpcgnn train "
                    "--checkpoint-dir) on the same ranks and flags as its training run, and "
                    "write its logits for every vertex, without dropout, to an HDF5 file: "
                    "logits (n x classes, float32) and predictions (n, the argmax).",
    )
    add_run_arguments(p)
    p.add_argument("--checkpoint", required=True, metavar="DIR",
                   help="the checkpoint directory of the training run")
    p.add_argument("--out", required=True, metavar="P.h5",
                   help="the HDF5 file to write (replaced when complete)")
    defaults = {name: p.get_default(name) for name in TRAINING_ONLY}
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
    args.resume = args.checkpoint
    return run_train(args, predict_out=args.out)
