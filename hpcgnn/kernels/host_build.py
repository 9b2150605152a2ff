"""Host builds of ``cuda/*.cu``: the real kernel sources compiled as C++17 and run on the CPU.

Each source compiles unchanged with the system C++ compiler (``$CXX``, else ``c++``,
``g++`` or ``clang++``) next to ``cuda/host/shim.h`` (the CUDA names the kernels use;
anything a sequential loop cannot run faithfully, such as ``__syncthreads`` or shared
memory, fails to compile) and ``cuda/host/launch.h`` (the grid loop and the kernel
table). A generated translation unit lists every kernel the loader launches: the template
name expressions of :data:`~hpcgnn.kernels.cuda_modules.NAME_EXPRESSIONS` and every
``extern "C" __global__`` kernel of the source, each with its parameter signature.

- :func:`module` builds a source once per process (cached on disk under
  ``$HPCGNN_HOST_BUILD_DIR`` or ``~/.cache/hpcgnn/host-build``, by a hash of the source,
  the headers, the flags and the compiler; written to a temporary file and renamed, so
  MPI ranks may build at once) and returns a :class:`HostModule`;
- :meth:`HostModule.launch` runs a kernel like ``cudaLaunchKernel``: every (block,
  thread) pair of the grid calls the kernel function once, sequentially. Arguments are
  as for CuPy: host arrays (NumPy arrays, CPU tensors; contiguous) for pointers, NumPy
  scalars for values; their kinds and count are checked against the kernel's parameters
  (``TypeError``: on a GPU a wrong scalar type corrupts silently);
- :class:`LaunchSettings` choose the order of the pairs (natural, reversed, or shuffled
  by a seed) and a cap on the blocks run (``gridDim`` reports the capped grid, as a
  real launch of fewer blocks would), to expose kernels that depend on the thread order
  or skip work past the grid. :func:`launch_settings` sets them for a block of code; the
  default comes from ``$HPCGNN_HOST_ORDER`` (natural | reversed | shuffled),
  ``$HPCGNN_HOST_SEED`` and ``$HPCGNN_HOST_MAX_BLOCKS``, for whole-program runs.

Compiled with ``-O2 -ffp-contract=off`` (no FMA contraction: results equal the NumPy and
torch twins bit for bit). ``sanitize=True`` (or ``$HPCGNN_HOST_SANITIZE=1``) builds with
AddressSanitizer and UBSan instead, which needs the ASan runtime preloaded into Python
(``LD_PRELOAD=$(c++ -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0``, see
:func:`asan_runtime`).
"""

from __future__ import annotations

import contextvars
import ctypes
import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from hpcgnn.errors import ConfigError
from hpcgnn.kernels.cuda_modules import NAME_EXPRESSIONS, cuda_dir, source_text
from hpcgnn.utils.files import atomic_path, atomic_write

#: Folder of the built libraries (default ``$XDG_CACHE_HOME`` or ``~/.cache``, then
#: ``hpcgnn/host-build``).
BUILD_DIR_ENV = "HPCGNN_HOST_BUILD_DIR"
#: Default thread order of a launch: ``natural``, ``reversed`` or ``shuffled``.
ORDER_ENV = "HPCGNN_HOST_ORDER"
#: Default seed of the shuffled order (an integer in ``[0, 2^64)``).
SEED_ENV = "HPCGNN_HOST_SEED"
#: Default cap on the blocks a launch runs (a positive integer; unset: no cap).
MAX_BLOCKS_ENV = "HPCGNN_HOST_MAX_BLOCKS"
#: ``1``: :func:`module` returns sanitizer builds by default.
SANITIZE_ENV = "HPCGNN_HOST_SANITIZE"

