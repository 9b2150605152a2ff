import pytest

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.utils.memory import GIB, available_bytes, require_memory


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
