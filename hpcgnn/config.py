"""Hyper-parameters and algorithm names shared by every mode (no torch, no MPI)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcgnn.errors import ConfigError
from hpcgnn.kinds import GCN, KINDS, PRODUCT_ORDERS, Layer, layer_kind

if TYPE_CHECKING:
    import torch

#: Value dtypes of features, weights and activations.
DTYPES = ("float32", "float64")

#: Distributed SpMM algorithms of ``hpcgnn train --mode fullbatch``.
ALGORITHMS = ("1d", "1.5d", "2d", "3d", "halo")

#: The ``--mode`` choices, the default first (the registry of the modes themselves is
#: :data:`hpcgnn.training.modes.MODES`, which loads torch).
MODE_NAMES = ("fullbatch", "minibatch", "offload", "gist")

#: Layer kinds of ``--model`` (:mod:`hpcgnn.kinds`): GCN (``Â^T H W``), GraphSAGE-mean
#: (``H W_self + D_in^-1 A^T H W_neigh``), GIN and GAT.
MODELS = tuple(KINDS)

#: Layers of a model when ``--layers`` is not given (a sampler's sizes may say otherwise).
DEFAULT_LAYERS = 2
#: Largest ``--layers`` (deep GNNs reach about a thousand layers).
MAX_LAYERS = 4096
#: Largest ``--hidden`` width.
MAX_HIDDEN = 2**31 - 1

#: The process-grid kind each algorithm (and ``--mode offload`` / ``minibatch``) runs on.
GRID_KIND = {
    "1d": "1d", "1.5d": "1.5d", "2d": "2d", "3d": "3d", "halo": "1d", "offload": "1d",
    "minibatch": "1.5d", "gist": "1d",
}


def check_layers(layers: int) -> None:
    """Refuse a model depth outside ``[1, MAX_LAYERS]``."""
    if not 1 <= layers <= MAX_LAYERS:
        raise ConfigError(f"--layers must be in [1, {MAX_LAYERS}], got {layers}")


def check_random_key(value: int, flag: str = "--seed") -> None:
    """Refuse a number the random streams fold in (a seed, an epoch) outside ``[0, 2^63)``."""
    if not 0 <= value < 2**63:
        raise ConfigError(f"{flag} must be in [0, 2^63), got {value}")


#: The losses of ``--loss``: ``ce``, the cross-entropy of one class id per vertex (softmax);
#: ``bce``, the binary cross-entropy with logits of every (vertex, class) entry of multi-label
#: targets (a 0/1 label matrix), PyG's ``BCEWithLogitsLoss``.
LOSSES = ("ce", "bce")


def check_loss(loss: str, multi_label: bool) -> None:
    """Refuse a loss that does not fit the graph's labels (``multi_label``: a 0/1 matrix)."""
    if multi_label and loss != "bce":
        raise ConfigError("the graph has multi-label targets (a 0/1 label matrix): train it"
                          " with --loss bce")
    if not multi_label and loss == "bce":
        raise ConfigError("--loss bce trains multi-label targets (a 0/1 label matrix); this"
                          " graph has one class id per vertex: use --loss ce")


def check_training_vertices(num_train: int) -> None:
    """Refuse to train on a graph whose train mask is empty (``num_train`` over all ranks)."""
    if num_train == 0:
        raise ConfigError("the graph has no training vertices (empty train mask)")


#: The plain types a setting's annotation may name, with the words of an error and the
#: values each takes (NumPy's numbers too, held as Python's: :func:`check_types`).
_PLAIN: dict[str, tuple[str, Any]] = {
    "int": ("an integer", numbers.Integral),
    "float": ("a number", numbers.Real),
    "str": ("text", str),
    "bool": ("true or false", bool),
}


def _fits(value: Any, name: str) -> bool:
    """Whether ``value`` is of the plain type ``name`` (``None`` included; no bool number)."""
    if name == "None":
        return value is None
    kind = _PLAIN[name][1]
    return isinstance(value, kind) and (name == "bool" or not isinstance(value, bool))


def check_types(settings: Any) -> None:
    """Refuse a field of the dataclass ``settings`` whose value is not of its plain type.

    A field annotated with plain types only (``int``, ``float``, ``str``, ``bool``,
    ``None``, and unions of them) must hold one of them (a ``bool`` is no number); a number
    is then held as Python's ``int`` or ``float`` (a NumPy integer, an ``int`` given for a
    ``float``), as the command's parser gives it. Other annotations (objects, paths,
    tuples) are their owners' to check. Raises :class:`ConfigError` naming the field as
    its flag (``--weight-decay``).
    """
    for f in fields(settings):
        names = [t.strip() for t in str(f.type).split("|")]
        if not set(names) <= {*_PLAIN, "None"}:
            continue
        value = getattr(settings, f.name)
        match = next((name for name in names if _fits(value, name)), None)
        if match is None:
            what = " or ".join(_PLAIN[n][0] if n in _PLAIN else "none" for n in names)
            raise ConfigError(f"--{f.name.replace('_', '-')} must be {what}, got {value!r}")
        plain = {"int": int, "float": float}.get(match)
        if plain is not None and type(value) is not plain:
            object.__setattr__(settings, f.name, plain(value))


