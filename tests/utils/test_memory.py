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
