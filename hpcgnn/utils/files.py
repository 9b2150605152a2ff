"""Output files that never destroy data: checked before work starts, written atomically.

Every output of a run (metrics, traces, checkpoints, sample files) goes through
:func:`atomic_path` / :func:`atomic_write`: the data is written to a temporary file with
an unpredictable name (``mkstemp``: created exclusively, never through a symlink) in the
target's directory, flushed to disk, then renamed over the target. A crash leaves the
previous output intact, and the temporary file is removed on any error. A target that
exists and is not a regular file (a symlink, a device node, a directory) is refused, never
replaced. :func:`check_output` and :func:`check_directory` run the same checks before a
run starts, so an unwritable ``--metrics`` fails in seconds rather than after training.

A write that fails (a full disk, a file-size limit, a quota) becomes one
:class:`~hpcgnn.errors.OutputError` naming the output and the operating system's reason
(:func:`output_errors`). Outputs that are not written in one go (HDF5 files) use
:class:`TemporaryOutput`, the object behind :func:`atomic_path`.

Every temporary file or directory (outputs being written, spill files) is made by
:func:`new_temporary` and recorded until it is removed or renamed into place, so that
:func:`remove_temporaries`, the last step of every command, removes whatever an
interrupted command could not (see :mod:`hpcgnn.utils.interrupts`);
:func:`leaves_nothing_behind` wraps a command or a call of :func:`hpcgnn.api.train` so.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

import numpy as np

from hpcgnn.errors import ConfigError, OutputError
from hpcgnn.utils.interrupts import held, raise_if_interrupted

#: Temporary files and directories that exist now (see :func:`remove_temporaries`).
_TEMPORARIES: set[Path] = set()


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


@contextmanager
def output_directory(path: str | os.PathLike) -> Iterator[Path]:
    """``path`` as a directory, made with its missing parents.

    A failure in the body removes the directories it made, with what the body wrote into
    them (nothing else can be there): a full disk leaves no half-written directory behind.
    An existing directory is left as it is.
    """
    p = Path(path)
    top = None
    q = p
    while not q.exists() and q != q.parent:
        top = q  # the outermost directory this call makes
        q = q.parent
    p.mkdir(parents=True, exist_ok=True)
    try:
        yield p
    except BaseException:
        if top is not None:
            shutil.rmtree(top, ignore_errors=True)
        raise


def check_output(path: str | os.PathLike, what: str) -> None:
    """Raise :class:`ConfigError` unless ``path`` can be written by :func:`atomic_path`."""
    p = Path(path)
    _check_target(p, what)
    check_directory(p.parent, what)


def os_reason(err: Exception) -> str:
    """The operating system's reason for a failed write, e.g. ``No space left on device``.

    Taken from ``err.errno``, or from the ``errno = N`` that HDF5 puts in its messages;
    otherwise the message itself, on one line.
    """
    code = getattr(err, "errno", None) or re.search(r"errno = (\d+)", str(err))
    if isinstance(code, re.Match):
        code = int(code.group(1))
    return os.strerror(code) if code else " ".join(str(err).split())


def output_error(path: str | os.PathLike, what: str, err: Exception) -> OutputError:
    """The :class:`OutputError` that reports ``err``, raised while writing ``path``."""
    return OutputError(f"{what} {path}: {os_reason(err)}")


@contextmanager
def output_errors(
    path: str | os.PathLike, what: str, kinds: tuple[type[Exception], ...] = (OSError,)
) -> Iterator[None]:
    """Raise an exception of ``kinds`` in the body as an :class:`OutputError` naming the output.

    Examples
    --------
    >>> with output_errors("g.h5", "--out"):              # doctest: +SKIP
    ...     fh.write(block)
    OutputError: --out g.h5: No space left on device
    """
    try:
        yield
    except kinds as err:
        raise output_error(path, what, err) from err


def new_temporary(
    parent: str | os.PathLike | None, prefix: str, suffix: str = "", *, is_dir: bool = False
) -> Path:
    """Create a temporary file (``mkstemp``) or directory (``mkdtemp``) in ``parent``.

    ``parent=None`` is the system temporary directory. The path is recorded until
    :func:`remove_temporary`, so :func:`remove_temporaries` can remove it if an interrupt
    or an error skips the owner's clean-up.
    """
    with held():  # created and recorded, or neither
        if is_dir:
            path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        else:
            fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=parent)
            os.close(fd)
            path = Path(name)
        _TEMPORARIES.add(path)
    return path


def remove_temporary(path: Path) -> None:
    """Remove a file or directory made by :func:`new_temporary` (already gone is fine)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with suppress(FileNotFoundError):
            path.unlink()
    _TEMPORARIES.discard(path)


