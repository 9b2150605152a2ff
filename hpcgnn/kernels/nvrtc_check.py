"""Compile every CUDA source through CuPy's own NVRTC path, without a GPU or a driver.

``python -m hpcgnn.kernels.nvrtc_check [--arch sm_80,sm_90]`` (``make nvrtc`` runs it under
CuPy for CUDA 12 and for CUDA 13). For every ``cuda/*.cu`` (found by
:func:`~hpcgnn.kernels.cuda_modules.cuda_dir`, headers inlined by
:func:`~hpcgnn.kernels.cuda_modules.source_text`) and every arch it

- compiles the source the way ``cupy.RawModule(code=..., options=..., name_expressions=...)``
  does: ``cupy._core.core.compile_with_cache(code, options, prepend_cupy_headers=False,
  backend="nvrtc", name_expressions=...)``, the call of CuPy's ``_get_raw_module``, with the
  loader's options (``cuda_modules.COMPILE_OPTIONS``) and name expressions
  (``cuda_modules.NAME_EXPRESSIONS``). So NVRTC sees the options a node would give it: CuPy
  adds its include paths, ``-ftz=true``, ``-arch=sm_XX`` and
  ``--device-as-default-execution-space`` around the loader's;
- checks that every name expression has a lowered (mangled) name, that each lowered name and
  each ``extern "C" __global__`` kernel of the source is an entry of the binary (the cubin
  CuPy makes for an arch its NVRTC knows, else PTX), and that every ``--ftz``, ``--fmad``,
  ``--prec-div``, ``--prec-sqrt`` the loader sets is the value NVRTC ends up with (NVRTC
  takes the last occurrence of an option, and CuPy appends ``-ftz=true`` after the loader's
  options);
- prints one line per source and arch, and one ``FAIL`` line per problem; the exit status is
  1 when anything failed, 2 when CuPy cannot be used at all.

Three private pieces of CuPy are replaced while a source compiles, and restored after: the
per-device memo around ``cupy.cuda.compiler._get_arch_for_options_for_nvrtc`` (it asks the
driver for the current device even when the arch is given; the function it wraps does not),
``cupy.cuda.compiler.function.Module`` (a subclass that keeps the binary instead of loading
it into a CUDA context), and ``cupy.cuda.compiler._NVRTCProgram`` (a subclass that records
the options NVRTC gets). ``CUPY_CACHE_IN_MEMORY=1`` is set meanwhile, so nothing is read
from or written to CuPy's kernel cache on disk (a cache hit would skip compiling).

Only ``cuda_modules`` is imported from hpcgnn (it imports neither torch nor CuPy at import
time): the check runs in a small environment of NumPy, CuPy and the NVRTC wheels.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import struct
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hpcgnn.errors import HpcgnnError
from hpcgnn.kernels import cuda_modules as cm

#: The archs compiled when ``--arch`` is not given (those of ``make ptx`` that NVRTC 12 and
#: 13 both know: CUDA 13 dropped sm_70).
DEFAULT_ARCHS = ("80", "90")
#: The loader's NVRTC options: ``cuda_modules.COMPILE_OPTIONS`` once it exists.
FALLBACK_OPTIONS = ("-std=c++17",)
#: Options whose effective value (the last occurrence) must be the loader's.
VALUE_FLAGS = ("ftz", "fmad", "prec-div", "prec-sqrt")
#: ``--use_fast_math`` sets these (NVRTC documentation of the option).
FAST_MATH = {"ftz": "true", "fmad": "true", "prec-div": "false", "prec-sqrt": "false"}

#: ELF symbol type of a function, and the ``st_other`` bit NVIDIA's cubins set on kernels.
_STT_FUNC = 2
_STO_CUDA_ENTRY = 0x10


class CheckError(Exception):
    """CuPy is missing, or its compile path is not the one this check knows."""


def loader_options() -> tuple[str, ...]:
    """The options the loader gives NVRTC (``cuda_modules.COMPILE_OPTIONS``)."""
    return tuple(getattr(cm, "COMPILE_OPTIONS", FALLBACK_OPTIONS))


def parse_archs(text: str) -> tuple[str, ...]:
    """``"sm_80,sm_90"`` (or ``"80,90"``) as CuPy's arch strings ``("80", "90")``."""
    archs = []
    for part in text.split(","):
        word = part.strip()
        digits = word.removeprefix("sm_")
        if not re.fullmatch(r"[1-9][0-9]{1,2}", digits):  # CuPy takes int(arch)
            raise ValueError(f"bad arch {word!r}: expected sm_NN (e.g. sm_80)")
        archs.append(digits)
    if not archs:
        raise ValueError("no arch given")
    return tuple(dict.fromkeys(archs))


