"""How much memory this node has left, and a check to run before a large allocation.

:func:`available_bytes` reads ``MemAvailable`` (or the ``HPCGNN_MEMORY_LIMIT`` override);
it imports neither MPI nor torch, so single-process tools such as ``hpcgnn prepare`` can
refuse an impossible size in seconds instead of dying in the allocator. The collective
check for distributed runs is :func:`hpcgnn.comm.memory.check_memory`.
"""

from __future__ import annotations

import os
import sys

from hpcgnn.errors import ConfigError, HpcgnnError

GIB = float(1 << 30)


def available_bytes() -> int | None:
    """Memory available on this node (``MemAvailable``), or the ``HPCGNN_MEMORY_LIMIT`` override.

    ``HPCGNN_MEMORY_LIMIT`` (bytes, per node) lets batch scripts and tests impose a limit.
    """
    override = os.environ.get("HPCGNN_MEMORY_LIMIT")
    if override:
        return int(float(override))
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def address_space_left() -> int | None:
    """Bytes this process may still map under its address-space limit (``ulimit -v``).

    ``None`` without a limit. The limit is per process and counts every mapping (a torch
    process maps a few GiB before it allocates anything), so a job's ``ulimit -v`` can
    stop a run that the node's memory would hold.
    """
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm") as fh:
            mapped = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        return None
    return max(0, soft - mapped)


#: Words of the allocators' failures (torch's CPU allocator; torch's and CuPy's device
#: out-of-memory errors are recognised by their class names).
ALLOCATION_FAILED = ("can't allocate memory", "out of memory", "cannot allocate memory")


def allocation_failure(err: BaseException) -> str | None:
    """The one line for an allocation that failed (``MemoryError``, an allocator's error).

    ``None`` for any other exception.
    """
    name = type(err).__name__
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if not (isinstance(err, MemoryError) or name == "OutOfMemoryError"
            or (isinstance(err, RuntimeError)
                and any(w in text.lower() for w in ALLOCATION_FAILED))):
        return None
    asked = text[text.find("you tried to allocate"):] if "you tried to allocate" in text else ""
    left = address_space_left()
    limit = (f"; this process may map {left / GIB:.2f} GiB more under its address-space limit"
             " (ulimit -v)") if left is not None else ""
    what = asked.split(".")[0] if asked else (text[:200] or name)
    return (f"out of memory: {what}{limit}; use more ranks or nodes, a smaller model, or a"
            " higher memory limit")


#: What :func:`peak_rss_bytes` reads (the metrics' ``memory.source``).
PEAK_RSS_SOURCE = "getrusage(RUSAGE_SELF).ru_maxrss"


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far (``getrusage``'s ``ru_maxrss``), bytes.

    A real measurement of everything the process touched: NumPy, torch's CPU allocator,
    MPI buffers, the interpreter and its libraries (``tracemalloc`` sees Python's and
    NumPy's allocations only, torch's allocator statistics exist for CUDA only). It is the
    high-water mark since the process started, so it includes the libraries' baseline and,
    inside a longer-lived process (a test session), whatever ran before.
    """
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # kB on Linux


def current_rss_bytes() -> int:
    """This process's resident set size now (``/proc/self/statm``; else the peak so far)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def require_memory(
    need_bytes: float, what: str, error: type[HpcgnnError] = ConfigError
) -> None:
    """Raise ``error`` naming ``what`` unless ``need_bytes`` are available on this node.

    And to this process: within its address-space limit (:func:`address_space_left`).

    Parameters
    ----------
    need_bytes
        Estimated peak memory of the step about to run.
    what
        What asks for it, e.g. ``"--nodes 1000000000000"``; starts the message.
    error
        :class:`ConfigError` for flags (default), :class:`InputError` for input files.
    """
    avail, left = available_bytes(), address_space_left()
    if avail is not None and need_bytes > avail:
        raise error(
            f"{what}: needs about {need_bytes / GIB:.2f} GiB of memory "
            f"({need_bytes:.3g} bytes), {avail / GIB:.2f} GiB available"
        )
    if left is not None and need_bytes > left:
        raise error(
            f"{what}: needs about {need_bytes / GIB:.2f} GiB of memory "
            f"({need_bytes:.3g} bytes), {left / GIB:.2f} GiB more under this process's"
            " address-space limit (ulimit -v)"
        )


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(text: str, what: str) -> float:
    """``"512M"`` -> ``536870912.0``: a byte count, with an optional K/M/G/T suffix.

    Suffixes are powers of 1024 (``"2G"``, ``"2GiB"`` and ``"2GB"`` are all ``2^31``); the
    number may be fractional or in exponent form (``"1.5e9"``). Raises
    :class:`~hpcgnn.errors.ConfigError` naming ``what`` for anything else or a negative or
    non-finite value.
    """
    body = str(text).strip().upper().removesuffix("IB").removesuffix("B")
    unit = body[-1:] if body[-1:] in _UNITS and body[-1:] else ""
    try:
        value = float(body[: len(body) - len(unit)]) * _UNITS[unit]
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise ConfigError(
            f"{what} must be a byte count such as 268435456, 256M or 1.5G, got '{text}'"
        )
    return value


#: ``mallopt`` parameters of glibc (``malloc.h``).
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
#: ``M_TRIM_THRESHOLD`` that never trims: glibc stores the ``int`` as a ``size_t``, so -1
#: is the largest threshold. ``INT_MAX`` (2 GiB) was not enough: at 4M vertices an epoch's
#: freed arrays (1 GiB each) left more than 2 GiB free at the heap's top, glibc returned it,
#: and every epoch page-faulted 2-4 GiB in again (1d on one rank: 0.5-1M new pages an
#: epoch where 1M vertices had none after the second).
NEVER_TRIM = -1
#: Environment variable that turns :func:`keep_freed_memory` off (``0``).
KEEP_MEMORY_ENV = "HPCGNN_KEEP_MEMORY"


def keep_freed_memory() -> bool:
    """Tell glibc's allocator to keep freed memory for reuse instead of returning it.

    A training epoch frees its activations, masks and gradients and allocates the same
    shapes again in the next. By default glibc serves blocks over 128 KiB to 32 MiB with
    fresh ``mmap`` pages and unmaps them on ``free``, so every epoch page-faults its
    temporaries in again (on CiteSeer most of an epoch). With ``mmap`` off and no trimming
    (``mallopt(M_MMAP_MAX, 0)``, ``mallopt(M_TRIM_THRESHOLD, -1)``: :data:`NEVER_TRIM`) freed blocks
    stay in the heap and the next epoch's allocations of the same sizes reuse them: after
    the first epoch an epoch touches no new pages (``EpochRecord.new_pages``). The heap
    keeps its high-water mark, which fragmentation raises above what the run needed (by a
    third to a half of an epoch's temporaries: ``cost.ranking.HEAP_REUSE``, measured in
    ``perf/results/bench_memory.md``). ``HPCGNN_KEEP_MEMORY=0`` turns
    it off; elsewhere than glibc (no ``mallopt``) nothing changes.

    Returns
    -------
    bool
        Whether the allocator was told.
    """
    if os.environ.get(KEEP_MEMORY_ENV, "1") == "0" or not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, NEVER_TRIM))


def minor_faults() -> int:
    """Minor page faults of this process so far (``getrusage``'s ``ru_minflt``): new pages."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
