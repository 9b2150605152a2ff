"""``--config run.toml``: the flags of ``train`` (and ``predict``) from a TOML file.

Each key is a flag's name without the dashes (``epochs``, ``weight_decay`` or
``weight-decay``); a value is a number, a string, a list (joined by commas, as
``--fanout 10,5``) or a boolean (``true`` gives a switch such as ``quiet``). The file's
flags go before the command line's, so a flag given on the command line wins. The graph
stays on the command line; an unknown key is one line naming it.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcgnn.errors import ConfigError

#: The sub-commands that take ``--config``.
COMMANDS = ("train", "predict")


def with_config(argv: Sequence[str]) -> list[str]:
    """``argv`` with its ``--config FILE`` replaced by the file's flags.

    Other commands' ``argv`` are returned as given.
    """
    argv = list(argv)
    if not argv or argv[0] not in COMMANDS:
        return argv
    rest, path = [], None
    words = iter(argv[1:])
    for word in words:
        if word == "--config":
            path = next(words, None)
            if path is None:
                raise ConfigError("--config needs a file")
        elif word.startswith("--config="):
            path = word.split("=", 1)[1]
        else:
            rest.append(word)
    if path is None:
        return argv
    values = _load(Path(path))
    _check_named_layer(values, rest, path)
    return [argv[0], *settings_flags(values, f"--config {path}", argv[0]), *rest]


def _check_named_layer(values: dict[str, Any], argv: list[str], path: str) -> None:
    """A file never imports code: a ``model`` of its own must be the command line's too.

    A ``MODULE:CLASS`` model in the file is refused in one line unless the command line
    gives the same ``--model`` (which then wins anyway, as every command-line flag).
    """
    model = values.get("model")
    if not isinstance(model, str) or ":" not in model:
        return
    given = [w.split("=", 1)[1] if w.startswith("--model=") else nxt
             for w, nxt in zip(argv, [*argv[1:], None], strict=True)
             if w == "--model" or w.startswith("--model=")]
    if not given or given[-1] != model:
        raise ConfigError(f"--config {path} names the layer {model!r}: a file never imports"
                          f" code; give --model {model} on the command line to run it"
                          f"{f' (it gives --model {given[-1]})' if given else ''}")


def _load(path: Path) -> dict[str, Any]:
    toml: Any = None
    for name in ("tomllib", "tomli"):  # the standard library's from Python 3.11
        try:
            toml = importlib.import_module(name)
            break
        except ImportError:
            continue
    if toml is None:
        raise ConfigError("--config needs Python 3.11 or the tomli package")
    try:
        with open(path, "rb") as fh:
            return dict(toml.load(fh))
    except OSError as err:
        raise ConfigError(f"--config {path}: {err.strerror or err}") from None
    except (toml.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"--config {path}: not valid TOML: {err}") from None


def settings_flags(values: dict[str, Any], where: str, command: str) -> list[str]:
    """The command-line flags of ``train`` (or ``predict``) settings given by name.

    ``values``: ``{name: value}`` as a ``--config`` file gives them (names without the
    dashes, ``_`` or ``-``; a value a number, a string, a list or a boolean switch).
    ``where`` starts each error line. Each value is one ``--flag=value`` token (a value
    starting with a dash stays a value).
    """
    from hpcgnn.cli.train import add_run_arguments

    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    switches = {s for a in parser._actions if isinstance(a, argparse._StoreTrueAction)
                for s in a.option_strings}
    known = {s for a in parser._actions for s in a.option_strings} - {"-h", "--help"}
    tokens: list[str] = []
    for key, value in values.items():
        flag = "--" + key.replace("_", "-")
        if flag not in known or flag == "--config":
            raise ConfigError(f"{where}: {key!r} is no flag of hpcgnn {command}")
        if flag in switches and not isinstance(value, bool):
            raise ConfigError(f"{where}: {key} is a switch: true or false")
        if isinstance(value, bool):
            if flag not in switches:
                raise ConfigError(f"{where}: {key} takes a value, not {value}")
            tokens += [flag] if value else []
        elif isinstance(value, list) and all(isinstance(v, int | float | str) for v in value):
            tokens.append(f"{flag}={','.join(str(v) for v in value)}")
        elif isinstance(value, int | float | str):
            tokens.append(f"{flag}={value}")
        else:
            raise ConfigError(f"{where}: {key} = {value!r} is no flag value")
    return tokens