#: Thread orders, by their code in ``launch.h``.
ORDERS = ("natural", "reversed", "shuffled")
#: Compiler flags of a build, and of a sanitizer build (hidden visibility: only the entry
#: points of ``launch.h`` are exported, so the kernels inline into the grid loop).
FLAGS = ("-O2", "-std=c++17", "-fPIC", "-shared", "-ffp-contract=off", "-fvisibility=hidden")
SANITIZE_FLAGS = (
    "-O1", "-g", "-std=c++17", "-fPIC", "-shared", "-ffp-contract=off", "-fvisibility=hidden",
    "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
)

#: CUDA's launch limits: grid x, y, z; block x, y, z; threads per block.
_GRID_LIMITS = (2**31 - 1, 65535, 65535)
_BLOCK_LIMITS = (1024, 1024, 64)
_BLOCK_THREADS = 1024

_EXTERN_C = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')


@dataclass(frozen=True)
class LaunchSettings:
    """How a host launch runs the (block, thread) pairs of its grid.

    Attributes
    ----------
    order : str
        ``natural`` (block by block, threads in order), ``reversed`` (the same, backwards)
        or ``shuffled`` (a permutation of all pairs drawn from ``seed``).
    seed : int
        Seed of the shuffled order, in ``[0, 2^64)``.
    max_blocks : int or None
        Run at most this many blocks along x (``gridDim.x`` says so): the kernels'
        grid-stride loops must then cover the rest. ``None``: the grid as launched.
    """

    order: str = "natural"
    seed: int = 0
    max_blocks: int | None = None

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"thread order {self.order!r}: not one of {', '.join(ORDERS)}")
        if not 0 <= self.seed < 2**64:
            raise ValueError(f"seed {self.seed}: not in [0, 2^64)")
        if self.max_blocks is not None and self.max_blocks < 1:
            raise ValueError(f"max_blocks {self.max_blocks}: not positive")

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> LaunchSettings:
        """The settings of ``$HPCGNN_HOST_ORDER``, ``_SEED`` and ``_MAX_BLOCKS``.

        Raises
        ------
        ConfigError
            When a variable is set to something invalid (naming the variable).
        """
        values: dict[str, Any] = {}
        order = env.get(ORDER_ENV, "").strip()
        if order:
            values["order"] = order
        for var, field in ((SEED_ENV, "seed"), (MAX_BLOCKS_ENV, "max_blocks")):
            text = env.get(var, "").strip()
            if text:
                try:
                    values[field] = int(text)
                except ValueError:
                    raise ConfigError(f"${var}={text!r}: not an integer") from None
        try:
            return cls(**values)
        except ValueError as err:
            names = ", ".join(f"${v}" for v in (ORDER_ENV, SEED_ENV, MAX_BLOCKS_ENV))
            raise ConfigError(f"{names}: {err}") from None


_SETTINGS: contextvars.ContextVar[LaunchSettings | None] = contextvars.ContextVar(
    "hpcgnn_host_launch_settings", default=None
)


def current_settings() -> LaunchSettings:
    """The settings launches use now: :func:`launch_settings`' if inside one, else the env's."""
    settings = _SETTINGS.get()
    return LaunchSettings.from_env() if settings is None else settings


@contextmanager
def launch_settings(settings: LaunchSettings) -> Iterator[LaunchSettings]:
    """Run the host launches of the ``with`` block under ``settings`` (not the env's)."""
    token = _SETTINGS.set(settings)
    try:
        yield settings
    finally:
        _SETTINGS.reset(token)


def compiler() -> tuple[str, ...]:
    """The C++ compiler command: ``$CXX``, else ``c++``, ``g++`` or ``clang++`` on ``PATH``.

    ``$CXX`` is split like a shell would (``"ccache g++"``).

    Raises
    ------
    ConfigError
        When there is none (one line).
    """
    env = os.environ.get("CXX", "").strip()
    if env:
        argv = tuple(shlex.split(env))
        if shutil.which(argv[0]) is None:
            raise ConfigError(f"$CXX={env!r}: no such compiler, needed to build cuda/*.cu")
        return argv
    for name in ("c++", "g++", "clang++"):
        path = shutil.which(name)
        if path is not None:
            return (path,)
    raise ConfigError("no C++ compiler to build cuda/*.cu on the host: install g++ or set $CXX")


