"""Convert a PyTorch Geometric graph saved with ``torch.save`` (``hpcgnn prepare pyg``).

The file is read with ``torch.load(..., weights_only=True)``: no code of the file runs,
and PyG is not needed (nor imported). A weights-only load reads tensors, containers and
allow-listed classes, so these forms are accepted:

- ``torch.save(data.to_dict(), path)``: a dict of tensors (the portable form);
- ``torch.save(data, path)``: a ``Data`` object. Its pickle names PyG's classes
  (``Data``, ``GlobalStorage``, ``DataEdgeAttr``, ``DataTensorAttr``); the load maps
  those names to an inert stand-in that keeps the pickled attributes and runs nothing,
  and the tensors are taken from its ``_store``;
- a PyG ``InMemoryDataset`` file of one graph (``processed/data.pt``: ``(data.to_dict(),
  slices, Data)``).

Anything else (``HeteroData``, a dataset of several graphs, a pickled Python object) is
refused in one line saying how to save it: ``torch.save(data.to_dict(), path)``.

Keys read: ``x`` (features, dense or a sparse COO/CSR tensor), ``edge_index``, ``y``
(a class id per vertex, negative: unlabelled; or a 2-D 0/1 matrix, multi-label targets as
PPI's and Yelp's, written as a multi-label file, :mod:`hpcgnn.io.arrays`), ``train_mask``,
``val_mask``, ``test_mask`` (used with ``--split given``), ``edge_weight`` or a one-column
``edge_attr`` (the edge weights), ``num_nodes``; other keys are ignored. The graph is made as
:meth:`~hpcgnn.io.memory.MemoryGraph.from_arrays` makes it (undirected unless
``directed``) and written by :func:`~hpcgnn.prepare.output.write_memory_graph`.
"""

from __future__ import annotations

import os
import pickle
import re
import time
import zipfile
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import format as fmt
from hpcgnn.io.arrays import labels_of, masks_of
from hpcgnn.io.memory import MemoryGraph
from hpcgnn.prepare.output import write_memory_graph
from hpcgnn.prepare.splits import Masks, SplitSpec
from hpcgnn.prepare.summary import PrepareSummary
from hpcgnn.prepare.textfile import require_file

#: The PyG classes a saved ``Data`` names, read as :class:`_Pickled` stand-ins.
PYG_CLASSES = (
    "torch_geometric.data.data.Data",
    "torch_geometric.data.storage.GlobalStorage",
    "torch_geometric.data.data.DataEdgeAttr",
    "torch_geometric.data.data.DataTensorAttr",
)
#: How to save a graph this reader takes.
HOW = "save the graph's tensors with torch.save(data.to_dict(), path)"
#: The mask keys of a PyG graph, in :data:`~hpcgnn.io.format.MASK_NAMES`' order.
MASKS = tuple(f"{m}_mask" for m in fmt.MASK_NAMES)


class _Pickled:
    """A PyG object as pickled: its attributes (``state``), none of its code."""

    state: dict

    def __setstate__(self, state: Any) -> None:
        self.state = state if isinstance(state, dict) else {}


def _stand_ins() -> AbstractContextManager[Any]:
    """PyG's class names allowed to the weights-only load, as :class:`_Pickled`."""
    import torch

    try:
        return torch.serialization.safe_globals([(_Pickled, name) for name in PYG_CLASSES])
    except (AttributeError, TypeError):  # a torch without named safe globals: refused later
        return nullcontext()


def load_pyg(path: str | os.PathLike) -> dict[str, Any]:
    """The tensors of the PyG graph saved in ``path``, by key (see the module notes)."""
    import torch

    p = require_file(path, "torch.save file of a PyG graph")
    try:
        with _stand_ins():
            obj = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"(?:Unsupported global: |unsupported )GLOBAL ([\w.]+)", str(err))
        what = f" (it holds a {found.group(1)})" if found else ""
        raise InputError(f"{p}: not readable by a weights-only load{what}: {HOW}") from err
    except (OSError, RuntimeError, EOFError, ValueError, TypeError, AttributeError, KeyError,
            IndexError, zipfile.BadZipFile) as err:  # a forged pickle's calls of a stand-in
        why = " ".join(str(err).split())[:200]
        raise InputError(f"{p}: not readable as a saved PyG graph ({why}): {HOW}") from err
    return _mapping(obj, str(p))


def _mapping(obj: Any, source: str) -> dict[str, Any]:
    """The graph's key -> tensor mapping of a loaded object, or a one-line refusal."""
    if _is_pyg(obj):  # torch.save(data): Data -> _store -> _mapping
        mapping = _attributes(_attributes(obj).get("_store")).get("_mapping")
        if isinstance(mapping, dict):
            return mapping
    if isinstance(obj, (tuple, list)) and len(obj) in (2, 3) and isinstance(obj[0], dict) \
            and isinstance(obj[1], (dict, type(None))):
        # InMemoryDataset.save: (data.to_dict(), slices, cls); slices None for one graph
        graphs = {len(s) - 1 for s in (obj[1] or {}).values() if hasattr(s, "__len__")}
        if graphs - {1}:
            raise InputError(f"{source}: a dataset of {max(graphs)} graphs; hpcgnn trains on"
                             " one: save it with torch.save(dataset[k].to_dict(), path)")
        return obj[0]
    if isinstance(obj, dict) and obj and all(isinstance(k, str) for k in obj):
        return obj
    raise InputError(f"{source}: holds a {type(obj).__name__}, not a PyG graph: {HOW}")