def remove_temporaries() -> None:
    """Remove every temporary still recorded: the last clean-up of a command."""
    for path in list(_TEMPORARIES):
        remove_temporary(path)


@contextmanager
def temporary_directory(parent: str | os.PathLike | None, prefix: str) -> Iterator[Path]:
    """A directory from :func:`new_temporary`, removed with its content on leaving."""
    path = new_temporary(parent, prefix, is_dir=True)
    try:
        yield path
    finally:
        remove_temporary(path)


class TemporaryOutput:
    """A fresh temporary file beside ``path`` that :meth:`commit` renames over ``path``.

    Parameters
    ----------
    path
        The output; checked (a symlink or a non-regular file is refused) but not touched
        until :meth:`commit`.
    what
        How messages name the output, e.g. ``"--out"``.

    Attributes
    ----------
    tmp : pathlib.Path
        The temporary file, created empty (``mkstemp``: exclusively, mode 0600).
    """

    def __init__(self, path: str | os.PathLike, what: str = "output") -> None:
        self.path = Path(path)
        self.what = what
        _check_target(self.path, what)
        with self.errors():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = new_temporary(self.path.parent, f".{self.path.name}.", ".tmp")

    def errors(self) -> AbstractContextManager[None]:
        """:func:`output_errors` for this output."""
        return output_errors(self.path, self.what)

    def commit(self) -> None:
        """Flush the complete temporary file to disk and rename it over the output.

        On any error the temporary file is removed and the output left as it was.
        """
        try:
            with self.errors():
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(self.tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual mode
                with open(self.tmp, "rb+") as fh:
                    os.fsync(fh.fileno())
                _check_target(self.path, self.what)
                raise_if_interrupted()  # never replace the output after an interrupt
                os.replace(self.tmp, self.path)
            _TEMPORARIES.discard(self.tmp)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Remove the temporary file (the output is left as it was)."""
        remove_temporary(self.tmp)


@contextmanager
def atomic_path(path: str | os.PathLike, what: str = "output") -> Iterator[Path]:
    """Yield a fresh temporary path beside ``path``; on success it replaces ``path``.

    The caller writes the complete file to the yielded path (any library that opens a
    path). On an exception the temporary file is removed and ``path`` is untouched; an
    :class:`OSError` is raised as an :class:`OutputError` naming ``what`` and ``path``.
    """
    out = TemporaryOutput(path, what)
    try:
        with out.errors():
            yield out.tmp
    except BaseException:
        out.discard()
        raise
    out.commit()


def atomic_write(path: str | os.PathLike, data: bytes | str, what: str = "output") -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically; returns the path."""
    blob = data.encode() if isinstance(data, str) else data
    with atomic_path(path, what) as tmp:
        tmp.write_bytes(blob)
    return Path(path)


def write_array(fh: BinaryIO, array: np.ndarray) -> None:
    """Append the raw bytes of ``array`` to the binary file ``fh``.

    Unlike :meth:`numpy.ndarray.tofile`, whose error on a short write carries no
    ``errno``, the file's own ``write`` raises an :class:`OSError` that says why (a full
    disk, a file-size limit), which :func:`output_errors` reports.
    """
    fh.write(np.ascontiguousarray(array).data)


def inductor_dir() -> Path | None:
    """The folder torch makes in the temporary directory when an optimiser is built.

    ``torchinductor_<user>`` (torch's default cache folder, unless
    ``$TORCHINDUCTOR_CACHE_DIR`` names another); ``None`` when that variable is set.
    """
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return None
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    try:  # tempfile writes a probe file: none fits on a full disk
        tmp = tempfile.gettempdir()
    except OSError:
        return None
    return Path(tmp) / ("torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


@contextmanager
def leaves_nothing_behind() -> Iterator[None]:
    """Leave nothing behind: no temporary file, no new ``torchinductor_<user>`` folder.

    No temporary file outlives the block (a command, ``hpcgnn.train``), nor the empty
    folder torch makes for an optimiser when it was not there before.
    """
    stray = inductor_dir()
    fresh = stray is not None and not stray.exists()
    try:
        yield
    finally:
        remove_temporaries()
        if fresh and stray is not None:
            with suppress(OSError):  # only when empty: another program's cache stays
                stray.rmdir()