@functools.cache
def _compiler_id(cxx: tuple[str, ...]) -> str:
    """What identifies a compiler in the cache key: its resolved path and ``--version``."""
    done = subprocess.run([*cxx, "--version"], capture_output=True, text=True, check=False)
    return f"{os.path.realpath(shutil.which(cxx[0]) or cxx[0])}\n{done.stdout}"


def asan_runtime() -> Path | None:
    """The compiler's AddressSanitizer runtime (``-print-file-name=libasan.so``), or None.

    What a sanitizer build needs preloaded (``LD_PRELOAD``) into the Python that loads it.
    """
    done = subprocess.run([*compiler(), "-print-file-name=libasan.so"], capture_output=True,
                          text=True, check=False)
    path = Path(done.stdout.strip())
    return path if path.is_absolute() and path.is_file() else None


def build_dir() -> Path:
    """Where built libraries are kept: ``$HPCGNN_HOST_BUILD_DIR``, else a user cache dir."""
    env = os.environ.get(BUILD_DIR_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "hpcgnn" / "host-build"


def _include(path: Path) -> str:
    return '#include "' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"\n'


def _translation_unit(folder: Path, source: str, text: str) -> str:
    """The C++ text that builds ``source`` (``text``, headers inlined) with its kernel table."""
    code = re.sub(r"//[^\n]*", "", text)
    names = [*NAME_EXPRESSIONS.get(source, ()), *_EXTERN_C.findall(code)]
    if not names:
        raise ConfigError(f"{folder / source}: no kernel to build (no extern \"C\" "
                          "__global__ function and no NAME_EXPRESSIONS entry)")
    entries = "".join(f'    HPCGNN_HOST_KERNEL("{name}", &{name}),\n' for name in names)
    return (
        f"// The host build of {source}, generated by hpcgnn.kernels.host_build.\n"
        + _include(folder / "host" / "shim.h") + _include(folder / source)
        + _include(folder / "host" / "launch.h")
        + "\nextern const hpcgnn_host::Entry hpcgnn_host_table[] = {\n"
        + entries + "    {nullptr, nullptr, nullptr},\n};\n"
    )


def _build(folder: Path, source: str, sanitize: bool) -> Path:
    """The shared library of ``source``: from the cache, or compiled into it."""
    headers = [folder / "host" / "shim.h", folder / "host" / "launch.h"]
    missing = [str(h) for h in headers if not h.is_file()]
    if missing:
        raise ConfigError(f"host build of {source}: missing {', '.join(missing)}")
    cxx = compiler()
    flags = SANITIZE_FLAGS if sanitize else FLAGS
    text = source_text(folder, source)
    unit = _translation_unit(folder, source, text)
    key = "\0".join([unit, text, *(h.read_text() for h in headers), *flags, *cxx,
                     _compiler_id(cxx)])
    stem = f"{Path(source).stem}-{'asan-' if sanitize else ''}"
    stem += hashlib.sha256(key.encode()).hexdigest()[:20]
    library = build_dir() / f"{stem}.so"
    if library.is_file():
        return library
    code = atomic_write(library.with_suffix(".cpp"), unit, "host build source")
    with atomic_path(library, "host build") as tmp:
        cmd = [*cxx, *flags, "-o", str(tmp), str(code)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(
                f"host build of {source} failed: {shlex.join(cmd)}\n{done.stderr.strip()}"
            )
    return library


def _asan_loaded() -> bool:
    """Whether an ASan runtime is mapped into this process (True when we cannot tell)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return True
    return "libasan" in maps or "libclang_rt.asan" in maps


def module(source: str, sanitize: bool | None = None) -> HostModule:
    """The host build of ``source`` (a file name of :func:`cuda_dir`), built at first use.

    Parameters
    ----------
    source
        E.g. ``"rows.cu"``.
    sanitize
        AddressSanitizer + UBSan build (``-O1``; the ASan runtime must be preloaded).
        ``None``: ``$HPCGNN_HOST_SANITIZE == "1"``.

    Raises
    ------
    ConfigError
        No C++ compiler; no shim headers; a sanitizer build without the ASan runtime.
    RuntimeError
        The compiler refused the source (its messages included).
    """
    if sanitize is None:
        sanitize = os.environ.get(SANITIZE_ENV, "").strip() == "1"
    return _module(cuda_dir(), source, sanitize)


@functools.cache
def _module(folder: Path, source: str, sanitize: bool) -> HostModule:
    """:func:`module`, once per process and (folder, source, variant)."""
    if sanitize and not _asan_loaded():
        runtime = asan_runtime()
        raise ConfigError(
            f"a sanitizer host build needs the ASan runtime preloaded: run Python with "
            f"LD_PRELOAD={runtime or 'libasan.so'} ASAN_OPTIONS=detect_leaks=0"
        )
    return HostModule(_build(folder, source, sanitize), source)


def _kind(dtype: Any) -> str:
    """The kind of a NumPy dtype as ``launch.h`` writes it: ``i8``, ``u4``, ``f8``, ``b1``."""
    return f"{dtype.kind}{dtype.itemsize}"


def _tensor_kind(t: Any) -> str:
    """The kind of a torch tensor's elements (without importing torch)."""
    dtype = t.dtype
    if str(dtype) == "torch.bool":
        letter = "b"
    elif dtype.is_floating_point:
        letter = "f"
    elif dtype.is_complex:
        letter = "c"
    else:
        letter = "i" if dtype.is_signed else "u"
    return f"{letter}{t.element_size()}"


def _pointer(arg: Any, where: str) -> tuple[int, str]:
    """Address and element kind of a host array argument (NumPy array or CPU tensor)."""
    if isinstance(arg, np.ndarray):
        if not arg.flags.c_contiguous:
            raise ValueError(f"{where}: the array is not C-contiguous")
        return arg.ctypes.data, _kind(arg.dtype)
    if any(c.__module__.split(".")[0] == "torch" for c in type(arg).__mro__):  # and subclasses
        if not arg.is_contiguous():
            raise ValueError(f"{where}: the tensor is not contiguous")
        return arg.data_ptr(), _tensor_kind(arg)
    raise TypeError(f"{where}: a pointer parameter takes a NumPy array or a host tensor, "
                    f"not {type(arg).__name__}")


def _same_element(got: str, want: str) -> bool:
    """Whether an array of ``got`` elements fits a pointer to ``want`` (sign ignored)."""
    if not want or want.startswith("*"):
        return True
    return got.replace("u", "i") == want.replace("u", "i")


def _dims(value: int | Sequence[int], limits: tuple[int, ...], what: str) -> np.ndarray:
    """A launch dimension as three ``uint32``; ``ValueError`` outside CUDA's limits."""
    if np.ndim(value) == 0:  # an int or a NumPy scalar
        dims = [int(cast(int, value))]
    else:
        dims = [int(v) for v in cast(Sequence[int], value)]
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"{what} {value}: one to three dimensions")
    dims += [1] * (3 - len(dims))
    if any(not 1 <= d <= lim for d, lim in zip(dims, limits, strict=True)):
        raise ValueError(f"{what} {value}: invalid for a CUDA launch (limits {limits})")
    return np.array(dims, dtype=np.uint32)


class HostModule:
    """The host build of one source: its kernels, by the names the loader launches.

    Parameters
    ----------
    library
        The built shared library.
    source
        The source it was built from (for messages).
    """

    def __init__(self, library: Path, source: str) -> None:
        self.source = source
        self.library = library
        lib = ctypes.CDLL(str(library))
        lib.hpcgnn_host_count.restype = ctypes.c_int
        for fn in (lib.hpcgnn_host_name, lib.hpcgnn_host_signature):
            fn.argtypes = [ctypes.c_int]
            fn.restype = ctypes.c_char_p
        lib.hpcgnn_host_launch.argtypes = [ctypes.c_int, *[ctypes.c_void_p] * 3, ctypes.c_int,
                                           ctypes.c_uint64]
        lib.hpcgnn_host_launch.restype = None
        self._lib = lib
        self._index: dict[str, int] = {}
        self._signatures: dict[str, tuple[str, ...]] = {}
        for k in range(lib.hpcgnn_host_count()):
            name = lib.hpcgnn_host_name(k).decode()
            self._index[name] = k
            self._signatures[name] = tuple(lib.hpcgnn_host_signature(k).decode().split())

    @property
    def names(self) -> tuple[str, ...]:
        """The kernels of the build, by launch name."""
        return tuple(self._index)

    def signature(self, name: str) -> tuple[str, ...]:
        """Kernel ``name``'s parameter kinds: ``i8`` / ``u8`` / ``f4`` / ``b1`` / ``*f4`` ..."""
        if name not in self._index:
            raise KeyError(f"{self.source} has no kernel {name!r} (it has {', '.join(self.names)})")
        return self._signatures[name]

    def _pack(self, name: str, args: Sequence[Any]) -> list[np.ndarray]:
        """One buffer holding each argument's value (an address for a pointer), checked."""
        kinds = self.signature(name)
        if len(args) != len(kinds):
            raise TypeError(f"{self.source} {name}: {len(kinds)} arguments ({' '.join(kinds)}), "
                            f"got {len(args)}")
        values = []
        for pos, (arg, kind) in enumerate(zip(args, kinds, strict=True)):
            where = f"{self.source} {name} argument {pos} ({kind})"
            if kind.startswith("*"):
                address, element = _pointer(arg, where)
                if not _same_element(element, kind[1:]):
                    raise TypeError(f"{where}: got an array of {element}")
                values.append(np.array([address], dtype=np.uintp))
            elif isinstance(arg, np.generic) and _kind(arg.dtype) == kind:
                values.append(np.array(arg))
            else:
                got = _kind(arg.dtype) if isinstance(arg, np.generic) else type(arg).__name__
                raise TypeError(f"{where}: got {got}; pass a NumPy scalar of that kind")
        return values

    def launch(
        self, name: str, grid: int | Sequence[int], block: int | Sequence[int],
        args: Sequence[Any],
    ) -> None:
        """Run kernel ``name`` on ``grid`` blocks of ``block`` threads, sequentially.

        Parameters
        ----------
        name
            A launch name (:attr:`names`).
        grid, block
            Sizes, an int or up to three (x, y, z), within CUDA's limits (``ValueError``
            otherwise, as a GPU refuses them: a zero grid included).
        args
            One per kernel parameter: a C-contiguous NumPy array or contiguous host tensor
            (its address) for a pointer, whose elements must have the pointee's kind and
            size (signedness aside); a NumPy scalar of exactly the parameter's type for a
            value (``np.int64`` for ``long long``, ``np.uint64``, ``np.float64``,
            ``np.int32``, ``np.float32``, ``np.bool_``).

        Raises
        ------
        TypeError
            Arguments that do not fit the kernel's parameters (count or kind).

        Notes
        -----
        The order of the pairs and a cap on the blocks come from :func:`current_settings`.
        """
        values = self._pack(name, args)
        grid_dims = _dims(grid, _GRID_LIMITS, "grid")
        block_dims = _dims(block, _BLOCK_LIMITS, "block")
        if int(np.prod(block_dims)) > _BLOCK_THREADS:
            raise ValueError(f"block {block}: more than {_BLOCK_THREADS} threads")
        settings = current_settings()
        if settings.max_blocks is not None:
            grid_dims[0] = min(int(grid_dims[0]), settings.max_blocks)
        pointers = np.array([v.ctypes.data for v in values], dtype=np.uintp)
        self._lib.hpcgnn_host_launch(
            self._index[name], grid_dims.ctypes.data, block_dims.ctypes.data,
            pointers.ctypes.data, ORDERS.index(settings.order), settings.seed,
        )
