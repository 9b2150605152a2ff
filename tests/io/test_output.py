"""HDF5 outputs: written under a temporary name, and a failed write never crashes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from hpcgnn.errors import ConfigError, OutputError
from hpcgnn.io.output import H5Output, write_dataset

ROOT = Path(__file__).resolve().parents[2]


def test_a_committed_output_replaces_the_target(tmp_path: Path) -> None:
    path = tmp_path / "s.h5"
    path.write_text("old")
    with H5Output(path, "--out") as out:
        write_dataset(out.file, "x", np.arange(5), chunks=(2,), compression="gzip")
        write_dataset(out.file, "empty", np.zeros(0))
    with h5py.File(path) as f:
        assert f["x"][()].tolist() == [0, 1, 2, 3, 4] and f["empty"].shape == (0,)
    assert [p.name for p in tmp_path.iterdir()] == ["s.h5"]


def test_a_failure_leaves_the_previous_output_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "s.h5"
    path.write_text("old")
    with pytest.raises(OutputError, match=rf"^--out {path}: No space left on device$"):
        with H5Output(path, "--out") as out:
            write_dataset(out.file, "x", np.arange(5))
            raise OSError(28, "injected")
    with pytest.raises(ValueError), H5Output(path, "--out"):
        raise ValueError("not an output error: passed on as it is")
    assert [p.name for p in tmp_path.iterdir()] == ["s.h5"] and path.read_text() == "old"


def test_symlinks_are_refused(tmp_path: Path) -> None:
    (tmp_path / "victim").write_text("precious")
    (tmp_path / "s.h5").symlink_to(tmp_path / "victim")
    with pytest.raises(ConfigError, match="not a regular file"):
        H5Output(tmp_path / "s.h5", "--out")
    assert (tmp_path / "victim").read_text() == "precious"


# HDF5 writes cached chunks and metadata late; when those writes fail, closing the file
# used to crash the interpreter (SIGSEGV). The file-size limit makes every write fail.
_FULL_DISK = """
import resource, signal, sys
import numpy as np
from hpcgnn.errors import OutputError
from hpcgnn.io.output import H5Output, write_dataset
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]),) * 2)
try:
    with H5Output(sys.argv[1], "--out") as out:
        for k in range(8):
            write_dataset(out.file, str(k), np.random.default_rng(k).random(20000),
                          chunks=(5000,), compression="gzip")
except OutputError as err:
    print(err)
"""


@pytest.mark.parametrize("limit", [0, 50_000, 400_000, 1_200_000])
def test_a_full_disk_is_reported_not_a_crash(tmp_path: Path, limit: int) -> None:
    path = tmp_path / "s.h5"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _FULL_DISK, str(path), str(limit)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    assert proc.stdout == f"--out {path}: File too large\n"
    assert list(tmp_path.iterdir()) == []
