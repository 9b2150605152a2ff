"""An emulated CUDA device: host tensors tagged as device tensors, checked like a GPU.

``HPCGNN_EMULATE_CUDA=1`` makes ``--device cuda`` (and ``HPCGNN_TEST_DEVICE=cuda``) run
on this emulation where no GPU is visible, so CI runs the GPU code path: the cuda
:class:`~hpcgnn.backend.device.Device`, its pinned host tier, the CUDA-aware and staged
wires, the kernel launches (on the host builds of ``cuda/*.cu``,
:mod:`hpcgnn.kernels.host_build`) and every host<->device transfer.

How. A tensor in emulated device memory is an ordinary host tensor whose Python object
carries a device tag. Two torch modes, installed together by :func:`activate`:

- :class:`_Api` (a ``TorchFunctionMode``) makes the tagged tensors look like CUDA
  tensors to Python: ``t.device`` is ``cuda:i``, ``t.is_cuda`` is true, ``t.numpy()``
  refuses as torch does; factories asked for ``device="cuda"`` allocate on the host and
  tag; ``t.to("cuda")`` / ``t.cuda()`` / ``t.cpu()`` / ``torch.as_tensor(..., device=...)``
  are real copies (a device tensor never shares memory with a host one);
  ``pin_memory=True`` gives a host tensor marked pinned.
- :class:`_Placement` (a ``TorchDispatchMode``) sees every ATen operation, the
  backward's included: it tags the results of operations on tagged tensors, and raises
  :class:`MixedDeviceError` naming the operation and the calling ``file:line`` for any
  operation that combines a tagged tensor with an untagged one of one or more dimensions
  (0-dim host tensors are scalars, as on a GPU). ``copy_`` is the one operation that
  may cross (it is how a transfer is written, ``dst[a:b] = src`` included).

Tensors that torch's own decompositions allocate (a factory below a Python-level call)
are *fresh*: they take the placement of what they are combined with; a factory called
from Python without a device is host memory, as on a GPU machine.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from hpcgnn.utils.memory import available_bytes

#: Environment variable that turns the emulated CUDA device on (``1``).
EMULATE_ENV = "HPCGNN_EMULATE_CUDA"
#: Name of the emulated GPU (``Device.name``, the metrics' ``device`` section).
NAME = "emulated CUDA device (host memory)"

_TAG = "_hpcgnn_cuda"  # device index of a tensor in emulated device memory
_FRESH = "_hpcgnn_fresh"  # allocated by a decomposition: placement not decided
_PINNED = "_hpcgnn_pinned"  # page-locked host memory (emulated)

#: ATen operations that may combine device and host tensors: the transfers.
_CROSSING = {torch.ops.aten.copy_.default, torch.ops.aten._copy_from.default}

_TORCH_DIR = str(Path(torch.__file__).resolve().parent)
_HERE = str(Path(__file__).resolve())


#: What the emulated device did, counted since the process started (tests take differences):
#: ``h2d`` / ``d2h`` transfers (copies, ``.to``, data constructors called for the device),
#: ``scalar`` reads of a device scalar (``item()``, ``float(t)``: a wait on a GPU), and
#: ``synchronize`` / ``event_synchronize`` calls of the runtime and its events.
COUNTS: Counter[str] = Counter()


def synchronisations() -> int:
    """Times the host has waited for the device so far, but for a message's own data.

    Stream and event synchronisations and scalar reads. A device-to-host copy waits too,
    for the work that wrote its source; those of the staged wire are one per message (a
    host-driven MPI needs the bytes before the call) and count apart (``d2h``).
    """
    return COUNTS["synchronize"] + COUNTS["event_synchronize"] + COUNTS["scalar"]


class MixedDeviceError(RuntimeError):
    """An operation combined emulated device memory with host memory."""


def requested() -> bool:
    """Whether ``$HPCGNN_EMULATE_CUDA`` asks for the emulated device."""
    return os.environ.get(EMULATE_ENV, "").strip() == "1"


def is_active() -> bool:
    """Whether the emulation's modes are installed in this process (its kernels run too)."""
    return _depth > 0


