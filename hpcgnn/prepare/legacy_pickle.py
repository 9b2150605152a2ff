"""Load the Python 2 pickles of NumPy and SciPy objects that public datasets ship.

A pickle can run arbitrary code when loaded, so :func:`load_legacy_pickle` only resolves
the handful of classes such files contain (NumPy arrays and dtypes, SciPy sparse
matrices, dicts, lists and ``defaultdict``) and refuses anything else. It also maps the
module paths of old releases (``scipy.sparse.csr``, ``numpy.core.multiarray``) to where
the classes live today.
"""

from __future__ import annotations

import importlib
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import InputError

_BUILTINS = {"list", "dict", "set", "frozenset", "tuple", "object", "int", "float", "complex",
             "bool", "str", "bytes", "bytearray"}
_NUMPY_CORE = {"_reconstruct", "scalar", "_frombuffer"}


def _numpy_core(name: str) -> Any:
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise pickle.UnpicklingError(f"numpy has no multiarray.{name}")


class _LegacyUnpickler(pickle.Unpickler):
    """Unpickler that only resolves the array, sparse-matrix and container classes."""

    def find_class(self, module: str, name: str) -> Any:
        if module in ("builtins", "__builtin__") and name in _BUILTINS:
            return super().find_class("builtins", name)
        if module in ("collections",) and name in ("defaultdict", "OrderedDict"):
            return super().find_class(module, name)
        if module in ("copy_reg", "copyreg") and name == "_reconstructor":
            return super().find_class("copyreg", name)
        if module == "_codecs" and name == "encode":
            return super().find_class(module, name)
        if module.startswith(("numpy.core", "numpy._core")) and name in _NUMPY_CORE:
            return _numpy_core(name)
        if module == "numpy" and name in ("ndarray", "dtype", "matrix"):
            return getattr(np, name)
        if module.startswith(("numpy.matrixlib", "numpy.core.defmatrix")) and name == "matrix":
            return np.matrix
        if module.startswith("numpy.dtypes") and name.endswith("DType"):
            return getattr(importlib.import_module("numpy.dtypes"), name)
        if module.startswith("scipy.sparse") and name.endswith(("_matrix", "_array")):
            cls = getattr(sp, name, None)
            if isinstance(cls, type):
                return cls
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")


def load_legacy_pickle(path: str | Path) -> Any:
    """Load one NumPy/SciPy pickle written by Python 2 or 3.

    Parameters
    ----------
    path
        The pickle file.

    Raises
    ------
    InputError
        If the file is missing, not a pickle, or references a class outside the
        allowed NumPy/SciPy/container set.

    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return _LegacyUnpickler(f, encoding="latin1").load()
    except FileNotFoundError as err:
        raise InputError(f"{path}: no such file") from err
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            ImportError, IndexError, KeyError) as err:
        raise InputError(f"{path}: not a readable NumPy/SciPy pickle: {err}") from err