def strip_comments(code: str) -> str:
    """``code`` with its ``//`` and ``/* */`` comments blanked (string literals kept)."""
    out = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            out.append(code[i : j + 1])
            i = j + 1
        elif code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            end = n if j < 0 else j + 2
            out.append(" " + "\n" * code.count("\n", i, end))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


_EXTERN_C = re.compile(r'\bextern\s+"C"\s*(\{)?')
# A kernel's declaration from __global__ on: specifiers, the return type, then its name.
_GLOBAL = re.compile(
    r"\b__global__\s+(?:(?:__launch_bounds__\s*\([^)]*\)|__noinline__|__forceinline__|"
    r"static|inline)\s+)*void\s+([A-Za-z_]\w*)\s*\("
)


def _matching_brace(code: str, start: int) -> int:
    """Index just past the ``}`` closing the ``{`` at ``start`` (``len(code)`` if none)."""
    depth = 0
    for i in range(start, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


def extern_c_kernels(code: str) -> tuple[str, ...]:
    """Names of the ``extern "C"`` ``__global__`` functions of a CUDA source, in order.

    Both ``extern "C" __global__ void f(...)`` and the kernels inside an
    ``extern "C" { ... }`` block; comments are ignored.
    """
    code = strip_comments(code)
    names = []
    pos = 0
    while (m := _EXTERN_C.search(code, pos)) is not None:
        if m.group(1):  # extern "C" { ... }
            end = _matching_brace(code, m.start(1))
            names += [g.group(1) for g in _GLOBAL.finditer(code, m.end(), end)]
            pos = end
            continue
        g = _GLOBAL.match(code, m.end())
        if g is not None:
            names.append(g.group(1))
        pos = m.end()
    return tuple(dict.fromkeys(names))


def _elf_symbols(data: bytes) -> Iterator[tuple[str, int, int, int]]:
    """``(name, st_info, st_other, st_shndx)`` of every symbol of a little-endian ELF64."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian 64-bit ELF file (cubin)")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize)
                for k in range(shnum)]
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != 2 or not entsize:  # SHT_SYMTAB
            continue
        strings = sections[link][4]
        for k in range(size // entsize):
            st_name, st_info, st_other, st_shndx = struct.unpack_from(
                "<IBBH", data, offset + k * entsize)
            end = data.index(b"\0", strings + st_name)
            yield data[strings + st_name : end].decode(), st_info, st_other, st_shndx


def binary_entries(binary: bytes | str) -> set[str]:
    """The kernel (entry) names of a cubin or of PTX text.

    A cubin's kernels are its defined function symbols marked ``STO_CUDA_ENTRY``
    (device functions that were not inlined are functions without the mark); PTX's are its
    ``.entry`` directives.
    """
    if isinstance(binary, bytes) and binary[:4] == b"\x7fELF":
        return {
            name for name, info, other, shndx in _elf_symbols(binary)
            if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY and shndx != 0
        }
    text = binary.decode("utf-8", "replace") if isinstance(binary, bytes) else binary
    return set(re.findall(r"\.entry\s+([\w$]+)\s*\(", text))


def binary_kind(binary: bytes | str) -> str:
    """``"cubin"`` or ``"ptx"``."""
    return "cubin" if isinstance(binary, bytes) and binary[:4] == b"\x7fELF" else "ptx"


def effective_flags(options: Iterable[str]) -> dict[str, str]:
    """The value NVRTC ends up with for each of :data:`VALUE_FLAGS` that ``options`` set.

    NVRTC takes the last occurrence of an option (``-ftz=false -ftz=true`` compiles with
    flush-to-zero); ``--use_fast_math`` counts as the values it implies, at its place.
    """
    flags: dict[str, str] = {}
    for option in options:
        word = option.lstrip("-")
        if word in ("use_fast_math", "use-fast-math"):
            flags.update(FAST_MATH)
            continue
        key, sep, value = word.partition("=")
        if sep and key in VALUE_FLAGS:
            flags[key] = value.strip().lower()
    return flags


def flag_problems(loader: Sequence[str], given: Sequence[str]) -> list[str]:
    """Each flag the loader sets that NVRTC does not end up with (``given``: its options)."""
    wanted, got = effective_flags(loader), effective_flags(given)
    return [
        f"the loader sets --{key}={value} but NVRTC ends up with --{key}={got.get(key)} "
        f"(CuPy's path adds options after the loader's and NVRTC takes the last one)"
        for key, value in wanted.items() if got.get(key) != value
    ]


def name_problems(
    name_expressions: Sequence[str], mapping: dict[str, str] | None,
    extern_c: Sequence[str], entries: set[str],
) -> list[str]:
    """What is wrong with the kernels of one compiled source (empty: nothing).

    Every name expression needs a lowered name (``mapping``, from ``nvrtcGetLoweredName``)
    that is an entry of the binary, and every ``extern "C"`` kernel must be an entry.
    """
    problems = []
    mapping = mapping or {}
    for expr in name_expressions:
        lowered = mapping.get(expr)
        if not lowered:
            problems.append(f"name expression {expr!r} has no lowered name")
        elif lowered not in entries:
            problems.append(f"{expr!r} lowers to {lowered} which is no kernel of the binary")
    problems += [f'extern "C" kernel {name} is no kernel of the binary'
                 for name in extern_c if name not in entries]
    return problems


def kernel_summary(name_expressions: Sequence[str], extern_c: Sequence[str]) -> str:
    """``"12 kernels: gather_rows x4, ..."``: the kernels checked, templates counted."""
    counts: dict[str, int] = {}
    for expr in name_expressions:
        base = expr.split("<")[0].strip()
        counts[base] = counts.get(base, 0) + 1
    parts = [f"{base} x{k}" if k > 1 else base for base, k in sorted(counts.items())]
    parts += sorted(extern_c)
    total = len(name_expressions) + len(extern_c)
    return f"{total} kernel{'s' * (total != 1)}: {', '.join(parts) or '-'}"


# --------------------------------------------------------------------------- CuPy's path


@dataclass
class Compiled:
    """What CuPy's compile path produced for one source and arch."""

    binary: bytes | str
    mapping: dict[str, str] | None
    nvrtc_options: list[tuple[str, ...]] = field(default_factory=list)
    log: str = ""

    @property
    def options(self) -> tuple[str, ...]:
        """The options of the last NVRTC compile (the source; earlier ones are CuPy's probe)."""
        return self.nvrtc_options[-1] if self.nvrtc_options else ()


def import_cupy() -> Any:
    """CuPy, or :class:`CheckError` with the reason."""
    try:
        import cupy
        import cupy._core.core  # compile_with_cache
        import cupy.cuda.compiler
    except Exception as e:  # ImportError, or a CUDA library CuPy could not load
        raise CheckError(f"cannot import CuPy ({type(e).__name__}: {e}); `make nvrtc` "
                         f"builds environments that have it") from e
    return cupy


def versions(cupy: Any) -> dict[str, Any]:
    """CuPy's version, its CUDA (runtime) version, NVRTC's version and where it was found."""
    from cupy.cuda import nvrtc, runtime

    try:
        nvrtc_version = tuple(nvrtc.getVersion())
    except Exception as e:
        raise CheckError(f"CuPy {cupy.__version__} cannot load NVRTC "
                         f"({type(e).__name__}: {e})") from e
    where = "?"
    with contextlib.suppress(Exception):
        from cuda.pathfinder import load_nvidia_dynamic_lib

        where = load_nvidia_dynamic_lib("nvrtc").abs_path
    cuda = runtime.runtimeGetVersion()
    return {"cupy": cupy.__version__, "cuda": (cuda // 1000, cuda % 1000 // 10),
            "nvrtc": nvrtc_version, "nvrtc_path": where}


@contextlib.contextmanager
def _driverless_cupy(seen: list[tuple[str, ...]], loaded: dict[str, Any]) -> Iterator[None]:
    """CuPy's compile path with no CUDA context: see the module docstring."""
    from cupy.cuda import compiler, function

    memo = getattr(compiler, "_get_arch_for_options_for_nvrtc", None)
    program = getattr(compiler, "_NVRTCProgram", None)
    if memo is None or not hasattr(memo, "__wrapped__") or program is None \
            or getattr(compiler, "function", None) is not function:
        raise CheckError(
            "CuPy's compiler module is not the one this check knows "
            "(_get_arch_for_options_for_nvrtc.__wrapped__, _NVRTCProgram, function): "
            "update hpcgnn/kernels/nvrtc_check.py for this CuPy")

    class Module(function.Module):
        def load(self, cubin: bytes) -> None:
            loaded["binary"] = cubin

        def _set_mapping(self, mapping: dict[str, str] | None) -> None:
            loaded["mapping"] = mapping

    # (the bases through ``compiler``: ``program`` and ``function``, as checked above)
    class Program(compiler._NVRTCProgram):
        def compile(self, options: tuple[str, ...] = (), log_stream: Any = None) -> Any:
            seen.append(tuple(options))
            return super().compile(options, log_stream)

    functions = type("function", (), {"Module": Module, "LinkState": compiler.function.LinkState})
    saved_env = os.environ.get("CUPY_CACHE_IN_MEMORY")
    os.environ["CUPY_CACHE_IN_MEMORY"] = "1"
    compiler._get_arch_for_options_for_nvrtc = memo.__wrapped__
    compiler._NVRTCProgram = Program
    compiler.function = functions
    try:
        yield
    finally:
        compiler._get_arch_for_options_for_nvrtc = memo
        compiler._NVRTCProgram = program
        compiler.function = function
        if saved_env is None:
            os.environ.pop("CUPY_CACHE_IN_MEMORY", None)
        else:
            os.environ["CUPY_CACHE_IN_MEMORY"] = saved_env


def compile_source(
    code: str, options: tuple[str, ...], arch: str, name_expressions: tuple[str, ...] | None,
) -> Compiled:
    """``code`` compiled by CuPy's ``RawModule`` path for ``arch``, with no driver.

    Raises ``cupy.cuda.compiler.CompileException`` with NVRTC's log when it does not compile.
    """
    from cupy._core import core

    seen: list[tuple[str, ...]] = []
    loaded: dict[str, Any] = {}
    log = io.StringIO()
    with _driverless_cupy(seen, loaded):
        core.compile_with_cache(
            code, options, arch=arch, prepend_cupy_headers=False, backend="nvrtc",
            name_expressions=name_expressions, log_stream=log, jitify=False)
    if "binary" not in loaded:
        raise CheckError("CuPy's compile path produced no binary (did it take the disk cache?)")
    return Compiled(loaded["binary"], loaded.get("mapping"), seen, log.getvalue().strip())


def _one_line(log: str) -> str:
    """A compiler log on one line (its lines joined by `` | ``)."""
    return " | ".join(line.strip() for line in log.splitlines() if line.strip())


def _shown(options: Sequence[str]) -> str:
    """The options without CuPy's include paths."""
    return " ".join(o for o in options if not o.startswith("-I"))


def run(archs: Sequence[str], out: Any = sys.stdout) -> int:
    """Check every source for every arch; the number of problems (printed as they come)."""
    cupy = import_cupy()
    from cupy.cuda.compiler import CompileException

    v = versions(cupy)
    tag = (f"CuPy {v['cupy']} (CUDA {v['cuda'][0]}.{v['cuda'][1]}), "
           f"NVRTC {v['nvrtc'][0]}.{v['nvrtc'][1]}")
    print(f"nvrtc_check: {tag}, NVRTC from {v['nvrtc_path']}", file=out)
    problems = 0
    if v["nvrtc"][0] != v["cuda"][0]:
        print(f"nvrtc_check: FAIL CuPy for CUDA {v['cuda'][0]} found NVRTC {v['nvrtc'][0]} "
              f"({v['nvrtc_path']})", file=out)
        problems += 1
    folder = cm.cuda_dir()
    options = loader_options()
    shown_options = False
    for path in sorted(folder.glob("*.cu")):
        source = path.name
        code = cm.source_text(folder, source)
        exprs = tuple(cm.NAME_EXPRESSIONS.get(source, ()))
        extern_c = extern_c_kernels(code)
        for arch in archs:
            head = f"nvrtc_check: {source} sm_{arch}"
            try:
                result = compile_source(code, options, arch, exprs or None)
            except CompileException as e:
                print(f"{head} FAIL: does not compile: {_one_line(str(e))}", file=out)
                problems += 1
                continue
            if not shown_options:
                print(f"nvrtc_check: NVRTC options (CuPy's -I paths left out): "
                      f"{_shown(result.options)}", file=out)
                shown_options = True
            found = binary_entries(result.binary)
            issues = name_problems(exprs, result.mapping, extern_c, found)
            issues += flag_problems(options, result.options)
            for issue in issues:
                print(f"{head} FAIL: {issue}", file=out)
            if result.log:
                print(f"{head} NVRTC says: {_one_line(result.log)}", file=out)
            problems += len(issues)
            if not issues:
                print(f"{head} ok: {tag}, {binary_kind(result.binary)}, "
                      f"{kernel_summary(exprs, extern_c)}", file=out)
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m hpcgnn.kernels.nvrtc_check",
        description="Compile every cuda/*.cu through CuPy's RawModule path (NVRTC, no GPU "
                    "needed) with the loader's options and name expressions, and check that "
                    "every kernel the loader asks for is in the binary.")
    parser.add_argument("--arch", default=",".join(f"sm_{a}" for a in DEFAULT_ARCHS),
                        help="comma-separated archs (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        archs = parse_archs(args.arch)
    except ValueError as e:
        parser.error(str(e))
    try:
        problems = run(archs)
    except (CheckError, HpcgnnError) as e:
        print(f"nvrtc_check: FAIL {e}")
        return 2
    if problems:
        print(f"nvrtc_check: FAIL {problems} problem(s)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