def _is_pyg(obj: Any) -> bool:
    """Whether ``obj`` is a stand-in of a PyG object, or PyG's own.

    A process that imported PyG allows its classes to weights-only loads itself, so either
    may come back.
    """
    return isinstance(obj, _Pickled) or type(obj).__module__.startswith("torch_geometric.")


def _attributes(obj: Any) -> dict:
    """A loaded PyG object's attributes as pickled, or ``{}``.

    None of its code runs (no ``__getattr__``).
    """
    if isinstance(obj, _Pickled):
        return obj.state
    if _is_pyg(obj):
        attrs = object.__getattribute__(obj, "__dict__")
        return attrs if isinstance(attrs, dict) else {}
    return {}


def _array(value: Any, key: str, source: str) -> np.ndarray | sp.csr_matrix:
    """A tensor as a NumPy array (sparse tensors: a SciPy CSR matrix)."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise InputError(f"{source}: '{key}' is a {type(value).__name__}, not a tensor")
    t = value.detach().cpu()
    if t.layout in (torch.sparse_coo, torch.sparse_csr):
        if t.dim() != 2:
            raise InputError(f"{source}: '{key}' is a sparse tensor of {t.dim()} dimensions")
        t = t.to_sparse_csr()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return sp.csr_matrix((t.values().numpy(), t.col_indices().numpy(),
                              t.crow_indices().numpy()), shape=tuple(t.shape))
    if t.layout != torch.strided:
        raise InputError(f"{source}: '{key}' is a tensor of layout {t.layout}")
    if t.dtype == torch.bfloat16:  # no NumPy dtype: widened exactly
        t = t.float()
    return t.numpy()


def pyg_graph(
    path: str | os.PathLike, split: SplitSpec, *, directed: bool = False,
    row_normalize: bool = False, name: str | None = None,
) -> MemoryGraph:
    """The graph of the PyG file ``path`` in memory, its masks chosen by ``split``."""
    source = str(path)
    data = load_pyg(path)
    arrays = {k: _array(v, k, source) for k, v in data.items()
              if k in ("x", "edge_index", "y", "edge_weight", "edge_attr", *MASKS)}
    for key in ("x", "edge_index", "y"):
        if key not in arrays:
            raise InputError(f"{source}: no '{key}' (keys: {', '.join(sorted(data))[:200]})")
    x = arrays["x"]
    if x.ndim != 2:
        raise InputError(f"{source}: 'x' has shape {x.shape}; expected (num_nodes, F)")
    n = int(x.shape[0])
    if "num_nodes" in data and int(data["num_nodes"]) != n:
        raise InputError(f"{source}: num_nodes {int(data['num_nodes'])} but x has {n} rows")
    labels = labels_of(arrays["y"], n, f"{source}: 'y'")
    train, val, test = split.masks(labels, _given_masks(arrays, labels, source), source)
    return MemoryGraph.from_arrays(
        features=x, labels=labels, train_mask=train, val_mask=val, test_mask=test,
        edge_index=arrays["edge_index"], edge_weight=_weights(arrays, source),
        directed=directed, row_normalize=row_normalize,
        name=name or os.path.splitext(os.path.basename(source))[0], source=source,
    )


def _given_masks(arrays: dict[str, Any], labels: np.ndarray, source: str) -> Masks | None:
    """The file's masks (all three, one column each), or ``None`` when it has none."""
    if not any(k in arrays for k in MASKS):
        return None
    for k in MASKS:
        m = arrays.get(k)
        if m is not None and np.ndim(m) == 2 and m.shape[1] > 1:
            raise InputError(f"{source}: '{k}' has {m.shape[1]} columns (one split each): save"
                             f" one, e.g. data.{k} = data.{k}[:, 0]")
    given = masks_of({m: arrays[k] for m, k in zip(fmt.MASK_NAMES, MASKS, strict=True)
                      if k in arrays}, labels, source)
    return given["train"], given["val"], given["test"]


def _weights(arrays: dict[str, Any], source: str) -> np.ndarray | None:
    """``edge_weight``, else a one-column ``edge_attr``, else ``None`` (unweighted)."""
    if "edge_weight" in arrays:
        return arrays["edge_weight"]
    attr = arrays.get("edge_attr")
    if attr is None:
        return None
    if attr.ndim == 1 or (attr.ndim == 2 and attr.shape[1] == 1):
        return attr.reshape(-1)
    raise InputError(f"{source}: 'edge_attr' has shape {attr.shape}; hpcgnn takes one weight"
                     " per edge: save it as edge_weight (or drop edge_attr)")


def convert_pyg(
    file: str | os.PathLike,
    out: str | os.PathLike,
    *,
    split: SplitSpec | None = None,
    directed: bool = False,
    row_normalize: bool = False,
    name: str | None = None,
    tmpdir: str | os.PathLike | None = None,
    show_progress: bool = True,
) -> PrepareSummary:
    """Convert the PyG graph saved in ``file`` (module notes) to the graph file ``out``.

    Parameters
    ----------
    file
        A ``torch.save`` file: ``data.to_dict()``, a ``Data``, or a one-graph dataset.
    out
        Output ``.h5`` path.
    split
        How the masks are chosen (default: the file's masks, ``--split given``).
    directed
        Keep ``edge_index``'s directions (default: the graph is made undirected).
    row_normalize
        Divide every feature row by the sum of its absolute values.
    name
        Dataset name stored in the file (default: the file name without extension).
    tmpdir, show_progress
        Spill directory of the edge sorter; progress bars.
    """
    started = time.perf_counter()
    graph = pyg_graph(file, split or SplitSpec(), directed=directed,
                      row_normalize=row_normalize, name=name)
    return write_memory_graph(out, graph, source=f"pyg:{file}", started=started,
                              tmpdir=tmpdir, show_progress=show_progress)
