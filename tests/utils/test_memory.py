import pytest

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.utils.memory import GIB, available_bytes, parse_bytes, require_memory


def test_the_limit_can_be_imposed(monkeypatch):
    monkeypatch.setenv("HPCGNN_MEMORY_LIMIT", str(GIB))
    assert available_bytes() == GIB
    require_memory(GIB, "--nodes 10")
    with pytest.raises(ConfigError, match=r"^--nodes 99: needs about 2\.00 GiB of memory "
                                          r"\(2\.15e\+09 bytes\), 1\.00 GiB available$"):
        require_memory(2 * GIB, "--nodes 99")
    with pytest.raises(InputError, match=r"^x\.npy: needs"):
        require_memory(2 * GIB, "x.npy", InputError)


def test_the_node_reports_its_memory(monkeypatch):
    monkeypatch.delenv("HPCGNN_MEMORY_LIMIT", raising=False)
    avail = available_bytes()
    assert avail is None or avail > 0


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0.0), ("4096", 4096.0), ("1.5e3", 1500.0), ("512M", 512.0 * 2**20),
    ("2G", 2.0 * 2**30), ("2GiB", 2.0 * 2**30), ("2gb", 2.0 * 2**30), ("1T", 2.0**40),
    ("3K", 3072.0), ("10B", 10.0),
])
def test_byte_counts_with_binary_suffixes(text, value):
    assert parse_bytes(text, "--x") == value


@pytest.mark.parametrize("text", ["", "G", "-1", "inf", "nan", "1X", "12 M B"])
def test_bad_byte_counts_name_the_flag(text):
    with pytest.raises(ConfigError, match="--x must be a byte count"):
        parse_bytes(text, "--x")


def test_an_allocators_failure_is_one_line():
    from hpcgnn.utils.memory import allocation_failure

    torch_cpu = RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
        "memory: you tried to allocate 1310720000 bytes. Error code 12 (Cannot allocate memory)")
    line = allocation_failure(torch_cpu)
    assert line is not None and "\n" not in line
    assert line.startswith("out of memory: you tried to allocate 1310720000 bytes")
    assert allocation_failure(MemoryError()).startswith("out of memory: MemoryError")
    assert allocation_failure(type("OutOfMemoryError", (Exception,), {})("cuda: 2 GiB"))
    assert allocation_failure(RuntimeError("shapes do not match")) is None
    assert allocation_failure(ValueError("out of memory")) is None


def test_the_address_space_limit_is_what_may_still_be_mapped():
    import subprocess
    import sys

    code = ("import resource; from hpcgnn.utils.memory import address_space_left as a;"
            "hard = resource.getrlimit(resource.RLIMIT_AS)[1];"
            "cap = 6 << 30 if hard == resource.RLIM_INFINITY else min(hard, 6 << 30);"
            "resource.setrlimit(resource.RLIMIT_AS, (cap, hard));"
            "left = a(); assert left is not None and 0 <= left < cap, left")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_freed_memory_is_never_trimmed(monkeypatch):
    """glibc's trim threshold is a size_t: -1 never trims; INT_MAX trimmed 2 GiB tops."""
    import ctypes
    import sys

    from hpcgnn.utils import memory

    calls = []

    def mallopt(option, value):
        calls.append((option, value))
        return 1

    libc = type("Libc", (), {})()
    libc.mallopt = mallopt
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv(memory.KEEP_MEMORY_ENV, raising=False)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc)
    assert memory.keep_freed_memory()
    assert calls == [(-4, 0), (-1, -1)]  # M_MMAP_MAX 0, M_TRIM_THRESHOLD "infinite"
