"""Output files that never destroy data: checked before work starts, written atomically.

Every output of a run (metrics, traces, checkpoints, sample files) goes through
:func:`atomic_path` / :func:`atomic_write`: the data is written to a temporary file with
an unpredictable name (``mkstemp``: created exclusively, never through a symlink) in the
target's directory, flushed to disk, then renamed over the target. A crash leaves the
previous output intact, and the temporary file is removed on any error. A target that
exists and is not a regular file (a symlink, a device node, a directory) is refused, never
replaced. :func:`check_output` and :func:`check_directory` run the same checks before a
run starts, so an unwritable ``--metrics`` fails in seconds rather than after training.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from hpcgnn.errors import ConfigError


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _check_target(path: Path, what: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # nothing there (yet)
        return
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{what} {path}: exists and is not a regular file; not replacing it")


def check_directory(path: str | os.PathLike, what: str) -> None:
    """Raise :class:`ConfigError` unless files can be created in ``path`` (or where it would be)."""
    p = Path(path)
    if p.is_symlink() or (p.exists() and not p.is_dir()):
        raise ConfigError(f"{what} {p}: not a directory")
    base = _existing_ancestor(p)
    if not base.is_dir() or not os.access(base, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {p}: {base} is not a writable directory")


def check_output(path: str | os.PathLike, what: str) -> None:
    """Raise :class:`ConfigError` unless ``path`` can be written by :func:`atomic_path`."""
    p = Path(path)
    _check_target(p, what)
    check_directory(p.parent, what)


@contextmanager
def atomic_path(path: str | os.PathLike, what: str = "output") -> Iterator[Path]:
    """Yield a fresh temporary path beside ``path``; on success it replaces ``path``.

    The caller writes the complete file to the yielded path (any library that opens a
    path). On an exception the temporary file is removed and ``path`` is untouched.
    """
    p = Path(path)
    _check_target(p, what)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual mode
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        _check_target(p, what)
        os.replace(tmp, p)
    except BaseException:
        with suppress(FileNotFoundError):
            tmp.unlink()
        raise


def atomic_write(path: str | os.PathLike, data: bytes | str, what: str = "output") -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically; returns the path."""
    blob = data.encode() if isinstance(data, str) else data
    with atomic_path(path, what) as tmp:
        tmp.write_bytes(blob)
    return Path(path)