def device_index(t: torch.Tensor) -> int | None:
    """The emulated GPU holding ``t``, or ``None`` for host memory."""
    return getattr(t, _TAG, None)


def _tag(t: Any, index: int) -> None:
    if isinstance(t, torch.Tensor):
        setattr(t, _TAG, index)
        if _FRESH in t.__dict__:
            delattr(t, _FRESH)


def _host(t: Any) -> None:
    if isinstance(t, torch.Tensor):
        for attr in (_TAG, _FRESH):
            if attr in t.__dict__:
                delattr(t, attr)


def caller() -> str:
    """``file:line (function)`` of the innermost frame outside torch and this module."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_TORCH_DIR) and name != _HERE and "/torch/" not in name:
            return f"{name}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return "<unknown>"


class _Placement(TorchDispatchMode):
    """Propagates device tags through every ATen operation and refuses mixed ones."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        device = host = None
        for t in tensors:
            index = getattr(t, _TAG, None)
            if index is not None:
                if device is not None and index != device:
                    raise MixedDeviceError(
                        f"{func} combines tensors on cuda:{device} and cuda:{index} "
                        f"at {caller()}"
                    )
                device = index
            elif host is None and t.dim() > 0 and not getattr(t, _FRESH, False):
                host = t
        if device is not None and host is not None and func not in _CROSSING:
            raise MixedDeviceError(
                f"{func} combines a cuda:{device} tensor with a host tensor of shape "
                f"{tuple(host.shape)} at {caller()}"
            )
        out = func(*args, **kwargs)
        if func in _CROSSING:
            dst, src = (hasattr(t, _TAG) for t in args[:2])
            if dst != src:
                COUNTS["h2d" if dst else "d2h"] += 1
            return out
        if func is torch.ops.aten._local_scalar_dense.default and device is not None:
            COUNTS["scalar"] += 1
        fresh = not tensors or all(getattr(t, _FRESH, False) for t in tensors)
        ids = {id(t) for t in tensors}
        for o in tree_leaves(out):
            if not isinstance(o, torch.Tensor) or id(o) in ids:
                continue  # an in-place result keeps its placement
            if device is not None:
                _tag(o, device)
            elif fresh:
                setattr(o, _FRESH, True)
        return out


def _cuda_index(device: Any) -> int | None:
    """The GPU index of a ``device=`` argument naming cuda, else ``None``."""
    if device is None:
        return None
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "cuda":
        return None
    return 0 if d.index is None else d.index


def _target(t: torch.Tensor, args: tuple, kwargs: dict) -> tuple[Any, dict]:
    """``Tensor.to``'s target device and its arguments without the device."""
    if args and isinstance(args[0], torch.Tensor):
        other = args[0]
        index = getattr(other, _TAG, None)
        return (torch.device("cuda", index) if index is not None else torch.device("cpu"),
                {"dtype": other.dtype, **{k: v for k, v in kwargs.items() if k == "copy"}})
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    device, dtype, _, memory_format = torch._C._nn._parse_to(*args, **kwargs)
    rest: dict[str, Any] = {"dtype": dtype or t.dtype}
    if copy:
        rest["copy"] = True
    if memory_format is not None:
        rest["memory_format"] = memory_format
    return device, rest


def _move(t: torch.Tensor, device: Any, rest: dict) -> torch.Tensor:
    """``t`` on ``device`` (``None``: where it is) with ``rest`` (dtype, copy): real copies."""
    src = getattr(t, _TAG, None)
    dst = src if device is None else _cuda_index(device)
    if dst == src:
        return torch.Tensor.to(t, **rest)
    out = torch.Tensor.to(t, **{**rest, "copy": True})  # a transfer: never the same memory
    if dst is None:
        _host(out)
    else:
        _tag(out, dst)
    if (src is None) != (dst is None):
        COUNTS["h2d" if src is None else "d2h"] += 1
    return out


