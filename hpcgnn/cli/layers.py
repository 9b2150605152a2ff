"""``--model``: a built-in layer by name, or a researcher's own as ``MODULE:CLASS``.

A layer from outside the package is imported here, and only because the command line
names it: importing it runs that module's code, as any ``import`` does, from the user's
Python path (``PYTHONPATH``, the installed packages). The Python call of :mod:`hpcgnn.api`
takes the class or the object itself (its name: :func:`hpcgnn.kinds.named`).
Files never import a module: a ``--config`` file, a checkpoint or a metrics file that
names a layer is matched against the ``--model`` given and refused in one line otherwise.
"""

from __future__ import annotations

import importlib
import re
import sys

from hpcgnn.errors import ConfigError
from hpcgnn.kinds import KINDS, Layer, named

#: ``MODULE:CLASS``: a dotted module path and a class (or attribute) name.
SPEC = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def model_name(text: str) -> str:
    """``--model``'s value: a built-in name or ``MODULE:CLASS`` (argparse type; no import)."""
    if text in KINDS or SPEC.match(text):
        return text
    raise ConfigError(f"--model must be one of {', '.join(KINDS)} or MODULE:CLASS (a layer of"
                      f" your own, importable from the Python path), got {text!r}")


def is_user_layer(name: str | None) -> bool:
    """Whether ``--model`` names a layer from outside the package (``MODULE:CLASS``)."""
    return name is not None and ":" in name


def load_layer(spec: str) -> Layer:
    """Import ``MODULE:CLASS`` and make its layer (the class called without arguments).

    ``CLASS`` may also name a :class:`~hpcgnn.kinds.Layer` instance in the module.

    Raises
    ------
    ConfigError
        One line: the module cannot be imported (with its error), has no such name, or the
        name is not a layer.
    """
    module_name, _, attr = model_name(spec).partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # the user's module: any error it raises is the reason
        why = " ".join(f"{type(err).__name__}: {err}".split())
        where = "" if isinstance(err, ModuleNotFoundError) else " (importing it ran its code)"
        raise ConfigError(f"--model {spec}: cannot import {module_name}{where}: {why};"
                          f" the Python path is {':'.join(p or '.' for p in sys.path[:4])}"
                          f"{' ...' if len(sys.path) > 4 else ''}") from None
    obj: object = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"--model {spec}: {module_name} has no {attr}")
        obj = getattr(obj, part)
    if isinstance(obj, type) and issubclass(obj, Layer):
        try:
            obj = obj()
        except Exception as err:
            raise ConfigError(f"--model {spec}: {attr}() failed: {type(err).__name__}: {err}"
                              ) from None
    if not isinstance(obj, Layer):
        raise ConfigError(f"--model {spec}: {attr} is not a layer (a subclass of"
                          " hpcgnn.nn.Layer, or an instance of one)")
    return named(obj, spec)