#: Settings of ``--weight-decay-layers``: the first layer's weights only (Kipf & Welling's
#: GCN, PyG's example), or every parameter.
WEIGHT_DECAY_LAYERS = ("first", "all")

#: Settings of ``--select-model``: the model a run ends with, the last epoch's weights or
#: those of the evaluated epoch with the lowest validation loss.
SELECT_MODEL = ("last", "best")

#: Settings of ``--sparse-features``.
SPARSE_FEATURES = ("auto", "on", "off")
#: ``--sparse-features auto`` keeps features sparse below this density (nonzeros per
#: entry): the bag-of-words features of Cora, CiteSeer and PubMed are 1-10% nonzero, a
#: dense GEMM over them and a mask over every entry cost more than an SpMM over their
#: nonzeros, which on the CPU is below one tenth of the dense product's work at 10%.
SPARSE_FEATURE_DENSITY = 0.1

#: The largest ``|--gin-eps|``: the self term's weight ``1 + eps`` stays a number a float32
#: activation can carry through many layers.
MAX_GIN_EPS = 1e3

#: The most attention heads of a GAT layer (``--heads``, ``--output-heads``).
MAX_HEADS = 64


@dataclass(frozen=True)
class TrainConfig:
    """Model and optimiser settings shared by every algorithm (and the serial reference)."""

    layers: int = DEFAULT_LAYERS
    hidden: int = 16
    epochs: int = 100
    lr: float = 0.01
    weight_decay: float = 5e-4
    #: Which parameters the L2 weight decay applies to (:data:`WEIGHT_DECAY_LAYERS`).
    weight_decay_layers: str = "first"
    dropout: float = 0.5
    seed: int = 0
    eval_every: int = 1
    dtype: str = "float32"
    model: str = GCN.name
    #: Input features as CSR on each rank: ``"auto"`` (when their density is below
    #: :data:`SPARSE_FEATURE_DENSITY`), ``"on"`` or ``"off"``.
    sparse_features: str = "auto"
    #: Stop when the validation loss has not improved for this many evaluations (0: never).
    early_stopping: int = 0
    #: The model the run ends with (:data:`SELECT_MODEL`): ``"last"``, or ``"best"``, the
    #: weights of the evaluated epoch with the lowest validation loss, restored at the end.
    select_model: str = "last"
    #: GIN's fixed ``eps`` (``--gin-eps``): the self term ``(1 + eps) h_i``.
    gin_eps: float = 0.0
    #: GAT's attention heads of the hidden layers (``--heads``; concatenated).
    heads: int = 1
    #: GAT's attention heads of the last layer (``--output-heads``; averaged).
    output_heads: int = 1
    #: GAT's drop probability of the attention coefficients (``--attention-dropout``);
    #: ``None``: ``dropout``'s, as the paper.
    attention_dropout: float | None = None
    #: A bias per layer in full-batch training and offload (``--bias``: zeros at first,
    #: each after its layer's last weight, added by ``g.bias``); minibatch mode's sampled
    #: models always have them. Off by default, so the weights are ``W`` alone.
    bias: bool = False
    #: How ``g.propagate`` evaluates ``Â^T H W`` (``--product-order``,
    #: :data:`~hpcgnn.kinds.PRODUCT_ORDERS`): ``"auto"``, the narrower SpMM and no backward
    #: SpMM of the input; ``"paper"``, CAGNET's ``(Â^T H) W`` with the first layer's
    #: backward SpMM (full-batch layouts only).
    product_order: str = PRODUCT_ORDERS[0]
    #: The loss (:data:`LOSSES`): ``"ce"`` for class ids, ``"bce"`` for multi-label targets.
    loss: str = "ce"
    #: A layer object in place of the built-in ``model`` names (a researcher's own:
    #: ``--model MODULE:CLASS``); ``model`` is then its name.
    layer: Layer | None = None

    def __post_init__(self) -> None:
        check_types(self)
        check_layers(self.layers)
        if self.layer is None:
            layer_kind(self.model)  # an unknown name is refused
        elif self.model != str(self.layer):
            raise ConfigError(f"--model {self.model} is not the layer given ({self.layer})")
        if not 1 <= self.hidden <= MAX_HIDDEN:
            raise ConfigError(f"--hidden must be in [1, {MAX_HIDDEN}], got {self.hidden}")
        if not 0 <= self.epochs < 2**63:  # epochs key the random streams
            raise ConfigError(f"--epochs must be in [0, 2^63), got {self.epochs}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"--dropout must be in [0, 1), got {self.dropout}")
        if not (math.isfinite(self.lr) and self.lr >= 0.0) or not (
            math.isfinite(self.weight_decay) and self.weight_decay >= 0.0
        ):
            raise ConfigError(
                f"--lr and --weight-decay must be finite and >= 0,"
                f" got {self.lr}, {self.weight_decay}"
            )
        check_random_key(self.seed)
        if self.eval_every < 0:
            raise ConfigError(f"--eval-every must be >= 0, got {self.eval_every}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"--dtype must be one of {sorted(DTYPES)}, got {self.dtype}")
        if self.weight_decay_layers not in WEIGHT_DECAY_LAYERS:
            raise ConfigError(f"--weight-decay-layers must be one of"
                              f" {', '.join(WEIGHT_DECAY_LAYERS)}, got {self.weight_decay_layers}")
        if not 0 <= self.early_stopping < 2**31:
            raise ConfigError(f"--early-stopping must be in [0, 2^31), got {self.early_stopping}")
        if self.early_stopping and not self.eval_every:
            raise ConfigError("--early-stopping watches the validation loss: it needs"
                              " --eval-every of at least 1")
        if self.select_model not in SELECT_MODEL:
            raise ConfigError(f"--select-model must be one of {', '.join(SELECT_MODEL)},"
                              f" got {self.select_model}")
        if self.select_model == "best" and not self.eval_every:
            raise ConfigError("--select-model best chooses by the validation loss: it needs"
                              " --eval-every of at least 1")
        if not (math.isfinite(self.gin_eps) and abs(self.gin_eps) <= MAX_GIN_EPS):
            raise ConfigError(f"--gin-eps must be finite with |eps| <= {MAX_GIN_EPS:g},"
                              f" got {self.gin_eps}")
        if self.gin_eps and "gin_eps" not in self.kind.flags:
            raise ConfigError(f"--gin-eps is GIN's (--model gin), not {self.model}'s")
        self._check_attention()
        if self.product_order not in PRODUCT_ORDERS:
            raise ConfigError(f"--product-order must be one of {', '.join(PRODUCT_ORDERS)},"
                              f" got {self.product_order}")
        if self.loss not in LOSSES:
            raise ConfigError(f"--loss must be one of {', '.join(LOSSES)}, got {self.loss}")
        if self.sparse_features not in SPARSE_FEATURES:
            raise ConfigError(f"--sparse-features must be one of {', '.join(SPARSE_FEATURES)},"
                              f" got {self.sparse_features}")

    def _check_attention(self) -> None:
        """Refuse GAT's settings out of range, or given to a kind without attention."""
        for flag, heads in (("--heads", self.heads), ("--output-heads", self.output_heads)):
            if not 1 <= heads <= MAX_HEADS:
                raise ConfigError(f"{flag} must be in [1, {MAX_HEADS}], got {heads}")
        p = self.attention_dropout
        if p is not None and not 0.0 <= p < 1.0:
            raise ConfigError(f"--attention-dropout must be in [0, 1), got {p}")
        if "heads" not in self.kind.flags:
            if self.heads != 1 or self.output_heads != 1 or p is not None:
                raise ConfigError(f"--heads, --output-heads and --attention-dropout are GAT's"
                                  f" (--model gat), not {self.model}'s")
        elif self.hidden % self.heads:
            raise ConfigError(f"--hidden {self.hidden} is the width of --heads {self.heads}"
                              f" concatenated heads: it must be a multiple of it")

    @property
    def attention_p(self) -> float:
        """The drop probability of GAT's attention coefficients."""
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    def sparse_input(self, nonzeros: int, entries: int) -> bool:
        """Whether input features with ``nonzeros`` of ``entries`` stay sparse (CSR)."""
        if self.sparse_features == "auto":
            return nonzeros < SPARSE_FEATURE_DENSITY * entries
        return self.sparse_features == "on"

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype of features, weights and activations."""
        return np.dtype(self.dtype)

    @property
    def itemsize(self) -> int:
        """Bytes per value."""
        return self.numpy_dtype.itemsize

    @property
    def torch_dtype(self) -> torch.dtype:
        """The torch dtype of features, weights and activations (imports torch)."""
        import torch

        return getattr(torch, self.dtype)

    @property
    def kind(self) -> Layer:
        """The layer: ``layer``, or the built-in ``model`` with GIN's ``gin_eps``, GAT's heads.

        With a ``product_order`` other than ``"auto"`` the layer carries it
        (:attr:`~hpcgnn.kinds.Layer.product_order`), so every trace of it, and so every plan
        and cost model, follows the order the models run.
        """
        kind = self.layer if self.layer is not None else KINDS[self.model].configured(
            gin_eps=self.gin_eps, heads=self.heads, output_heads=self.output_heads,
            attention_dropout=self.attention_dropout,
        )
        if self.product_order == PRODUCT_ORDERS[0]:
            return kind
        return kind.replace(product_order=self.product_order)

    @property
    def weights_per_layer(self) -> int:
        """Weight matrices per layer: ``W`` (gcn) or ``W_self, W_neigh`` (sage)."""
        return self.kind.weights_per_layer

    def as_dict(self) -> dict:
        """Plain-dict form for metrics files and checkpoints.

        A layer object is its name (``model``) and, when it has any, its settings
        (``layer_settings``: numbers and text as they are, anything else as its ``repr``).
        """
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "layer"}
        if self.layer is not None:
            settings = {k: v if isinstance(v, (bool, int, float, str)) or v is None else repr(v)
                        for k, v in self.layer.settings().items() if k != "name"}
            if settings:
                out["layer_settings"] = settings
        return out