def _refuse_numpy(t: torch.Tensor) -> None:
    """Raise as torch does for ``t.numpy()`` of a device tensor; host tensors pass."""
    index = getattr(t, _TAG, None)
    if index is not None:
        raise TypeError(
            f"can't convert cuda:{index} device type tensor to numpy. Use Tensor.cpu() to "
            f"copy the tensor to host memory first. (emulated CUDA, at {caller()})"
        )


def _set_data(t: torch.Tensor, value: torch.Tensor) -> None:
    """``t.data = value``: ``t`` takes ``value``'s memory, so its placement too.

    How ``nn.Module.to`` moves parameters (``param.data = param.to(device)``).
    """
    _T.data.__set__(t, value)  # type: ignore[attr-defined]  # a getset descriptor
    index = getattr(value, _TAG, None)
    if index is None:
        _host(t)
    else:
        _tag(t, index)


_T = torch.Tensor
_HANDLERS: dict[Any, Callable[..., Any]] = {
    _T.data.__set__: _set_data,  # type: ignore[attr-defined]
    _T.device.__get__: lambda t: (
        torch.device("cuda", getattr(t, _TAG)) if hasattr(t, _TAG) else _T.device.__get__(t)
    ),
    # torch's stubs declare ``is_cuda`` a plain bool; at run time it is a getset descriptor
    _T.is_cuda.__get__: lambda t: hasattr(t, _TAG),  # type: ignore[attr-defined]
    _T.get_device: lambda t: getattr(t, _TAG, -1),
    _T.is_pinned: lambda t, *a, **k: bool(getattr(t, _PINNED, False)),
    _T.to: lambda t, *a, **k: _move(t, *_target(t, a, dict(k))),
    _T.cuda: lambda t, device=None, non_blocking=False, **k: _move(
        t, torch.device("cuda", _cuda_index(device) or 0), {"dtype": t.dtype}
    ),
    _T.cpu: lambda t, *a, **k: _move(t, torch.device("cpu"), {"dtype": t.dtype}),
}

#: Constructors that take data: called for the device, they copy it (a transfer).
_DATA_CONSTRUCTORS = {
    torch.as_tensor, torch.asarray, torch.tensor, torch.sparse_csr_tensor,
    torch.sparse_coo_tensor, torch.sparse_compressed_tensor,
}


def _clone(x: Any) -> Any:
    """A host copy of host data ``x`` (device tensors and non-arrays as they are)."""
    if isinstance(x, torch.Tensor):
        return x if hasattr(x, _TAG) else x.clone()
    if hasattr(x, "__array__") and not isinstance(x, (int, float)):
        return np.array(x, copy=True)
    return x


