import errno
import os
from pathlib import Path

import numpy as np
import pytest

from hpcgnn.errors import ConfigError, OutputError
from hpcgnn.utils.files import (
    TemporaryOutput,
    atomic_path,
    atomic_write,
    check_directory,
    check_output,
    new_temporary,
    os_reason,
    output_errors,
    remove_temporaries,
    temporary_directory,
    write_array,
)


def test_atomic_write_replaces_a_file_and_leaves_no_temporaries(tmp_path):
    out = tmp_path / "sub" / "m.json"
    atomic_write(out, "one")
    atomic_write(out, b"two")
    assert out.read_text() == "two"
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_failed_write_keeps_the_previous_output(tmp_path):
    out = tmp_path / "m.json"
    out.write_text("good")
    with pytest.raises(RuntimeError), atomic_path(out) as tmp:
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert out.read_text() == "good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_symlinks_and_special_files_are_never_replaced_or_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "m.json"
    link.symlink_to(victim)
    for call in (lambda: check_output(link, "--metrics"), lambda: atomic_write(link, "x")):
        with pytest.raises(ConfigError, match="not a regular file"):
            call()
    assert victim.read_text() == "precious" and link.is_symlink()
    # the old predictable temporary name is not used: a planted link there is ignored
    planted = tmp_path / "out.json.tmp"
    planted.symlink_to(victim)
    atomic_write(tmp_path / "out.json", "new")
    assert victim.read_text() == "precious"
    with pytest.raises(ConfigError, match="not a regular file"):
        check_output(tmp_path, "--metrics")  # a directory


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_places_are_refused_up_front(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(ConfigError, match="not a writable directory"):
            check_output(ro / "m.json", "--metrics")
        with pytest.raises(ConfigError, match="not a writable directory"):
            check_directory(ro / "ckpt", "--checkpoint-dir")
    finally:
        ro.chmod(0o700)


def test_missing_parents_are_fine_and_files_are_not_directories(tmp_path):
    check_output(tmp_path / "a" / "b" / "m.json", "--metrics")
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        check_directory(tmp_path / "f", "--checkpoint-dir")


def test_a_failed_write_is_one_output_error_and_keeps_the_previous_output(tmp_path):
    out = tmp_path / "m.json"
    out.write_text("good")
    with pytest.raises(OutputError, match=rf"^--metrics {out}: No space left on device$"):
        with atomic_path(out, "--metrics"):
            raise OSError(errno.ENOSPC, "injected")
    assert out.read_text() == "good"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_write_array_reports_why_a_write_failed():
    # ndarray.tofile would raise "N requested and 0 written", without the reason
    with pytest.raises(OutputError, match=r"^spill files in /dev/full: No space left on device$"):
        with output_errors("/dev/full", "spill files in"), open("/dev/full", "wb") as fh:
            write_array(fh, np.arange(1 << 16))


def test_the_reason_is_found_in_hdf5_messages_too():
    hdf5 = RuntimeError("Unable to flush (file write failed: time = Mon\n, errno = 27, "
                        "error message = 'File too large', offset = 3)")
    assert os_reason(hdf5) == os.strerror(errno.EFBIG)
    assert os_reason(OSError("two\nlines")) == "two lines"


def test_a_temporary_output_is_invisible_until_committed(tmp_path):
    out = TemporaryOutput(tmp_path / "o.bin", "--out")
    out.tmp.write_bytes(b"new")
    assert out.tmp.parent == tmp_path and out.tmp.name.startswith(".o.bin.")
    assert not (tmp_path / "o.bin").exists()
    out.commit()
    assert (tmp_path / "o.bin").read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.bin"]
    again = TemporaryOutput(tmp_path / "o.bin")
    again.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.bin"]


def test_temporaries_are_recorded_until_removed(tmp_path):
    made = [new_temporary(tmp_path, "f-", ".tmp"), new_temporary(tmp_path, "d-", is_dir=True)]
    (made[1] / "spill").write_text("x")
    with temporary_directory(tmp_path, "ctx-") as d:
        assert d.is_dir()
    assert not d.exists()
    remove_temporaries()
    assert list(tmp_path.iterdir()) == []
    remove_temporaries()  # nothing left to do
