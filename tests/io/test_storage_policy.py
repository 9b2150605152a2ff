"""Graph files cannot reach other files, and cannot make a small file read for hours."""

import shutil
import time

import h5py
import numpy as np
import pytest

from hpcgnn.cli.main import main
from hpcgnn.errors import InputError
from hpcgnn.io import GraphFile
from tests.graphs import write_random_graph


@pytest.fixture
def good(tmp_path):
    return write_random_graph(tmp_path / "good.h5", n=30, features=4, seed=1)


def _rewrite_features(src, dst, **create):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        shape, dtype = f["features"].shape, f["features"].dtype
        del f["features"]
        f.create_dataset("features", shape=shape, dtype=dtype, **create)
    return dst


def _refused(path, capsys, words):
    with pytest.raises(InputError, match=words):
        GraphFile(path)
    assert main(["info", str(path)]) == 1
    assert words in capsys.readouterr().err


def test_external_storage_is_refused(good, tmp_path, capsys):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(30 * 4, dtype=np.float32).tobytes())
    path = _rewrite_features(good, tmp_path / "ext.h5", external=[(str(secret), 0, 480)])
    _refused(path, capsys, "uses external storage")


def test_external_and_soft_links_are_refused(good, tmp_path, capsys):
    other = write_random_graph(tmp_path / "other.h5", n=30, features=4, seed=2)
    for kind, link in (("an external link", h5py.ExternalLink(str(other), "/features")),
                       ("a soft link", h5py.SoftLink("/features"))):
        path = tmp_path / f"{kind.split()[1]}.h5"
        shutil.copy(good, path)
        with h5py.File(path, "r+") as f:
            f["labels_link"] = link
        _refused(path, capsys, f"is {kind}")


def test_virtual_datasets_are_refused(good, tmp_path, capsys):
    path = tmp_path / "virtual.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        shape, dtype = f["features"].shape, f["features"].dtype
        layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
        layout[:] = h5py.VirtualSource(str(good), "features", shape=shape)
        del f["features"]
        f.create_virtual_dataset("features", layout)
    _refused(path, capsys, "is virtual")


def test_a_forged_size_is_refused_before_reading(good, tmp_path, capsys):
    path = tmp_path / "forged.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        f.attrs["num_features"] = 10**9
        del f["features"]
        f.create_dataset("features", shape=(30, 10**9), dtype=np.float32, chunks=(1, 1024))
    _refused(path, capsys, "declares 120000000000 bytes but stores 0")


def test_compressed_datasets_are_fine(good, tmp_path):
    path = tmp_path / "gzip.h5"
    shutil.copy(good, path)
    with h5py.File(good) as src, h5py.File(path, "r+") as f:
        x = src["features"][()]
        del f["features"]
        f.create_dataset("features", data=x, compression="gzip", chunks=(10, 4))
    with GraphFile(path) as gf:
        assert np.array_equal(gf.read_features(0, 30), x)


def test_groups_linked_many_times_over_are_checked_once(good, tmp_path):
    # 12^6 paths through 7 groups: checking every path would take hours
    path = tmp_path / "dag.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        groups = [f.create_group(f"g{i}") for i in range(7)]
        for upper, lower in zip(groups[:-1], groups[1:], strict=True):
            for k in range(12):
                upper[f"l{k}"] = lower
        f["loop"] = f["/"]  # a hard link back to the root
    start = time.perf_counter()
    with GraphFile(path) as gf:
        assert gf.meta.num_nodes == 30
    assert time.perf_counter() - start < 10


def test_deep_nesting_is_still_refused(good, tmp_path, capsys):
    path = tmp_path / "deep.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        f.create_group("/".join(f"d{i}" for i in range(10)))
    _refused(path, capsys, "groups nested deeper than 8 levels")


#: A name that would forge an error line and clear the screen if it reached the terminal raw.
HOSTILE = "x\nhpcgnn: error: forged\x1b[2J"


def _one_escaped_line(capsys, path, words):
    """``info`` refuses the file in one line that shows the hostile name escaped."""
    with pytest.raises(InputError) as raised:
        GraphFile(path)
    assert "\x1b" not in str(raised.value) and "\n" not in str(raised.value)
    assert main(["info", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "forged" in err
    assert words in err and "x\\nhpcgnn: error: forged\\x1b[2J" in err


@pytest.mark.parametrize("how", ["soft", "external", "virtual", "deep"])
def test_names_read_from_the_file_are_escaped_in_the_error(good, tmp_path, capsys, how):
    path = tmp_path / "hostile.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        if how == "soft":
            f[HOSTILE] = h5py.SoftLink("/features")
            words = "is a soft link"
        elif how == "external":
            f.create_dataset(HOSTILE, shape=(4,), dtype=np.float32,
                             external=[(str(tmp_path / "secret.bin"), 0, 16)])
            words = "uses external storage"
        elif how == "virtual":
            layout = h5py.VirtualLayout(shape=(4,), dtype=np.float32)
            layout[:] = h5py.VirtualSource(str(good), "labels", shape=(4,))
            f.create_virtual_dataset(HOSTILE, layout)
            words = "is virtual"
        else:
            f.create_group("/".join([HOSTILE] + [f"d{i}" for i in range(9)]))
            words = "groups nested deeper than 8 levels"
    _one_escaped_line(capsys, path, words)


def test_a_hostile_format_attribute_is_escaped(good, tmp_path, capsys):
    path = tmp_path / "format.h5"
    shutil.copy(good, path)
    with h5py.File(path, "r+") as f:
        f.attrs["format"] = HOSTILE
    _one_escaped_line(capsys, path, "not an hpcgnn graph file")


def test_any_error_is_one_line_whatever_it_holds(capsys):
    """The sink: the one error line escapes whatever an error's message carries."""
    assert main(["info", HOSTILE]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "no such file" in err