class _Api(TorchFunctionMode):
    """The CUDA face of tagged tensors: devices, factories, transfers, pinned memory."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func)
        if handler is not None:
            return handler(*args, **kwargs)
        if func in (_T.numpy, _T.__array__):
            _refuse_numpy(args[0])
            return func(*args, **kwargs)
        if func is _T.pin_memory:
            t = args[0]
            if hasattr(t, _TAG):
                raise RuntimeError(f"cannot pin a cuda tensor (emulated CUDA, at {caller()})")
            out = t.clone()
            setattr(out, _PINNED, True)
            return out
        pinned = bool(kwargs.get("pin_memory"))
        if pinned:
            kwargs = {**kwargs, "pin_memory": False}
        index = _cuda_index(kwargs.get("device"))
        if index is not None:
            kwargs = {**kwargs, "device": "cpu"}
            if func in _DATA_CONSTRUCTORS:
                args = tuple(_clone(a) for a in args)
                COUNTS["h2d"] += 1
        out = func(*args, **kwargs)
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        tagged = next((t._hpcgnn_cuda for t in inputs if hasattr(t, _TAG)), None)
        for o in tree_leaves(out):
            if not isinstance(o, torch.Tensor):
                continue
            if index is not None:
                _tag(o, index)
            elif "device" in kwargs or not inputs:
                _host(o)  # a factory of host memory
            elif tagged is not None and not hasattr(o, _TAG):
                _tag(o, tagged)  # e.g. ``t.data``: an alias the dispatcher does not see
            if pinned:
                setattr(o, _PINNED, True)
        return out


_depth = 0
_modes: list[Any] = []
# The emulation replaces this method of torch's class while it is on (``activate``,
# ``emulated``): mypy flags a method assignment, hence the ``method-assign`` ignores below.
_Backward = torch.autograd.function.BackwardCFunction
_backward_apply = _Backward.apply


def _apply_backward(self: Any, *args: Any) -> Any:
    """A custom ``autograd.Function``'s backward, with the CUDA face of tagged tensors.

    The autograd engine runs a backward with torch function modes off (dispatch modes
    stay on): without this, ``torch.zeros(..., device="cuda")`` in a backward would ask
    for the real CUDA runtime.
    """
    if _depth and not torch._C._is_torch_function_mode_enabled():
        with _Api():
            return _backward_apply(self, *args)
    return _backward_apply(self, *args)


def activate() -> None:
    """Install the emulation in this process for good (``--device cuda`` under it)."""
    global _depth
    if _depth:
        return
    _modes[:] = [_Api(), _Placement()]
    for mode in _modes:
        mode.__enter__()
    _Backward.apply = _apply_backward  # type: ignore[method-assign]
    _depth = 1


@contextmanager
def emulated() -> Iterator[None]:
    """The emulation for the ``with`` block only (tests); nests inside :func:`activate`."""
    global _depth
    if _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    with _Api(), _Placement():
        _depth = 1
        _Backward.apply = _apply_backward  # type: ignore[method-assign]
        try:
            yield
        finally:
            _depth = 0
            _Backward.apply = _backward_apply  # type: ignore[method-assign]


class EmulatedEvent:
    """A CUDA event of the emulation: the host clock when recorded.

    :meth:`elapsed_time` rounds to float32 milliseconds as ``cudaEventElapsedTime`` does,
    so the device clock's handling of that precision is tested on the host.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._t: float | None = None

    def record(self, stream: Any = None) -> None:
        """Take the time (the emulated stream has no queued work)."""
        self._t = self._clock()

    def synchronize(self) -> None:
        """Nothing to wait for (counted in :data:`COUNTS`)."""
        COUNTS["event_synchronize"] += 1

    def elapsed_time(self, end: EmulatedEvent) -> float:
        """Milliseconds from this event to ``end``, as a float32."""
        assert self._t is not None and end._t is not None, "event not recorded"
        return float(np.float32((end._t - self._t) * 1e3))


class EmulatedRuntime:
    """The CUDA runtime calls of :class:`~hpcgnn.backend.device.Device`, emulated.

    One GPU, named :data:`NAME`; streams are empty (everything runs when called), so
    synchronising does nothing and a stream handle is 0.
    """

    def device_count(self) -> int:
        """One emulated GPU."""
        return 1

    def set_device(self, index: int) -> None:
        """Nothing to select."""

    def name(self, index: int) -> str:
        """:data:`NAME`."""
        return NAME

    def synchronize(self, index: int) -> None:
        """Nothing is queued (counted in :data:`COUNTS`)."""
        COUNTS["synchronize"] += 1

    def free_bytes(self, index: int) -> int | None:
        """The host's available memory: the emulated GPU's memory is the host's."""
        avail = available_bytes()
        return None if avail is None else int(avail)

    def peak_bytes(self, index: int) -> int | None:
        """``None``: the emulated GPU's memory is host memory, not counted apart.

        Its tensors are in the process's peak resident set like every host allocation
        (:func:`hpcgnn.utils.memory.peak_rss_bytes`).
        """
        return None

    def event(self) -> EmulatedEvent:
        """A new :class:`EmulatedEvent`."""
        return EmulatedEvent()
