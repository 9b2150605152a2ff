import os

import pytest

from hpcgnn.errors import ConfigError
from hpcgnn.utils.files import atomic_path, atomic_write, check_directory, check_output


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
